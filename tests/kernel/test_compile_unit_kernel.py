"""The default programs compiled as one unit (memtop/probes/unit.py), in the kernel: one
compilation, the same figures as the kernel's own counters, each program still attached, failing
and detached alone."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from support import PausedWorkload, compile_c, memcg, proc_stat_faults, swapfile, vmstat, within

from memtop.core.errors import ProbeError
from memtop.linux import bcc_compat
from memtop.probes.base import BpfProbe, load_together
from memtop.probes.registry import default_probes
from memtop.probes.unit import Section
from memtop.records import Record
from memtop.records.processes import ProcEvent
from memtop.state import State
from memtop.stream.bridge import Bridge
from memtop.views import Options, get_view

MiB = 1 << 20


COUNTER = """
#ifndef STEP
#define STEP 10
#endif
BPF_ARRAY(%(owner)s_calls, u64, 1);
TRACEPOINT_PROBE(syscalls, sys_enter_getpgid) {
    if ((bpf_get_current_pid_tgid() >> 32) != TGID)
        return 0;
    int zero = 0;
    u64 *v = %(owner)s_calls.lookup(&zero);
    if (v)
        __sync_fetch_and_add(v, STEP + args->pid * 0);
    return 0;
}
"""


class Counter(BpfProbe):
    """Counts this process's getpgid calls, STEP per call."""

    tracepoints = ("syscalls:sys_enter_getpgid",)
    shares_unit = True
    text: ClassVar[str] = COUNTER

    def __init__(self, cflags: list[str]) -> None:
        super().__init__()
        self._cflags = cflags

    def section(self) -> Section:
        return Section(
            self.name,
            self.text % {"owner": self.name},
            (*self._cflags, f"-DTGID={os.getpid()}"),
            f"{self.name}.bpf.c",
        )

    def poll(self) -> list[Record]:
        return []

    def calls(self, bpf: Any = None) -> int:
        return int((bpf or self.bpf)[f"{self.name}_calls"][ctypes.c_int(0)].value)


# a probe's name is its class's: one class per name
class CounterA(Counter):
    name = "ca"


class CounterB(Counter):
    name = "cb"


class Good(Counter):
    name = "cgood"


class Broken(Counter):
    name = "cbad"
    text = COUNTER.replace("return 0;\n}", "return 0;\n")  # unbalanced brace


