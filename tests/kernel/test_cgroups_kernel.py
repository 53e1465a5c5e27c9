"""Cgroups pane against the kernel's own cgroup files, under real memcg pressure.

A v1 memory cgroup (100 MiB + swap) and a cgroup2 directory of the same name under the unified
mount (hybrid, as here), a workload in both: memtop's usage, limit and failcnt against the v1
files, its memcg reclaim episodes for that cgroup against the workload's own (per pid, in the
kernel's per-cgroup2-id map), its PSI total against the cgroup2 directory's memory.pressure; then an
OOM kill in a no-swap memcg attributed to that cgroup and the limit that fired.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import MemCgroup, compile_c, memcg, readable, swapfile, wait_until

from memtop.linux import cgroupfs
from memtop.probes.cgroups import CgroupsProbe
from memtop.probes.oom import OomProbe
from memtop.probes.vmscan import VmscanProbe
from memtop.records import Batch, Record
from memtop.records.cgroups import CgroupSample
from memtop.state import State
from memtop.state.cgroups import CgroupsState
from memtop.stream.bridge import now_ns
from memtop.views import Options, get_view

MiB = 1 << 20
LAYOUT = cgroupfs.layout()


def unified_dir(name: str) -> Path | None:
    """The cgroup2 directory of the same name, on a hybrid machine (v2 memory: the memcg itself)."""
    if LAYOUT.mode != "hybrid" or LAYOUT.unified is None:
        return None
    return Path(LAYOUT.unified.mountpoint) / name


@contextmanager
def twin(cg: MemCgroup) -> Iterator[Path | None]:
    d = unified_dir(cg.name)
    if d is not None:
        d.mkdir()
    try:
        yield d
    finally:
        if d is not None:

            def removed() -> bool:  # busy until the kernel has let its last process go
                try:
                    d.rmdir()
                except OSError:
                    return False
                return True

            wait_until(removed, f"{d} removed")


class Driven:
    """The probes polled synchronously into one State, in the bridge's order (cgroups first)."""

    def __init__(self, *probes: CgroupsProbe | VmscanProbe | OomProbe) -> None:
        self.probes = list(probes)
        for p in self.probes:
            p.load()
        self.state = State(mode="bpf")

    def tick(self) -> None:
        recs: list[Record] = []
        for p in self.probes:
            recs += p.poll()
        self.state.apply(Batch(now_ns(), tuple(recs)))

    def close(self) -> None:
        for p in self.probes:
            p.close()

    def row(self, path: str) -> dict[str, object]:
        doc = get_view("cgroups").document(self.state, Options(sort="path"))
        return next(r for r in doc["rows"] if r["path"] == path)


