"""The cgroups state forgets processes that exited: under process churn (the exporter left
running for weeks) every pid that ever ran in a cgroup stayed in ``CgroupsState.pid_memcg`` and
``pid_unified`` (up to 65,536 each), and the exporter's RssAnon grew by tens of MiB an hour.

Real short-lived processes in a real memcg (and its cgroup2 twin on a hybrid machine), read by
the real cgroups probe; the state's clock is the batches' time stamps, so the grace an exited
pid keeps (for reclaim and kills reported after its exit) is stepped over, not slept through."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support import memcg, wait_until

from memtop.linux import cgroupfs
from memtop.probes.cgroups import CgroupsProbe
from memtop.records import Batch
from memtop.records.swapin import SwapinProc
from memtop.state import State
from memtop.state.cgroups import PENDING_NS, CgroupsState
from memtop.stream.bridge import now_ns

MiB = 1 << 20
LAYOUT = cgroupfs.layout()


@contextmanager
def twin(name: str) -> Iterator[Path | None]:
    """The cgroup2 directory of the same name on a hybrid machine (where PSI is read)."""
    if LAYOUT.mode != "hybrid" or LAYOUT.unified is None:
        yield None
        return
    d = Path(LAYOUT.unified.mountpoint) / name
    d.mkdir()
    try:
        yield d
    finally:

        def removed() -> bool:
            try:
                d.rmdir()
            except OSError:
                return False
            return True

        wait_until(removed, f"{d} removed")


def test_exited_pids_leave_the_cgroups_state() -> None:
    probe = CgroupsProbe(walk_every=1)  # every poll reads cgroup.procs
    probe.load()
    state = State(mode="bpf")
    st = state.get(CgroupsState)
    clock = [now_ns()]

    def tick(step_ns: int = 0) -> None:
        clock[0] += step_ns
        state.apply(Batch(clock[0], tuple(probe.poll())))

    try:
        with memcg(64 * MiB) as cg, twin(cg.name) as tw:
            path = "/" + cg.name
            procs = [subprocess.Popen(["sleep", "3600"]) for _ in range(5)]
            try:
                for p in procs:
                    cg.add(p.pid)
                    if tw is not None:
                        (tw / "cgroup.procs").write_text(str(p.pid))
                tick()
                pids = {p.pid for p in procs}
                assert {pid: st.memcg_of(pid) for pid in pids} == dict.fromkeys(pids, path)
                if tw is not None:
                    assert {pid: st.unified_of(pid) for pid in pids} == dict.fromkeys(pids, path)
                # one of them had swap-ins: its cgroup's total must outlive the pid
                dead, alive = procs[0], procs[1:]
                state.apply(
                    Batch(
                        clock[0],
                        (
                            SwapinProc(
                                dead.pid,
                                "sleep",
                                swapins=3,
                                swapin_wait_ns=7_000,
                                swapin_wait_max_ns=7_000,
                                file_major_faults=0,
                            ),
                        ),
                    )
                )
                for p in (dead, *alive[:2]):
                    p.kill()
                    p.wait()
                gone = {dead.pid, alive[0].pid, alive[1].pid}
                wait_until(
                    lambda: not gone & {int(x) for x in (cg.path / "cgroup.procs").read_text().split()},
                    "the killed processes out of cgroup.procs",
                )
                tick()
                # within the grace: still known (a kill or reclaim reported late finds them)
                assert all(st.memcg_of(pid) == path for pid in gone)
                tick(PENDING_NS)
                assert [pid for pid in gone if pid in st.pid_memcg or pid in st.pid_unified] == []
                assert all(st.memcg_of(p.pid) == path for p in alive[2:])  # the living stay
                assert st.swapin_by_path()[path] == (3, 7_000)
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
    finally:
        probe.close()
