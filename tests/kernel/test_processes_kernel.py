"""Processes pane against the kernel's own per-task accounting, with real BPF and real pressure."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from support import (
    LineReader,
    between,
    bracket,
    compile_c,
    kb,
    memcg,
    proc_stat_faults,
    proc_status,
    run_snapshot,
    swapfile,
)

pytestmark = pytest.mark.bpf


def start_hog(*args: str) -> subprocess.Popen[str]:
    exe = compile_c("hog")
    return subprocess.Popen([str(exe), *args], stdout=subprocess.PIPE, text=True)


def wait_line(proc: subprocess.Popen[str], want: str) -> None:
    """Until the workload prints ``want`` (bounded: a hung workload fails the test, not the run)."""
    assert proc.stdout is not None
    LineReader(proc.stdout, "hog").wait_for(want, timeout_s=120)  # 256 MiB touched under load


def test_256mib_child_through_memtop_snapshot() -> None:
    """The idle workload's row lies between /proc/PID/status and stat read before and after the
    snapshot (its RSS may only shrink meanwhile, if anything reclaims it)."""
    hog = start_hog("256")
    try:
        wait_line(hog, "done")
        (st0, faults0), doc, (st1, faults1) = bracket(
            lambda: (proc_status(hog.pid), proc_stat_faults(hog.pid)),
            lambda: run_snapshot("processes", 1.0),
            tries=1,
        )
    finally:
        hog.kill()
        hog.wait()
    assert doc["pane"] == "processes"
    assert doc["source"] == "bpf", "memtop should run with its BPF probes attached here"
    rows = {r["pid"]: r for r in doc["rows"]}
    assert hog.pid in rows, "the workload is missing from the processes pane"
    row = rows[hog.pid]
    assert row["comm"] == "hog"
    assert row["rss_bytes"] >= 256 << 20
    assert between(row["rss_bytes"], kb(st0, "VmRSS"), kb(st1, "VmRSS")), (row["rss_bytes"], st0["VmRSS"])
    assert between(row["anon_bytes"], kb(st0, "RssAnon"), kb(st1, "RssAnon"))
    assert between(row["minor_faults"], faults0[0], faults1[0]), (row["minor_faults"], faults0, faults1)
    assert between(row["major_faults"], faults0[1], faults1[1])
    assert row["minor_faults"] >= (256 << 20) // 4096 * 0.95


def test_rss_and_swap_track_status_under_memcg_pressure() -> None:
    from memtop.probes.procfs import ProcfsProbe
    from memtop.records.processes import ProcSample
    from memtop.state import State
    from memtop.state.processes import ProcessesState
    from memtop.stream.bridge import Bridge

    with swapfile(), memcg(100 << 20) as cg:
        # the workload joins the cgroup before it allocates: start it stopped via a shell
        hog = subprocess.Popen(
            ["sh", "-c", f"echo $$ > {cg.path}/cgroup.procs && exec {compile_c('hog')} 300 50 400"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            bridge = Bridge([ProcfsProbe()])
            probe = bridge.probes[0]
            probe.load()
            bridge._attached.append(probe)  # noqa: SLF001 - synchronous drive, no event loop needed
            state = State()
            checks = 0
            swapped_seen = 0

            def poll() -> ProcSample:
                state.apply(bridge.poll_sync(force=True))
                return state.get(ProcessesState).rows[hog.pid].sample

            assert hog.stdout is not None
            for line in hog.stdout:
                # each step's line comes before a 400 ms pause: read around the poll
                st0, row, st1 = bracket(lambda: proc_status(hog.pid), poll)
                for field, key in (("rss_bytes", "VmRSS"), ("swap_bytes", "VmSwap")):
                    value = getattr(row, field)
                    assert between(value, kb(st0, key), kb(st1, key)), (field, st0[key], value, st1[key])
                swapped_seen = max(swapped_seen, row.swap_bytes)
                checks += 1
                if line.strip() == "done":
                    break
            assert checks >= 6
            # reclaim really happened: the limit is 100 MiB, the workload touched 300 MiB
            assert swapped_seen > 100 << 20, swapped_seen
            assert row.rss_bytes < 110 << 20
        finally:
            hog.kill()
            hog.wait()


def test_short_lived_process_between_ticks_is_counted_and_listed_on_request() -> None:
    """Born and gone between two polls: counted apart from the exited processes memtop read
    (a shell's millisecond children would push those out), listed with E."""
    import asyncio

    from memtop.probes.procfs import ProcfsProbe
    from memtop.probes.procmem import ProcmemProbe
    from memtop.state import State
    from memtop.state.processes import ProcessesState
    from memtop.stream.bridge import Bridge

    async def run() -> None:
        bridge = Bridge([ProcfsProbe(), ProcmemProbe()])
        state = State()
        bridge.subscribe(state.apply)
        await bridge.start()
        assert await bridge.wait_settled(60)
        assert bridge.statuses()["procmem"].state == "attached", bridge.statuses()
        try:
            await bridge.poll()
            # no poll runs while the child lives: it starts and ends between two ticks however
            # long it takes; the second poll waits for /proc's cadence
            t0 = time.monotonic_ns()
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
            child.wait()
            lived_at_most_ns = time.monotonic_ns() - t0
            await asyncio.sleep(max(0.0, 1.0 - lived_at_most_ns / 1e9))
            await bridge.poll()
            procs = state.get(ProcessesState)
            assert child.pid not in procs.rows
            assert child.pid not in {e.pid for e in procs.exited}
            assert procs.exited_between_total >= 1
            exited = {e.pid: e for e in procs.exited_between}
            assert child.pid in exited, "a process that lived between two ticks is missing"
            e = exited[child.pid]
            assert e.comm.startswith("python")
            # fork to exit (the kernel's monotonic clock), inside what the test saw around it
            assert 300_000_000 <= e.lifetime_ns <= lived_at_most_ns, (e.lifetime_ns, lived_at_most_ns)
        finally:
            await bridge.stop()

    asyncio.run(run())
