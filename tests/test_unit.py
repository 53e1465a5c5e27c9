"""The default programs compiled as one unit (memtop/probes/unit.py): one compilation, the same
figures as the kernel's own counters, each program still attached, failing and detached alone."""

from __future__ import annotations

import ctypes
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from support import compile_c, memcg, proc_stat_faults, swapfile, vmstat
from test_swapin import Workload, within

from memtop import bcc_compat, resources, startup_gc
from memtop.bridge import Bridge
from memtop.errors import ProbeError
from memtop.probes.base import BpfProbe, load_together
from memtop.probes.registry import all_probe_classes, default_probes
from memtop.probes.unit import Section, build
from memtop.records import Record
from memtop.records.system import ProcEvent
from memtop.state import State
from memtop.views import Options, get_view

MiB = 1 << 20


def shared_classes() -> list[type[BpfProbe]]:
    return [c for c in all_probe_classes() if issubclass(c, BpfProbe) and c.shares_unit]


def test_default_programs_can_share_a_unit() -> None:
    """Every probe attached at start shares the unit, and their programs declare no global twice
    (a clash would make every start fall back to one compilation per program)."""
    names = {c.name for c in shared_classes()}
    assert names == {p.name for p in default_probes() if isinstance(p, BpfProbe)}
    sections = [Section.from_file(c.name, resources.bpf_source(c.program)) for c in shared_classes()]
    built = build(sections)
    assert set(built.tracepoints) == names
    # two programs hook the same tracepoints (reclaim begins): the second names the struct
    # through a typedef instead of declaring it again
    users: dict[str, list[str]] = {}
    for owner, tps in built.tracepoints.items():
        for _fn, tp in tps:
            users.setdefault(tp, []).append(owner)
    shared = [tp for tp, owners in users.items() if len(owners) > 1]
    assert "vmscan:mm_vmscan_memcg_reclaim_begin" in shared
    assert built.text.count("typedef struct tracepoint__vmscan__mm_vmscan_memcg_reclaim_begin ") == 1


def test_build_refuses_a_global_declared_twice() -> None:
    a = Section("a", "BPF_PERCPU_ARRAY(lost, u64, 1);\n", origin="a.bpf.c")
    b = Section("b", 'BPF_TABLE("lru_hash", u32, u64, lost, 16);\n', origin="b.bpf.c")
    with pytest.raises(ProbeError, match="'lost'"):
        build([a, b])
    c = Section("c", "struct lost { int x; };\nstatic __always_inline int helper(void) {\n  return 0;\n}\n")
    d = Section("d", "static __always_inline int\nhelper(void) { return 1; }\n")
    with pytest.raises(ProbeError, match="'helper'"):
        build([c, d])
    with pytest.raises(ProbeError, match="owners"):
        build([a, Section("a", "")])


def test_build_scopes_each_sections_macros() -> None:
    """A section's -D flags and #defines are undefined before the next section starts."""
    a = Section("a", "#ifndef STEP\n#define STEP 10\n#endif\n#define ONLY_A 1\n", ("-DSTEP=1", "-Ifoo"))
    b = Section("b", "#ifndef STEP\n#define STEP 10\n#endif\n", ("-Ifoo", "-Ibar"))
    built = build([a, b])
    text = built.text
    first_b = text.index('#line 1 "b"')
    a_start = text.index('#line 1 "a"')
    assert "#define STEP 1\n" in text[:a_start]
    after_a = text[a_start:first_b]
    last_undef = after_a.rindex("#undef STEP")
    assert "#undef ONLY_A" in after_a and "#define STEP" not in after_a[last_undef:]
    assert built.cflags == ["-Ifoo", "-Ibar"]


# -- in the kernel --------------------------------------------------------------------------------

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

    def __init__(self, name: str, cflags: list[str]) -> None:
        super().__init__()
        self.name = name  # type: ignore[misc]
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