def start(exe: Path, args: list[str], *procs_files: Path) -> subprocess.Popen[str]:
    joins = " && ".join(f"echo $$ > {f}" for f in procs_files)
    proc = subprocess.Popen(
        ["sh", "-c", f"{joins} && exec {exe} {' '.join(args)}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert readable(proc.stdout, 60), "the workload said nothing"
    assert proc.stdout.readline().startswith("ready")
    return proc


def wait_line(
    proc: subprocess.Popen[str], want: str, tick: Callable[[], None], timeout_s: float = 120
) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if readable(proc.stdout, 0.5):
            line = proc.stdout.readline().strip()
            if line == want:
                return
            assert line, f"workload died (rc {proc.poll()})"
        tick()
    raise AssertionError("workload did not finish in time")


def read_int(p: Path) -> int:
    return int(p.read_text().split()[0])


@pytest.mark.bpf
def test_memcg_figures_reclaim_and_psi_match_the_kernel() -> None:
    exe = compile_c("reclaim_hog")
    # a log of one episode a second: the cgroup's figures must come from the kernel's totals
    driven = Driven(CgroupsProbe(), VmscanProbe(log_per_s=1, log_burst=1))
    try:
        with swapfile(), memcg(100 * MiB) as cg, twin(cg) as udir:
            files = [cg.path / "cgroup.procs"] + ([udir / "cgroup.procs"] if udir else [])
            hog = start(exe, ["300", "2", "0", "1", "0"], *files)
            try:
                path = "/" + cg.name
                driven.tick()
                st = driven.state.get(CgroupsState)
                assert st.memcg_of(hog.pid) == path
                if udir is not None:
                    assert st.unified_of(hog.pid) == path
                assert hog.stdin is not None
                hog.stdin.write("go\n")
                hog.stdin.flush()
                wait_line(hog, "done", driven.tick)
                # quiet now (the workload holds its memory and waits): settle, then compare
                time.sleep(0.5)
                for _ in range(3):
                    driven.tick()
                row = driven.row(path)
                usage = read_int(cg.path / "memory.usage_in_bytes")
                assert row["usage_bytes"] is not None
                assert abs(int(str(row["usage_bytes"])) - usage) <= 0.02 * usage, (row["usage_bytes"], usage)
                assert row["limit_bytes"] == read_int(cg.path / "memory.limit_in_bytes") == 100 * MiB
                events = row["events"]
                assert isinstance(events, dict)
                assert events["failcnt"] == read_int(cg.path / "memory.failcnt") > 0
                assert row["swap_bytes"] == max(
                    0,
                    read_int(cg.path / "memory.memsw.usage_in_bytes")
                    - read_int(cg.path / "memory.usage_in_bytes"),
                )
                # memcg reclaim: the cgroup's episodes are the workload's (it is alone in there)
                reclaim = get_view("reclaim").document(driven.state, Options())
                mine = next(r for r in reclaim["rows"] if r["pid"] == hog.pid)
                assert mine["memcg_events"] > 100 and mine["cgroup"] == path
                assert reclaim["unlisted_events"] > 0
                assert row["reclaim_episodes"] == mine["memcg_events"], (row, mine)
                assert row["reclaim_stall_ns"] == mine["total_ns"]
                assert row["reclaim_max_ns"] == mine["max_ns"]
                p99 = row["reclaim_p99_ns"]
                assert isinstance(p99, int) and 0 < p99 <= mine["max_ns"]
                if udir is not None:
                    # the kernel's own per-cgroup2-id sum, keyed by the directory's inode
                    kernel = st.kernel_reclaim_of(os.stat(udir).st_ino)
                    assert kernel is not None and kernel[0] == mine["memcg_events"]
                    # PSI: memtop's latest total is the file's (nothing stalls any more)
                    total: tuple[int, int] | None = None

                    def caught_up() -> bool:
                        nonlocal total
                        driven.tick()
                        total = cgroupfs.parse_pressure((udir / "memory.pressure").read_text())
                        return total is not None and driven.row(path)["psi_some_total_us"] == total[0]

                    wait_until(caught_up, "memtop's PSI total at the file's")
                    assert total is not None and total[0] > 0
                    assert driven.row(path)["psi_some_total_us"] == total[0]
                    assert driven.row(path)["psi_full_total_us"] == total[1]
            finally:
                hog.kill()
                hog.wait()
    finally:
        driven.close()


@pytest.mark.bpf
def test_oom_kill_names_its_cgroup_and_the_limit_that_fired() -> None:
    exe = compile_c("swapfill")
    driven = Driven(CgroupsProbe(), OomProbe())
    try:
        with memcg(100 * MiB, swap=False) as cg:
            w = start(exe, ["300"], cg.path / "cgroup.procs")
            path = "/" + cg.name
            driven.tick()
            assert driven.state.get(CgroupsState).memcg_of(w.pid) == path
            assert w.stdin is not None
            w.stdin.write("go\n")
            w.stdin.flush()
            assert w.wait(timeout=60) == -9
            kills = [line for line in (cg.path / "memory.oom_control").read_text().splitlines()]
            assert "oom_kill 1" in kills
            doc = get_view("oom").document(driven.state, Options())

            def killed() -> bool:
                nonlocal doc
                driven.tick()
                doc = get_view("oom").document(driven.state, Options())
                return any(e["victim_pid"] == w.pid for e in doc["events"])

            wait_until(killed, "the OOM kill's event")
            ev = next(e for e in doc["events"] if e["victim_pid"] == w.pid)
            assert ev["cgroup"] == path
            # which limit fired: the kernel log names the OOM memcg and prints its usage and limit
            assert ev["memcg"] == path
            assert ev["memcg_limit_bytes"] == 100 * MiB
            assert ev["memcg_usage_bytes"] is not None and ev["memcg_usage_bytes"] >= 0.9 * 100 * MiB
            # as printed: the memory counter's failcnt (here the memsw limit is what refuses)
            assert ev["memcg_failcnt"] == read_int(cg.path / "memory.failcnt")
            for _ in range(3):
                driven.tick()
            row = driven.row(path)
            assert row["oom_kills"] == 1 and row["oom_limit_kills"] == 1
            events = row["events"]
            assert isinstance(events, dict) and events["oom_kill"] == 1
    finally:
        driven.close()


@pytest.mark.bpf
def test_reclaim_of_a_process_oom_killed_before_any_read_counts_in_its_cgroup() -> None:
    """A process that joins a no-swap memcg, reclaims at its limit and is OOM-killed between two
    reads of cgroup.procs (well within a tick here) was never listed in the cgroup: its memcg
    reclaim must still reach the cgroup, from the kill's own record of the victim's memcg."""
    exe = compile_c("swapfill")
    driven = Driven(CgroupsProbe(), VmscanProbe(log_per_s=1, log_burst=1), OomProbe())
    try:
        with memcg(100 * MiB, swap=False) as cg:
            path = "/" + cg.name
            driven.tick()  # the cgroup is known, empty
            w = start(exe, ["300"], cg.path / "cgroup.procs")
            assert w.stdin is not None
            w.stdin.write("go\n")
            w.stdin.flush()
            assert w.wait(timeout=60) == -9  # no tick in between: never in a cgroup.procs read
            assert driven.state.get(CgroupsState).memcg_of(w.pid) is None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                driven.tick()
                oom = get_view("oom").document(driven.state, Options())
                if any(e["victim_pid"] == w.pid for e in oom["events"]):
                    break
                time.sleep(0.2)
            for _ in range(3):
                driven.tick()
            reclaim = get_view("reclaim").document(driven.state, Options())
            mine = next(r for r in reclaim["rows"] if r["pid"] == w.pid)
            # what the reclaim probe counted for that pid (the kernel's per-pid map), in its cgroup
            assert mine["memcg_events"] > 0, mine
            probed = driven.state.get(CgroupsState).probed.get(path)
            assert probed is not None, "the cgroup got none of its victim's reclaim"
            assert probed.reclaim_events == mine["memcg_events"], (probed, mine)
            assert probed.reclaim_ns == mine["total_ns"]
            row = driven.row(path)
            assert row["reclaim_episodes"] == mine["memcg_events"]
    finally:
        driven.close()


@pytest.mark.bpf  # root: cgroups and a swap file
def test_pressure_of_a_child_read_only_when_its_parent_moved() -> None:
    """A cgroup's memory.pressure is read again only when its parent's PSI totals moved (the
    kernel charges a stall to every ancestor): a real stall in a child (memcg reclaim under a
    limit) is seen, exactly as the child's file says once it stops, while an idle sibling's and
    a quiet parent's children's files are not read at all."""
    if LAYOUT.mode != "hybrid" or LAYOUT.unified is None or not LAYOUT.psi:
        pytest.skip("needs a hybrid layout with PSI (a cgroup2 tree beside the v1 memory controller)")
    exe = compile_c("reclaim_hog")
    top = Path(LAYOUT.unified.mountpoint) / f"memtop-psi-{os.getpid()}"
    busy, idle = top / "busy", top / "idle"
    probe = CgroupsProbe(full_every=1_000_000)  # no full read in the test's ticks
    read: list[str] = []
    held_read = probe._held.read

    def spy(path: str, size: int = 4096) -> str | None:
        read.append(path)
        return held_read(path, size)

    probe._held.read = spy  # type: ignore[method-assign]
    latest: dict[str, tuple[int | None, int | None]] = {}

    def tick() -> None:
        for rec in probe.poll():
            if isinstance(rec, CgroupSample):
                latest[rec.path] = (rec.psi_some_us, rec.psi_full_us)

    def pressure_read(d: Path) -> bool:
        return str(d / "memory.pressure") in read

    def file_totals(d: Path) -> tuple[int, int] | None:
        return cgroupfs.parse_pressure((d / "memory.pressure").read_text())

    probe.load()
    try:
        with swapfile(), memcg(100 * MiB) as cg:
            for d in (top, busy, idle):
                d.mkdir()
            hog = start(exe, ["300", "2", "0", "1", "0"], cg.path / "cgroup.procs", busy / "cgroup.procs")
            try:
                name = f"/{top.name}"
                tick()
                tick()  # the second: the parents' totals compared with the first's
                read.clear()
                tick()  # nothing below the new parent ran: its children are not read
                assert not pressure_read(busy) and not pressure_read(idle), read
                assert latest[name + "/busy"] == file_totals(busy)
                assert hog.stdin is not None
                hog.stdin.write("go\n")
                hog.stdin.flush()
                read.clear()
                wait_line(hog, "done", tick)
                # the stall moved the parent: the busy child was read, at what its file said
                assert pressure_read(busy), read
                tick()
                some = latest[name + "/busy"][0]
                assert some is not None and some > 0
                total = file_totals(busy)

                def caught_up() -> bool:
                    nonlocal total
                    tick()
                    total = file_totals(busy)
                    return latest[name + "/busy"] == total

                wait_until(caught_up, "memtop's PSI totals of the busy child at its file's")
                # the idle sibling never stalled: whether read or not, it says what its file says
                assert latest[name + "/idle"] == file_totals(idle) == (0, 0)
                # quiet again (the workload waits on its stdin): its parent does not move, the
                # child is not read, and its totals are still the file's
                read.clear()
                tick()
                assert not pressure_read(busy), read
                assert latest[name + "/busy"] == file_totals(busy)
            finally:
                hog.kill()
                hog.wait()
    finally:
        probe.close()
        for d in (busy, idle, top):

            def removed(d: Path = d) -> bool:  # busy until the kernel has let its last process go
                try:
                    d.rmdir()
                except FileNotFoundError:
                    return True
                except OSError:
                    return False
                return True

            wait_until(removed, f"{d} removed")
