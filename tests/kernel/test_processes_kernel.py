"""Processes pane against the kernel's own per-task accounting, with real BPF and real pressure."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from support import compile_c, kb, memcg, proc_stat_faults, proc_status, run_snapshot, swapfile

pytestmark = pytest.mark.bpf


def start_hog(*args: str) -> subprocess.Popen[str]:
    exe = compile_c("hog")
    return subprocess.Popen([str(exe), *args], stdout=subprocess.PIPE, text=True)


def wait_line(proc: subprocess.Popen[str], want: str) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == want:
            return
    raise AssertionError(f"workload ended before {want!r}")


def within(a: float, b: float, tol: float = 0.05) -> bool:
    return abs(a - b) <= tol * max(abs(b), 1)


def test_256mib_child_through_memtop_snapshot() -> None:
    hog = start_hog("256")
    try:
        wait_line(hog, "done")
        doc = run_snapshot("processes", 1.0)
        st = proc_status(hog.pid)
        minflt, majflt = proc_stat_faults(hog.pid)
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
    assert within(row["rss_bytes"], kb(st, "VmRSS")), (row["rss_bytes"], st["VmRSS"])
    assert within(row["anon_bytes"], kb(st, "RssAnon"))
    assert within(row["minor_faults"], minflt), (row["minor_faults"], minflt)
    assert row["major_faults"] <= majflt
    assert row["minor_faults"] >= (256 << 20) // 4096 * 0.95


def test_rss_and_swap_track_status_under_memcg_pressure() -> None:
    from memtop.bridge import Bridge
    from memtop.probes.procfs import ProcfsProbe
    from memtop.state import State
    from memtop.state.system import ProcessesState

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
            assert hog.stdout is not None
            for line in hog.stdout:
                state.apply(bridge.poll_sync(force=True))
                st = proc_status(hog.pid)
                row = state.get(ProcessesState).rows[hog.pid].sample
                assert within(row.rss_bytes, kb(st, "VmRSS")), (row.rss_bytes, st["VmRSS"])
                assert within(row.swap_bytes, kb(st, "VmSwap"), 0.05) or abs(
                    row.swap_bytes - kb(st, "VmSwap")
                ) < (1 << 20)
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


def test_short_lived_process_between_ticks_appears_in_recently_exited() -> None:
    import asyncio

    from memtop.bridge import Bridge
    from memtop.probes.procfs import ProcfsProbe
    from memtop.probes.procmem import ProcmemProbe
    from memtop.state import State
    from memtop.state.system import ProcessesState

    async def run() -> None:
        bridge = Bridge([ProcfsProbe(), ProcmemProbe()])
        state = State()
        bridge.subscribe(state.apply)
        await bridge.start()
        assert await bridge.wait_settled(60)
        assert bridge.statuses()["procmem"].state == "attached", bridge.statuses()
        try:
            await bridge.poll()
            t0 = time.monotonic()
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
            child.wait()
            assert time.monotonic() - t0 < 0.9, "machine too slow for a between-ticks test"
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
            await bridge.poll()
            procs = state.get(ProcessesState)
            assert child.pid not in procs.rows
            exited = {e.pid: e for e in procs.exited}
            assert child.pid in exited, "a process that lived between two ticks is missing"
            e = exited[child.pid]
            assert e.comm.startswith("python")
            assert 250_000_000 <= e.lifetime_ns <= 800_000_000, e.lifetime_ns
        finally:
            await bridge.stop()

    asyncio.run(run())
