"""A memory cgroup's full-read files (limits, events, memory.stat) held open and re-read with pread
(memtop.linux.cgroupfs.read_memory with a HeldFiles, as the cgroups probe reads a cgroup whose
usage keeps moving): each read shows the kernel's figures as they are then, not as they were
when the file was opened. Checked against the same files opened anew, around a workload that
grows its anonymous memory between reads, and through the probe, which holds them once the
cgroup's usage moved twice within full_every polls; and a busy cgroup's members read again, between walks,
once a task was created or exited on the machine (a fork into it, a member's exit)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import LineReader, MemCgroup, memcg

from memtop.linux import cgroupfs
from memtop.probes.cgroups import CgroupsProbe
from memtop.records.cgroups import CgroupSample

MiB = 1 << 20
#: grows its anonymous memory by the MiB each line asks for, touching every page, and says so;
#: "fork" starts a child (in its cgroup) and prints its pid, "reap" ends it
GROWER = """
import subprocess, sys
held, kids = [], []
print("ready", flush=True)
for line in sys.stdin:
    if line.startswith("fork"):
        kids.append(subprocess.Popen(["sleep", "600"]))
        print("child", kids[-1].pid, flush=True)
    elif line.startswith("reap"):
        kids[-1].kill()
        kids.pop().wait()
        print("reaped", flush=True)
    else:
        held.append(bytearray(int(line) << 20))  # zeroed: every page written, so charged
        print("grown", flush=True)
