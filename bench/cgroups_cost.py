"""Case: the cgroups pane's cost with 500 cgroups at 1 s refresh (issue 23: <= 2 % of a core).

Two measures, alternated over rounds, medians quoted:

* whole memtop (headless, every default probe attached, steady state) with 500 sleeping processes,
  and with the same 500 each in a v1 memcg of its own (and, on a hybrid machine, its cgroup2 twin,
  whose memory.pressure is read too): CPU % of a core over a window; the difference is what 500
  cgroups cost;
* in process, what one tick of the pane costs with the 500 cgroups: the probe's poll, the state's
  apply and the view's document (what the TUI draws from), in ms; x1 tick/s is % of a core.

usage: sudo .venv/bin/python bench/cgroups_cost.py [ROUNDS]"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import QUIET_S, machine, memtop_ready, pane_tick_ms, save
from harness import process_cpu_s as cpu_s

from memtop.linux import cgroupfs
from memtop.probes.cgroups import CgroupsProbe
from memtop.state.cgroups import CgroupsState

N = 500


@contextmanager
def many_cgroups(n: int = N, cgroups: bool = True) -> Iterator[list[Path]]:
    """``n`` sleeping processes, each in a memcg of its own (and its cgroup2 twin) or, with
    ``cgroups`` False, where they start: the baseline has the same processes to read."""
    lay = cgroupfs.layout()
    assert lay.memory is not None, "no memory controller"
    top = Path(lay.memory.mountpoint)
    twin_top = Path(lay.unified.mountpoint) if lay.mode == "hybrid" and lay.unified else None
    made: list[Path] = []
    sleepers: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(n):
            p = subprocess.Popen(["sleep", "3600"])
            sleepers.append(p)
            if not cgroups:
                continue
            d = top / f"memtop-bench-{os.getpid()}-{i:03d}"  # pid: benches beside each other
            d.mkdir()
            made.append(d)
            limit = "memory.limit_in_bytes" if lay.memory.version == 1 else "memory.max"
            (d / limit).write_text(str(64 << 20))
            (d / "cgroup.procs").write_text(str(p.pid))
            if twin_top is not None:
                t = twin_top / d.name
                t.mkdir()
                made.append(t)
                (t / "cgroup.procs").write_text(str(p.pid))
        yield made
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
        for d in reversed(made):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def memtop_cpu(seconds: float) -> float:
    """memtop's CPU in its steady state (as bench/memtop_self.py: once every row's sparkline is
    full, 15 s after attach)."""
    with memtop_ready() as (proc, _):
        time.sleep(15)
        c0, t0 = cpu_s(proc.pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = cpu_s(proc.pid), time.monotonic()
        return 100 * (c1 - c0) / (t1 - t0)


def tick_ms(ticks: int = 30) -> dict[str, float]:
    probe = CgroupsProbe()
    probe.load()
    tick, state = pane_tick_ms(probe, "cgroups", ticks)
    return {**tick, "cgroups": float(len(state.get(CgroupsState).rows))}


def main(rounds: int = 3, seconds: float = 10) -> dict[str, Any]:
    base: list[float] = []
    loaded: list[float] = []
    ticks: list[dict[str, float]] = []
    for _ in range(rounds):
        with many_cgroups(cgroups=False):
            time.sleep(QUIET_S)
            base.append(memtop_cpu(seconds))
        with many_cgroups():
            time.sleep(QUIET_S)
            loaded.append(memtop_cpu(seconds))
            ticks.append(tick_ms())
    result: dict[str, Any] = {
        "machine": machine(),
        "cgroups_added": N,
        "memtop_cpu_pct_base": statistics.median(base),
        "memtop_cpu_pct_500": statistics.median(loaded),
        "memtop_cpu_pct_added": statistics.median(b - a for a, b in zip(base, loaded, strict=True)),
        "pane_tick": {k: statistics.median(t[k] for t in ticks) for k in ticks[0]},
        "rounds": rounds,
    }
    save("cgroups_cost", result)
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3), indent=1))
