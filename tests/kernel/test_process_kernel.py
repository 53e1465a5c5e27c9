"""The process drill-in: fault stacks, heap growth and mappings checked against the kernel's own
accounting on a purpose-built workload, the headless snapshot, and the screen's probes attached on
open and detached on close (Pilot, real BPF).

Oracles: /proc/PID/stat minflt bracketed around a step, the byte sizes the workload asked for,
/proc/PID/smaps summed before and after memtop's read.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import (
    between,
    bracket,
    compile_c,
    force_tick,
    memcg,
    proc_stat_faults,
    run_snapshot,
    swapfile,
    wait_until,
)

from memtop.probes.base import Probe
from memtop.probes.faultstack import FaultStackProbe
from memtop.probes.procfs import ProcfsProbe
from memtop.records import Batch
from memtop.records.process import GrowthStack
from memtop.state import State
from memtop.stream.bridge import Bridge, now_ns
from memtop.views import Options, get_view

TOUCH_BYTES = 64 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")


class Workload:
    """tests/workloads/procdrill.c driven line by line over a pipe."""

    def __init__(self, cgroup: Any = None) -> None:
        exe = compile_c("procdrill")
        self.proc = subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("ready"), line
        self.pid = self.proc.pid
        if cgroup is not None:
            cgroup.add(self.pid)

    def do(self, cmd: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        if cmd in ("loop", "exit"):
            return
        answer = self.proc.stdout.readline()
        assert answer.startswith("ok"), f"{cmd!r} -> {answer!r}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def workload() -> Iterator[Workload]:
    w = Workload()
    try:
        yield w
    finally:
        w.stop()


def apply(state: State, probe: Probe) -> None:
    state.apply(Batch(now_ns(), tuple(probe.poll())))


def section(state: State, pid: int, name: str) -> dict[str, Any]:
    return get_view("process").document(state, Options(pid=pid, section=name))


def frames_have(row: dict[str, Any], fn: str) -> bool:
    return any(f.startswith(fn + "+") for f in row["frames"])


# -- kernel truth ----------------------------------------------------------------------------------


@pytest.mark.bpf
def test_fault_stacks_match_minflt(workload: Workload, tmp_path: Path) -> None:
    from memtop.probes.faultstack import FaultStackProbe

    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(8 << 20))
    probe = FaultStackProbe(workload.pid)
    probe.load()
    try:
        state = State("bpf")
        min0, maj0 = proc_stat_faults(workload.pid)
        workload.do("touch")
        workload.do(f"filemap {data}")
        min1, maj1 = proc_stat_faults(workload.pid)
        apply(state, probe)
        doc = section(state, workload.pid, "fault_stacks")
        delta = min1 - min0
        assert delta >= TOUCH_BYTES // PAGE  # one fault per page at least (THP off for the area)
        top = doc["rows"][0]
        assert frames_have(top, "touch_pages"), top["frames"]
        assert top["frames"][0].startswith("touch_pages+")  # innermost first: the faulting function
        assert "[procdrill]" in top["frames"][0]
        assert abs(top["count"] - delta) <= 0.05 * delta, (top["count"], delta)
        # every fault of the interval is counted somewhere (perf events fire where min_flt moves)
        counted_min = sum(r["minor_faults"] for r in doc["rows"])
        counted_maj = sum(r["major_faults"] for r in doc["rows"])
        assert abs(counted_min - delta) <= 0.01 * delta, (counted_min, delta)
        assert counted_maj == maj1 - maj0
        assert any(frames_have(r, "read_file_pages") for r in doc["rows"])
        # the same faults, by mapping: the data file is named, and nothing is lost
        files = section(state, workload.pid, "fault_files")
        assert files["total_faults"] == doc["total_faults"]
        by_path = {r["path"]: r for r in files["rows"]}
        assert str(data) in by_path and by_path[str(data)]["file_backed"]
        # exactly the faults read_file_pages took (its mapping lives on, so it is named)
        reader = sum(r["count"] for r in doc["rows"] if r["frames"][0].startswith("read_file_pages+"))
        assert reader >= 1 and by_path[str(data)]["count"] == reader
        assert not files["lost"]
        # the touched area was mapped while attached and unmapped before the poll: still named
        assert by_path["[anon]"]["count"] >= top["count"]

        print(
            f"\nminflt delta {delta}, top stack {top['count']} ({top['count'] / delta:.4f}), "
            f"all stacks {counted_min}; {data.name}: {by_path[str(data)]['count']} faults"
        )
    finally:
        probe.close()
    assert probe.bpf is None and not probe._fds  # detached


@pytest.mark.bpf
def test_growth_exact_bytes_by_function(workload: Workload) -> None:
    from memtop.probes.growth import GrowthProbe

    probe = GrowthProbe(workload.pid)
    probe.load()
    try:
        state = State("bpf")
        workload.do("sbrk 12345 3")
        workload.do("brk 40000 4")
        workload.do("mmap 1048576 5")
        apply(state, probe)
        rows = section(state, workload.pid, "growth")["rows"]
        brk = [r for r in rows if r["frames"] and r["frames"][0].startswith("grow_with_brk+")]
        mm = [r for r in rows if r["frames"] and r["frames"][0].startswith("grow_with_mmap+")]
        assert len(brk) == 1 and len(mm) == 1, [r["frames"][:2] for r in rows]
        assert brk[0]["brk_grown_bytes"] == 4 * 40000 and brk[0]["brk_calls"] == 4
        assert brk[0]["net_bytes"] == 4 * 40000
        assert mm[0]["mmap_bytes"] == 5 * 1048576 and mm[0]["mmap_calls"] == 5
        assert mm[0]["net_bytes"] == 5 * 1048576
        # glibc's sbrk(): the bytes are exact; its caller hides behind a wrapper without frame
        # pointers, so only the total is checked
        other_brk = sum(r["brk_grown_bytes"] for r in rows if r is not brk[0])
        assert other_brk == 3 * 12345
        assert rows[0] is mm[0]  # top growth first
        workload.do("unmap")
        apply(state, probe)
        rows = section(state, workload.pid, "growth")["rows"]
        mm = [r for r in rows if r["frames"] and r["frames"][0].startswith("grow_with_mmap+")]
        rel = [r for r in rows if r["frames"] and r["frames"][0].startswith("release_mmaps+")]
        assert mm[0]["freed_bytes"] == 5 * 1048576 and mm[0]["net_bytes"] == 0
        assert rel[0]["munmap_bytes"] == 5 * 1048576 and rel[0]["munmap_calls"] == 5
        recs = [r for r in probe.poll() if isinstance(r, GrowthStack)]
        assert recs == []  # nothing changed: nothing re-sent
    finally:
        probe.close()


def smaps_sums(pid: int) -> tuple[dict[str, int], int]:
    """/proc/PID/smaps summed: bytes per field, and how many mappings."""
    smaps = Path(f"/proc/{pid}/smaps").read_text()
    sums = {"Rss": 0, "Pss": 0, "Swap": 0, "Size": 0}
    for line in smaps.splitlines():
        key = line.split(":", 1)[0]
        if key in sums and line.endswith("kB"):
            sums[key] += int(line.split()[1]) * 1024
    return sums, sum(1 for line in smaps.splitlines() if line.startswith("Size:"))


def kernel_totals(pid: int) -> tuple[dict[str, int], int]:
    """What the mappings totals are taken from: Rss, Pss and Swap from /proc/PID/smaps_rollup
    (whose Pss is summed before rounding, so it can exceed the per-mapping sum by a few KiB), Size
    summed over /proc/PID/smaps; and how many mappings there are."""
    sums, n = smaps_sums(pid)
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key = line.split(":", 1)[0]
        if key in ("Rss", "Pss", "Swap") and line.endswith("kB"):
            sums[key] = int(line.split()[1]) * 1024
    return sums, n


def test_mappings_totals_equal_smaps_under_pressure(workload: Workload) -> None:
    """The mappings section's totals lie between /proc/PID/smaps summed before and after memtop's
    read: the workload is idle, but PSS moves whenever another process maps or unmaps a library
    it shares, and reclaim may move its pages to swap."""
    from memtop.probes.smaps import SmapsProbe

    with swapfile(), memcg(24 << 20, swap=True) as cg:
        cg.add(workload.pid)
        workload.do("hold 48")  # twice the limit: part of it goes to swap
        probe = SmapsProbe(workload.pid)
        probe.rollup_duty = 1.0  # the rollup read at every poll: the bracket needs this poll's
        probe.load()
        state = State("procfs")
        try:

            def complete() -> bool:  # the table is read in a thread of the probe's own
                apply(state, probe)
                return bool(section(state, workload.pid, "mappings")["complete"])

            wait_until(complete, "the mappings table read")

            def ours() -> dict[str, Any]:
                apply(state, probe)  # totals: smaps_rollup, read again at every poll
                return section(state, workload.pid, "mappings")

            (before, n_before), doc, (after, n_after) = bracket(lambda: kernel_totals(workload.pid), ours)
        finally:
            probe.close()
        assert doc["complete"]
        tot = doc["totals"]
        for key, field in (
            ("Rss", "rss_bytes"),
            ("Pss", "pss_bytes"),
            ("Swap", "swap_bytes"),
            ("Size", "size_bytes"),
        ):
            assert between(tot[field], before[key], after[key]), (field, before[key], tot[field], after[key])
        assert tot["swap_bytes"] > 0  # the pressure was real
        assert between(len(doc["rows"]), n_before, n_after)
        big = max(doc["rows"], key=lambda r: r["size_bytes"])
        assert big["size_bytes"] == 48 << 20 and big["rss_bytes"] + big["swap_bytes"] == 48 << 20
        # sortable
        by_rss = get_view("process").document(
            state, Options(pid=workload.pid, section="mappings", sort="rss_bytes", reverse=True)
        )["rows"]
        assert [r["rss_bytes"] for r in by_rss] == sorted((r["rss_bytes"] for r in by_rss), reverse=True)
        print(
            f"\nmappings: RSS {tot['rss_bytes']} PSS {tot['pss_bytes']} swap {tot['swap_bytes']} "
            f"between smaps sums {before} and {after}"
        )


@pytest.mark.bpf
def test_headless_snapshot_fault_stacks(workload: Workload) -> None:
    workload.do("loop")
    doc = run_snapshot("process", 1.5, "--pid", str(workload.pid), "--section", "fault_stacks")
    assert doc["pane"] == "process" and doc["pid"] == workload.pid and doc["section"] == "fault_stacks"
    assert doc["rows"], doc
    top = doc["rows"][0]
    assert isinstance(top["count"], int) and top["count"] >= TOUCH_BYTES // PAGE
    assert isinstance(top["frames"], list) and top["frames"][0].startswith("touch_pages+")


@pytest.mark.bpf
async def test_probes_attach_on_open_and_detach_on_close(workload: Workload) -> None:
    from support.ui import settle, wait_for_screen, wait_until

    from memtop.probes.procmem import ProcmemProbe
    from memtop.ui.app import MemtopApp
    from memtop.ui.screens.process import ProcessScreen

    def perf_fds() -> int:
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                n += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[perf_event]"
            except OSError:
                pass
        return n

    from memtop.ui.panes.base import DrillIn

    bridge = Bridge([ProcfsProbe(), ProcmemProbe()])
    app = MemtopApp(bridge)
    async with app.run_test(size=(160, 45)) as pilot:
        await bridge.wait_settled(120)
        before = perf_fds()  # procmem's tracepoints
        app.post_message(DrillIn(workload.pid))
        await wait_for_screen(pilot, "ProcessScreen")
        await bridge.wait_settled(120)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProcessScreen)
        st = bridge.statuses()
        assert all(st[n].state == "attached" for n in ("faultstack", "growth", "smaps")), st
        fs = bridge.probe("faultstack")
        assert isinstance(fs, FaultStackProbe) and perf_fds() >= before + 2  # min + maj on the one thread
        workload.do("touch")
        force_tick(app)
        await settle(pilot)
        doc = screen.view.document(app.state, screen.options())
        assert doc["section"] == "history"
        await pilot.press("2")
        await settle(pilot)
        doc = screen.view.document(app.state, screen.options())
        assert doc["rows"] and doc["rows"][0]["frames"][0].startswith("touch_pages+")
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, ProcessScreen), "the drill-in left")
        await settle(pilot)  # its unmount detached what the focus attached
        assert not isinstance(app.screen, ProcessScreen)
        names = [p.name for p in bridge.probes]
        assert not {"faultstack", "growth", "smaps"} & set(names)
        assert fs.bpf is None
        assert perf_fds() == before