class Broken(Counter):
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
    a, b = Counter("ca", ["-DSTEP=1"]), Counter("cb", [])
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
    good, bad = Counter("cgood", []), Broken("cbad", [])
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
    bridge = Bridge(default_probes(), require_bpf=True)
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
        bpf_names = {"procmem", "vmscan", "swapin", "oom"}
        assert {n: statuses[n].state for n in bpf_names} == dict.fromkeys(bpf_names, "attached"), statuses
        assert all("compiled with" in statuses[n].message for n in bpf_names), statuses
        assert len(compiles) == 1
        with swapfile(), memcg(100 * MiB) as cg:
            w = Workload(str(exe), "300")
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


def test_tracepoint_functions_are_named_per_program() -> None:
    built = build([Section("x", "TRACEPOINT_PROBE(sched, sched_switch) { return 0; }\n")])
    assert built.tracepoints == {"x": [("x__tp__sched__sched_switch", "sched:sched_switch")]}
    assert re.search(r"#define MEMTOP_TP_FN\(tp\) x__tp__##tp", built.text)


class Recorder(BpfProbe):
    """Notes whether the app had drawn its first frame when it was asked to load."""

    name = "recorder"
    app: Any = None

    def __init__(self) -> None:
        super().__init__()
        self.drawn_at_load: bool | None = None

    def load(self) -> None:
        self.drawn_at_load = self.app.first_frame_s is not None

    def poll(self) -> list[Record]:
        return []


async def test_app_compiles_after_its_first_frame_and_collects_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """As `memtop` starts: BPF probes wait for the first frame (compiling competed with drawing
    it), and the garbage collector, held from start-up, runs again once it is on screen."""
    import gc

    from memtop import startup_gc
    from memtop.probes.procfs import ProcfsProbe
    from memtop.ui.app import MemtopApp

    monkeypatch.setattr(bcc_compat, "check_can_load", lambda: None)
    probe = Recorder()
    bridge = Bridge([ProcfsProbe(), probe], defer_bpf=True)
    app = MemtopApp(bridge)
    probe.app = app
    startup_gc.hold()
    try:
        assert not gc.isenabled()
        async with app.run_test(size=(160, 40)) as pilot:
            assert await bridge.wait_settled(10)
            await pilot.pause(0.1)
            assert probe.drawn_at_load is True
            assert gc.isenabled()
            assert bridge.statuses()["recorder"].state == "attached"
    finally:
        startup_gc.release()
        gc.enable()


def test_commands_import_asyncio_without_tls(tmp_path: Path) -> None:
    """asyncio comes in as on a Python without TLS, so the app's imports load no OpenSSL (~11 ms of
    the start); ssl itself stays importable afterwards. A fresh interpreter: this one has asyncio."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys
        from memtop import cli

        def fake_snapshot(args):
            import asyncio.base_events
            import memtop.bridge, memtop.ui.app
            assert "ssl" not in sys.modules, "ssl loaded on the way to the app"
            assert asyncio.base_events.ssl is None
            import ssl
            assert sys.modules["ssl"] is ssl and ssl.SSLContext
            return 0

        cli.run_snapshot = fake_snapshot
        sys.exit(cli.main(["snapshot", "--pane", "processes", "--output", sys.argv[1]]))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "o.json")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_collector_is_held_from_the_command_line_for_an_app_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`memtop` and `memtop snapshot` hold the garbage collector from their first line (the
    imports before the app ran ~40 collections); `memtop doctor` (no app) gets it back at once;
    every command gives it back on its way out."""
    import gc

    from memtop import cli

    seen: dict[str, bool] = {}

    def fake_snapshot(args: object) -> int:
        seen["snapshot"] = gc.isenabled()
        return 0

    def fake_report(as_json: bool) -> tuple[str, int]:
        seen["doctor"] = gc.isenabled()
        return "", 0

    monkeypatch.setattr(cli, "run_snapshot", fake_snapshot)
    monkeypatch.setattr("memtop.doctor.report", fake_report)
    try:
        assert gc.isenabled()
        assert cli.main(["snapshot", "--pane", "processes", "--output", str(tmp_path / "o.json")]) == 0
        assert seen["snapshot"] is False
        assert gc.isenabled()  # given back on the way out, when no first frame did
        assert cli.main(["doctor"]) == 0
        assert seen["doctor"] is True and gc.isenabled()
    finally:
        startup_gc.release()
        gc.enable()
