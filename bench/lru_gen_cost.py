"""Case: what MGLRU's page ages cost the cgroups probe (issue 38, item 2).

Where MGLRU is on, the cgroups probe reads debugfs ``lru_gen`` every 5 s at most and the state
splits each cgroup's generations at the needed window. This kernel has no MGLRU, so the file is
a fixture in the documented format (Documentation/admin-guide/mm/multigen_lru.rst) for 500
memcgs of a v2 tree (each on 2 nodes with 4 generations), read by the real probe: the CPU time
of one read (open, read, parse, the record) and of the state applying it, in ms of this thread's
CPU time (medians), and so the share of a core at one read per 5 s. Target: the NEEDED column's,
≤ 2 % of a core. No root needed.

usage: .venv/bin/python bench/lru_gen_cost.py [ROUNDS]"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import machine, save

from memtop.linux import cgroupfs
from memtop.probes.cgroups import LRU_GEN_EVERY_NS, CgroupsProbe
from memtop.records import Batch, ProbeStatus
from memtop.records.cgroups import CgroupLruGen, CgroupSample
from memtop.state import State

CGROUPS = 500
NODES, GENS = 2, 4


def fixture(top: Path) -> CgroupsProbe:
    """A v2 tree of CGROUPS memcgs, a debugfs with their lru_gen, MGLRU on; the probe over it."""
    root = top / "cg"
    root.mkdir()
    (root / "cgroup.controllers").write_text("memory\n")
    lines = ["memcg     1 /", " node     0", "          0      99000          0          0"]
    for i in range(CGROUPS):
        d = root / f"app-{i:03d}"
        d.mkdir()
        (d / "memory.current").write_text(f"{(i + 1) << 20}\n")
        (d / "memory.stat").write_text("anon 1048576\nactive_file 0\ninactive_file 0\n")
        (d / "cgroup.procs").write_text("")
        lines.append(f"memcg {i + 2:5d} /app-{i:03d}")
        for node in range(NODES):
            lines.append(f" node {node:5d}")
            for g in range(GENS):
                lines.append(f" {g + 10:10d} {3000 * (GENS - g) ** 2:10d} {100 * g:10d} {200 * g:10d}")
    (top / "debug").mkdir()
    (top / "debug" / "lru_gen").write_text("\n".join(lines) + "\n")
    (top / "proc" / "self").mkdir(parents=True)
    (top / "proc" / "self" / "mountinfo").write_text(
        f"30 1 0:7 / {top / 'debug'} rw,nosuid shared:14 - debugfs debugfs rw\n"
    )
    (top / "sys" / "kernel" / "mm" / "lru_gen").mkdir(parents=True)
    (top / "sys" / "kernel" / "mm" / "lru_gen" / "enabled").write_text("0x0007\n")
    probe = CgroupsProbe(str(top / "proc"), sys_root=str(top / "sys"))
    h = cgroupfs.Hierarchy(str(root), 2, ("memory",))
    probe.layout = cgroupfs.Layout("v2", (h,), h, h, True)
    return probe


def main(rounds: int = 30) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memtop-bench-lru-gen-") as t:
        top = Path(t)
        probe = fixture(top)
        state = State(mode="bpf")
        recs = probe.poll()
        state.apply(Batch(1, (ProbeStatus("cgroups", "attached"), *recs)))
        now = {r.path: r for r in recs if isinstance(r, CgroupSample)}
        size = (top / "debug" / "lru_gen").stat().st_size
        read_ms: list[float] = []
        apply_ms: list[float] = []
        for i in range(rounds):
            probe._lru_gen_ns = None  # due: the probe reads it every LRU_GEN_EVERY_NS
            t0 = time.thread_time()
            rec = probe._lru_gen(now)
            read_ms.append((time.thread_time() - t0) * 1e3)
            assert isinstance(rec, CgroupLruGen) and len(rec.memcgs) == CGROUPS + 1  # and the root
            t0 = time.thread_time()
            state.apply(Batch(2 + i, (rec,)))
            apply_ms.append((time.thread_time() - t0) * 1e3)
        probe.close()
    every_s = LRU_GEN_EVERY_NS / 1e9
    read, apply = statistics.median(read_ms), statistics.median(apply_ms)
    result: dict[str, Any] = {
        "machine": machine(),
        "rounds": rounds,
        "cgroups": CGROUPS,
        "nodes": NODES,
        "generations": GENS,
        "file_bytes": size,
        "read_ms": read,
        "read_ms_max": max(read_ms),
        "apply_ms": apply,
        "every_s": every_s,
        # ms of CPU per read, one read per every_s -> % of a core
        "cpu_pct": (read + apply) / (every_s * 1e3) * 100,
    }
    save("lru_gen_cost", result)
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30), indent=1))
