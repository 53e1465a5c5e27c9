"""MGLRU's page ages on a real memcg (this kernel has no MGLRU: debugfs ``lru_gen`` is a fixture in
the documented format, naming the memcg the test creates, with 96 MiB of anonymous memory in it):
the cgroups probe, on this machine's own layout (hybrid here: the v1 memory controller), maps
lru_gen's memcg path to the cgroup it reads and the view's needed memory comes from the ages;
when the file goes, memory.stat's estimate (the anonymous memory whole, as memory.stat counts it)
is back at the next read."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import LineReader, compile_c, memcg

from memtop.linux import kernelfs
from memtop.probes.cgroups import CgroupsProbe
from memtop.records import Batch
from memtop.records.cgroups import CgroupLruGen
from memtop.state import State
from memtop.stream.bridge import now_ns
from memtop.views import Options, get_view

MiB = 1 << 20


def pages(n_mib: int) -> int:
    return n_mib * MiB // kernelfs.PAGE


@pytest.mark.bpf
def test_lru_gen_ages_of_a_real_memcg() -> None:
    with memcg(512 * MiB) as cg, tempfile.TemporaryDirectory(prefix=f"memtop-mglru-{os.getpid()}-") as t:
        # 96 MiB touched once, in the memcg from its first page (it joins before it execs): the
        # ages below add up to less than its usage, as a real listing's do
        proc = subprocess.Popen(
            ["sh", "-c", f"echo $$ > {cg.path / 'cgroup.procs'} && exec {compile_c('hotset')} 96 0 100000"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        try:
            LineReader(proc.stdout, "hotset").wait_for("ready")
            check(cg.name, cg.stat, Path(t))
        finally:
            proc.kill()
            proc.wait()


def check(name: str, stat: Callable[[], dict[str, int]], fx: Path) -> None:
    path = f"/{name}"
    (fx / "debug").mkdir()
    lru_gen = fx / "debug" / "lru_gen"
    lru_gen.write_text(
        "memcg     1 /\n node     0\n          0      98000          0          0\n"
        f"memcg    42 {path}\n node     0\n"
        f"          5      30000 {pages(48):10d} {pages(16):10d}\n"
        f"          6       4000 {pages(8):10d} {pages(8):10d}\n"
        # a memcg memtop does not read: left out of the record
        "memcg    43 /memtop-mglru-not-a-cgroup\n node     0\n          1    10 100 100\n"
    )
    (fx / "proc" / "self").mkdir(parents=True)
    mountinfo = Path("/proc/self/mountinfo").read_text()
    (fx / "proc" / "self" / "mountinfo").write_text(
        mountinfo + f"999 1 0:99 / {fx / 'debug'} rw,relatime shared:999 - debugfs debugfs rw\n"
    )
    (fx / "sys" / "kernel" / "mm" / "lru_gen").mkdir(parents=True)
    (fx / "sys" / "kernel" / "mm" / "lru_gen" / "enabled").write_text("0x0007\n")
    probe = CgroupsProbe(str(fx / "proc"), sys_root=str(fx / "sys"))
    probe.load()  # this machine's own layout, from its mountinfo
    state = State(mode="bpf")
    try:
        recs = probe.poll()
        (lru,) = [r for r in recs if isinstance(r, CgroupLruGen)]
        assert {p for p, _g in lru.memcgs} <= {"/", path} and path in dict(lru.memcgs)
        state.apply(Batch(now_ns(), tuple(recs)))
        need = detail(state, path)
        assert need["source"] == "lru_gen", need
        assert (need["needed_bytes"], need["cold_bytes"]) == (16 * MiB, 64 * MiB)
        assert (need["young_anon_bytes"], need["old_anon_bytes"]) == (8 * MiB, 48 * MiB)
        assert need["limit_bytes"] == 512 * MiB
        # the file gone: the next read says why, and memory.stat's estimate is back
        lru_gen.unlink()
        probe._lru_gen_ns = None
        before = anon(stat())
        state.apply(Batch(now_ns(), tuple(probe.poll())))
        after = anon(stat())
        need = detail(state, path)
        assert need["source"] == "memory.stat" and need["young_anon_bytes"] is None
        assert min(before, after) <= need["anon_bytes"] <= max(before, after)
        assert need["needed_bytes"] >= need["anon_bytes"] >= 90 * MiB
    finally:
        probe.close()


def anon(st: dict[str, int]) -> int:
    """Its anonymous memory as memory.stat counts it (v1 ``total_rss``, v2 ``anon``)."""
    return st["total_rss"] if "total_rss" in st else st["anon"]


def detail(state: State, path: str) -> dict[str, Any]:
    doc = get_view("cgroups").document(state, Options(extra={"cgroup": path}))
    need = doc["detail"]["needed"]
    assert need is not None
    return dict(need)