def anon_fds(kind: str) -> int:
    n = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            n += os.readlink(fd) == f"anon_inode:{kind}"
        except OSError:
            pass
    return n


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The texts handed to libbcc, one per compilation."""
    seen: list[str] = []
    real = bcc_compat.compile_text

    def counting(text: str, cflags: list[str] | None = None) -> Any:
        seen.append(text)
        return real(text, cflags)

    monkeypatch.setattr(bcc_compat, "compile_text", counting)
    yield seen


@pytest.mark.bpf
def test_programs_in_one_unit_count_and_detach_alone(compiles: list[str]) -> None:
    """Two programs on the same tracepoint, one compilation; each keeps its own configuration
    (STEP from -D for one, its default for the other) and detaches alone; the last one out frees
    the module."""
    if (
        not Path("/sys/kernel/tracing/events/syscalls/sys_enter_getpgid").exists()
        and not Path("/sys/kernel/debug/tracing/events/syscalls/sys_enter_getpgid").exists()
    ):
        pytest.skip("no syscall tracepoints in this kernel")
    progs0, perf0 = anon_fds("bpf-prog"), anon_fds("[perf_event]")
    a, b = CounterA(["-DSTEP=1"]), CounterB([])
    outcomes = load_together([a, b])
    assert [exc for _, exc in outcomes] == [None, None]
    assert len(compiles) == 1
    assert a.bpf.shared_with() == ["cb"] and b.bpf.shared_with() == ["ca"]
    for _ in range(50):
        os.getpgid(0)
    assert (a.calls(), b.calls()) == (50, 500)
    keep = b.bpf
    a.close()  # only a's hook goes
    for _ in range(50):
        os.getpgid(0)
    assert (a.calls(keep), b.calls()) == (50, 1000)
    assert anon_fds("[perf_event]") == perf0 + 1
    b.close()
    assert (anon_fds("bpf-prog"), anon_fds("[perf_event]")) == (progs0, perf0)


@pytest.mark.bpf
def test_a_unit_that_does_not_compile_falls_back_to_one_program_each(
    compiles: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    good, bad = Good([]), Broken([])
    outcomes = dict(load_together([good, bad]))
    assert "cgood.bpf.c + cbad.bpf.c as one unit failed to load" in caplog.text
    assert outcomes[good] is None
    err = outcomes[bad]
    assert isinstance(err, ProbeError) and "cbad.bpf.c" in err.message
    assert len(compiles) == 3  # the unit, then each alone
    assert good.bpf.shared_with() == []
    os.getpgid(0)
    assert good.calls() == 10
    good.close()
    bad.close()


@pytest.mark.bpf
def test_default_probes_as_one_unit_match_the_kernel(compiles: list[str]) -> None:
    """memtop's start, as the app does it (the bridge): one compilation for the four default
    programs; then 300 MiB in a 100 MiB memory cgroup with swap. Reclaim (vmscan) equals
    /proc/vmstat, swap-ins (swapin) the workload's major faults, the exec is seen (procmem) and the
    OOM probe's hooks on the same reclaim tracepoints as vmscan's ran for the workload."""
    exe = compile_c("swapfill")
    probes = default_probes()
    bridge = Bridge(probes, require_bpf=True)
    state = State(mode="bpf")
    bridge.subscribe(lambda batch: state.apply(batch))
    events: list[ProcEvent] = []
    bridge.subscribe(lambda batch: events.extend(r for r in batch.records if isinstance(r, ProcEvent)))

    import asyncio

    async def start() -> None:
        await bridge.start()
        assert await bridge.wait_settled(120)

    asyncio.run(start())
    try:
        statuses = bridge.statuses()
        bpf_names = {p.name for p in probes if isinstance(p, BpfProbe) and p.shares_unit}
        assert {n: statuses[n].state for n in bpf_names} == dict.fromkeys(bpf_names, "attached"), statuses
        assert all("compiled with" in statuses[n].message for n in bpf_names), statuses
        assert len(compiles) == 1
        with swapfile(), memcg(100 * MiB) as cg:
            w = PausedWorkload(str(exe), "300")
            try:
                cg.add(w.pid)
                bridge.publish(bridge.poll_sync(force=True))
                vm0 = get_view("vmscan").document(state, Options())
                k0, maj0 = vmstat(), proc_stat_faults(w.pid)[1]
                w.run()
                k1, majflt = vmstat(), proc_stat_faults(w.pid)[1] - maj0
                bridge.publish(bridge.poll_sync(force=True))
                vm1 = get_view("vmscan").document(state, Options())
                swap = get_view("swapin").document(state, Options(pid=w.pid))
                oom = bridge.probe("oom")
                assert oom is not None and isinstance(oom, BpfProbe)
                last = oom.bpf["last_reclaim"]
                scope = last.get(last.Key(w.pid))
            finally:
                w.close()
    finally:
        bridge.close()

    steal = sum(k1.get(k, 0) - k0.get(k, 0) for k in ("pgsteal_anon", "pgsteal_file"))
    before = {r["origin"]: r["pages_reclaimed"] for r in vm0["rows"]}
    ours = sum(r["pages_reclaimed"] - before.get(r["origin"], 0) for r in vm1["rows"])
    assert steal >= 200 * MiB // os.sysconf("SC_PAGE_SIZE"), "no pressure: the test is void"
    assert abs(ours - steal) <= max(0.05 * steal, 64), (ours, steal)
    row = {r["pid"]: r for r in swap["rows"]}[w.pid]
    assert majflt > 1000 and within(row["swapins"], majflt), (row, majflt)
    assert any(e.event == "exec" and e.pid == w.pid and e.comm == "swapfill" for e in events)
    assert scope is not None and scope.value == 1  # SCOPE_MEMCG: its latest reclaim was the memcg's
