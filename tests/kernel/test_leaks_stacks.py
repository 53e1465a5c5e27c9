"""The leaks program walks user stacks itself (the default, kernel_stacks=False: one bulk copy of
the stack's top, the frame-pointer chain followed inside it): each allocation must land on the same frames as the kernel's own walker
(bpf_get_stackid) gives, with the same bytes, whether the frames sit inside the copy, beyond it
(big locals), on a thread's stack, or on a stack whose top is too close for the copy at all."""

from __future__ import annotations

import subprocess

import pytest
from support import case_lines, compile_c

from memtop.records import Batch
from memtop.state import State
from memtop.stream.bridge import now_ns
from memtop.views import Options
from memtop.views.leaks import LeaksView, LeakTableRow

CASES = ("sw_shallow", "sw_deep_leak", "sw_thread_leak", "sw_edge_leak")


def under_both_walks(
    binary: str, cflags: list[str]
) -> tuple[dict[str, tuple[int, int]], dict[str, list[LeakTableRow]], dict[str, dict[str, int]]]:
    """Run a workload with the own walk and the kernel's attached at once: its case lines, each
    walk's leak rows, and each probe's counters."""
    from memtop.probes.leaks import LeaksProbe

    proc = subprocess.Popen(
        [str(compile_c(binary, cflags))], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None
    probes = {"own": LeaksProbe([proc.pid]), "kernel": LeaksProbe([proc.pid], kernel_stacks=True)}
    states = {k: State(mode="bpf") for k in probes}
    try:
        assert proc.stdout.readline().startswith("ready")
        for p in probes.values():
            p.load()
            assert p.targets[proc.pid].state == "tracing", p.targets[proc.pid]
        proc.stdin.write("go\n")
        proc.stdin.flush()
        cases = case_lines(proc.stdout)
        for k, p in probes.items():
            states[k].apply(Batch(now_ns(), tuple(p.poll())))
        counters = {k: p.counters() for k, p in probes.items()}
    finally:
        for p in probes.values():
            p.close()
        proc.kill()
        proc.wait()
    return cases, {k: LeaksView().rows(st, Options()) for k, st in states.items()}, counters


def leak_rows(rows: dict[str, list[LeakTableRow]], name: str) -> dict[str, LeakTableRow]:
    """Each walk's one row whose innermost frame is ``name``."""
    got = {}
    for k, walk in rows.items():
        mine = [r for r in walk if r["frames"][0].startswith(name + "+")]
        assert len(mine) == 1, (k, name, mine)
        got[k] = mine[0]
    return got


@pytest.mark.bpf
def test_own_stack_walk_matches_the_kernels() -> None:
    cases, rows, counters = under_both_walks("stackwalk", ["-pthread"])
    assert set(cases) == set(CASES)
    for name, (count, requested) in cases.items():
        got = leak_rows(rows, name)
        own, kern = got["own"], got["kernel"]
        print(name, own["frames"])
        assert own["frames"] == kern["frames"], (name, own["frames"], kern["frames"])
        assert own["allocations"] == kern["allocations"] == count, (name, own, kern)
        assert own["outstanding_bytes"] == kern["outstanding_bytes"] >= requested, (name, own, kern)
    # the deep case's frames are all there: four sw_deep frames between the leak and main
    deep = next(r for r in rows["own"] if r["frames"][0].startswith("sw_deep_leak+"))
    assert [f.split("+")[0] for f in deep["frames"][1:7]] == ["sw_deep"] * 5 + ["main"], deep["frames"]
    assert counters["own"].get("stacks (no stack id)", 0) == 0, counters


@pytest.mark.bpf
def test_a_frame_pointer_below_the_stack_is_no_frame() -> None:
    """Code built without frame pointers leaves anything in rbp. Here it holds a heap address with
    a plausible frame (saved rbp 0, a return address) at the malloc: the kernel's walker reads it
    as a frame (which shows rbp was set), the own walk stops, as a caller's frame is never below
    its stack pointer, and still counts every block under its caller."""
    cases, rows, _ = under_both_walks("fakefp", ["-mno-red-zone"])
    (count, requested) = cases["ff_leak"]
    got = leak_rows(rows, "ff_leak")
    # ff_leak, then the process (the tree's root); the kernel's walker has the fake return between
    kern, own = got["kernel"]["frames"], got["own"]["frames"]
    assert len(kern) == 3 and kern[1] == "0x5eed0000beef", kern
    assert len(own) == 2 and own[0] == kern[0] and own[1] == kern[2], own
    assert got["own"]["allocations"] == count, got["own"]
    assert got["own"]["outstanding_bytes"] >= requested, got["own"]