"""


@contextmanager
def probed_grower(cg: MemCgroup) -> Iterator[tuple[subprocess.Popen[str], LineReader, CgroupsProbe, str]]:
    """GROWER started (the caller adds it to ``cg`` once it said ready), a cgroups probe loaded,
    and ``cg``'s path as the probe names it; the probe closed and the grower ended on the way out."""
    proc = subprocess.Popen(
        [sys.executable, "-c", GROWER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    out = LineReader(proc.stdout, "grower")
    probe = CgroupsProbe()
    try:
        probe.load()
        yield proc, out, probe, "/" + cg.name
    finally:
        probe.close()
        proc.kill()
        proc.wait()


def anon_now(cg: MemCgroup) -> int:
    """The cgroup's anonymous memory as its memory.stat says, the file opened anew."""
    stat = cg.stat()
    return stat["total_rss"] if cg.v1 else stat["anon"]


def ask(proc: subprocess.Popen[str], out: LineReader, line: str) -> str:
    assert proc.stdin is not None
    proc.stdin.write(f"{line}\n")
    proc.stdin.flush()
    return out.readline()


def grow(proc: subprocess.Popen[str], out: LineReader, mib: int) -> None:
    assert ask(proc, out, str(mib)) == "grown"


@pytest.mark.bpf  # a real memory cgroup: runs with the kernel tests
def test_held_full_read_files_show_the_kernels_new_figures() -> None:
    with memcg(1024 * MiB) as cg:
        proc = subprocess.Popen(
            [sys.executable, "-c", GROWER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        out = LineReader(proc.stdout, "grower")
        held = cgroupfs.HeldFiles()
        try:
            assert out.readline() == "ready"
            cg.add(proc.pid)
            version = 1 if cg.v1 else 2
            first = cgroupfs.read_memory(version, str(cg.path), held)
            stat_file = str(cg.path / "memory.stat")
            assert stat_file in held._fds  # noqa: SLF001 - held, not opened per read
            for _ in range(3):
                grow(proc, out, 32)
                again = cgroupfs.read_memory(version, str(cg.path), held)
                # the workload is idle between its lines: the file opened anew reads the same
                assert again.stat["anon"] == anon_now(cg)
                assert again.stat["anon"] >= first.stat["anon"] + 32 * MiB
                assert again.usage_bytes is not None and again.usage_bytes >= again.stat["anon"]
                first = again
            # a limit written while the file is held: the held file's next read says it
            limit = cg.path / ("memory.limit_in_bytes" if cg.v1 else "memory.max")
            limit.write_text(str(900 * MiB))
            assert cgroupfs.read_memory(version, str(cg.path), held).limit_bytes == 900 * MiB
        finally:
            held.close()
            proc.kill()
            proc.wait()


@pytest.mark.bpf
def test_the_probe_holds_a_moving_cgroups_files_and_reads_it_as_the_kernel_does() -> None:
    lay = cgroupfs.layout()
    if lay.memory is None:
        pytest.skip("no memory controller mounted")
    with memcg(1024 * MiB) as cg, probed_grower(cg) as (proc, out, probe, path):

        def sample() -> CgroupSample:
            return next(r for r in probe.poll() if isinstance(r, CgroupSample) and r.path == path)

        assert out.readline() == "ready"
        cg.add(proc.pid)
        grow(proc, out, 16)
        sample()  # new: read in full, files opened for the read
        held_stat = str(Path(lay.memory.dir(path)) / "memory.stat")
        for n in range(4):
            grow(proc, out, 16)
            s = sample()
            assert dict(s.stat)["anon"] == anon_now(cg), f"poll {n + 2}"
            assert proc.pid in s.pids
        # moved again since its first: its full read's files are held
        assert held_stat in probe._full_held._fds  # noqa: SLF001


@pytest.mark.bpf
def test_a_busy_cgroups_forks_and_exits_show_at_the_next_poll_between_walks() -> None:
    """Its usage moving at every poll, the cgroup's members are read again once a task was
    created or exited (/proc/loadavg): a child forked into it shows at the next poll, and is
    gone at the one after it exits, on polls that are no walk."""
    with memcg(1024 * MiB) as cg, probed_grower(cg) as (proc, out, probe, path):

        def pids() -> tuple[int, ...]:
            probe.poll()
            return probe._last[path].pids  # noqa: SLF001

        assert out.readline() == "ready"
        cg.add(proc.pid)
        assert pids() == (proc.pid,)  # the first poll: a walk
        probe.walk_every = 1_000_000  # no walk from now on
        for _ in range(2):
            child = int(ask(proc, out, "fork").split()[1])
            grow(proc, out, 4)
            assert sorted(pids()) == sorted((proc.pid, child))
            assert ask(proc, out, "reap") == "reaped"
            grow(proc, out, 4)
            assert pids() == (proc.pid,)


@pytest.mark.bpf
def test_limits_written_to_a_cgroup_without_limits_are_read_at_once() -> None:
    """A v1 cgroup whose memory.stat says no limit above or on it has its limit files left
    unread (memtop.linux.cgroupfs.read_memory): a limit written to it then shows at the next
    read, as its file opened anew says, and so does its removal; the root's limits (which the
    kernel refuses to set) read as its files say."""
    with memcg(1024 * MiB) as cg:
        version = 1 if cg.v1 else 2
        limit = cg.path / ("memory.limit_in_bytes" if cg.v1 else "memory.max")
        memsw = cg.path / ("memory.memsw.limit_in_bytes" if cg.v1 else "memory.swap.max")
        limit.write_text("-1" if cg.v1 else "max")
        held = cgroupfs.HeldFiles()
        try:
            r = cgroupfs.read_memory(version, str(cg.path), held)
            assert r.limit_bytes is None and r.swap_limit_bytes is None
            if cg.v1:
                assert cg.stat()["hierarchical_memory_limit"] >= cgroupfs.V1_UNLIMITED
                assert str(limit) not in held._fds  # noqa: SLF001 - not read: memory.stat said
            limit.write_text(str(700 * MiB))
            r = cgroupfs.read_memory(version, str(cg.path), held)
            assert r.limit_bytes == 700 * MiB == cgroupfs.parse_int(limit.read_text())
            if memsw.exists():
                memsw.write_text(str(800 * MiB) if cg.v1 else str(100 * MiB))
                assert cgroupfs.read_memory(version, str(cg.path), held).swap_limit_bytes == 100 * MiB
                memsw.write_text("-1" if cg.v1 else "max")
            limit.write_text("-1" if cg.v1 else "max")
            r = cgroupfs.read_memory(version, str(cg.path), held)
            assert r.limit_bytes is None and r.swap_limit_bytes is None
            if cg.v1:
                root = cg.path.parent
                with pytest.raises(OSError):  # the kernel refuses: the root's limit is fixed
                    (root / "memory.limit_in_bytes").write_text(str(700 * MiB))
                r = cgroupfs.read_memory(1, str(root), held)
                fresh = cgroupfs.parse_int((root / "memory.limit_in_bytes").read_text())
                assert fresh is not None and fresh >= cgroupfs.V1_UNLIMITED and r.limit_bytes is None
        finally:
            held.close()
