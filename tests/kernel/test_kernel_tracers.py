"""The Kernel pane's slab tracers are exclusive: `f` then `k` runs one tracer, and leaving the pane
detaches it. `k` came while the `f` tracer was still compiling: the source found no tracer of
that name attached or queued, kept it, and it attached after and ran on forever (two slab
tracers, one of them after the pane was left). memtop runs on a real pseudo-terminal and its BPF
programs are read from the kernel (bpftool)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from support import PtyMemtop, bpf_left_behind, bpftool, prog_ids_of

pytestmark = pytest.mark.bpf


def slab_tracers(pid: int) -> dict[str, int]:
    """memtop's slab tracer programs by tracer, told apart by their maps (bpf/slabtrace.bpf.c):
    slab_stacks only with -DSTACKS (slabstacks), live only with -DFREES (slabfrees)."""
    maps = {m["id"]: m.get("name", "") for m in bpftool("map", "show")}
    mine = prog_ids_of(pid)
    out: dict[str, int] = {}
    for prog in bpftool("prog", "show"):
        if prog["id"] not in mine:
            continue
        names = {maps.get(i, "") for i in prog.get("map_ids", [])}
        if "slab_counters" not in names:
            continue
        tracer = "slabstacks" if "slab_stacks" in names else "slabfrees" if "live" in names else "slabtrace"
        out[tracer] = out.get(tracer, 0) + 1
    return out


def wait_until(cond: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < end, what
        time.sleep(0.1)


def test_f_then_k_runs_one_slab_tracer_and_leaving_detaches_it() -> None:
    m = PtyMemtop(["--pane", "kernel"])
    try:
        m.wait_ready()
        mine = prog_ids_of(m.pid)
        assert slab_tracers(m.pid) == {}
        m.send(b"f", 0)  # the frees tracer starts compiling...
        m.send(b"k", 0)  # ...and is swapped for the one with kernel stacks
        wait_until(lambda: "slabstacks" in slab_tracers(m.pid), "the slabstacks tracer never attached")
        # the loader compiles one program at a time: the slabfrees one was done before this one
        assert set(slab_tracers(m.pid)) == {"slabstacks"}
        m.send(b"1", 0)  # leave the pane
        wait_until(lambda: not slab_tracers(m.pid), f"outlived the pane: {slab_tracers(m.pid)}", 30)
        mine |= prog_ids_of(m.pid)
        m.send(b"q", 0)
        assert m.wait_gone(30), "memtop did not exit"
    finally:
        m.kill()
    assert bpf_left_behind(m.pid, mine) == {}
