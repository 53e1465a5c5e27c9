"""A cgroup2 directory's cgroup.procs held open and re-read with pread
(memtop.linux.cgroupfs.HeldFiles): read whole past one seq_file buffer (1,000 members: 5 KiB or more),
and anew from its start at each read as members come and go; and the cgroups probe's walk, which keeps a cgroup whose files read as
before, still shows a process that moved in without charging anything (its usage unchanged)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support import memcg, wait_until

from memtop.linux import cgroupfs
from memtop.probes.cgroups import CgroupsProbe
from memtop.records.cgroups import CgroupSample

MiB = 1 << 20


def listed(path: Path) -> tuple[int, ...]:
    """cgroup.procs as the kernel lists it, read the ordinary way."""
    return tuple(int(p) for p in path.read_text().split())


@pytest.mark.bpf  # a real cgroup: runs with the kernel tests
def test_held_cgroup2_procs_read_whole_and_anew() -> None:
    lay = cgroupfs.layout()
    if lay.unified is None:
        pytest.skip("no cgroup2 hierarchy mounted")
    d = Path(lay.unified.mountpoint) / f"memtop-test-held-{os.getpid()}"
    d.mkdir()
    procs = d / "cgroup.procs"
    held = cgroupfs.HeldFiles()
    sleepers: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(1000):
            p = subprocess.Popen(["sleep", "600"])
            sleepers.append(p)
            procs.write_text(str(p.pid))
        assert len(procs.read_bytes()) > 4096, "should need more than one seq_file buffer"
        first = cgroupfs.read_procs(str(d), held)
        assert str(procs) in held._fds  # noqa: SLF001 - held, not opened per read
        assert sorted(first) == sorted(listed(procs)) and len(first) == 1000
        for p in sleepers[:500]:
            p.kill()
            p.wait()
        again = cgroupfs.read_procs(str(d), held)  # at once: no list of a second ago
        assert sorted(again) == sorted(listed(procs)) and len(again) == 500
        held.drop_under(str(d))
        assert not held._fds  # noqa: SLF001
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
        held.close()
        wait_until(lambda: not procs.read_text().split(), "the sleepers gone from the cgroup")
        d.rmdir()


@pytest.mark.bpf
def test_walk_shows_a_process_moved_in_without_charges() -> None:
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        with memcg(256 * MiB) as cg:
            probe = CgroupsProbe(walk_every=2, full_every=1_000_000)
            probe.load()
            try:
                lay = probe.layout
                assert lay is not None and lay.memory is not None
                path = "/" + cg.path.relative_to(lay.memory.mountpoint).as_posix()

                def sample() -> CgroupSample:
                    probe.poll()
                    return probe._last[path]  # noqa: SLF001 - the sample the poll kept

                while probe._tick % 2 != 0:  # noqa: SLF001 - the next poll is not a walk
                    probe.poll()
                s0 = sample()
                assert s0.pids == ()
                # v1 moves no charges with a task (memory.move_charge_at_immigrate is 0), v2
                # never: the usage stays, and only the walk's read of cgroup.procs sees it
                cg.add(sleeper.pid)
                s1 = sample()  # a walk tick (walk_every 2)
                assert s1.usage_bytes == s0.usage_bytes
                assert s1.pids == (sleeper.pid,) == listed(cg.path / "cgroup.procs")
            finally:
                probe.close()
    finally:
        sleeper.kill()
        sleeper.wait()
