"""The /proc reader's machine-wide files (/proc/vmstat, /proc/meminfo, /proc/pressure/memory) held
open and pread from offset 0 at every poll: each poll shows the kernel's figures of that moment,
bracketed by the same files opened anew, while the files are opened once."""

from __future__ import annotations

import mmap
import os

import pytest

from memtop.probes.procfs import ProcfsProbe
from memtop.records import Record
from memtop.records.host import MemInfo, Pressure, VmStat

MiB = 1 << 20


def pgfault(recs: list[Record]) -> int:
    vm = next(r for r in recs if isinstance(r, VmStat))
    return dict(vm.counters)["pgfault"]


def fresh_pgfault() -> int:
    with open("/proc/vmstat") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("pgfault "))


def fresh_some_us() -> int:
    with open("/proc/pressure/memory") as f:
        some = f.readline().split()
    return int(some[-1].partition("=")[2])


@pytest.mark.bpf  # the real /proc: runs with the kernel tests
def test_held_host_files_read_the_kernels_figures_of_each_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    real_open = os.open

    def counting_open(path: str, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if str(path) in ("/proc/vmstat", "/proc/meminfo", "/proc/pressure/memory"):
            opened.append(str(path))
        return real_open(path, flags, mode, dir_fd=dir_fd)

    probe = ProcfsProbe()
    probe.load()
    monkeypatch.setattr(os, "open", counting_open)
    try:
        before = fresh_pgfault()
        first = probe.poll()
        assert before <= pgfault(first) <= fresh_pgfault()
        for _ in range(3):
            low = fresh_pgfault()
            some_low = fresh_some_us()
            # 32 MiB touched page by page: 8,192 page faults at least between two polls
            with mmap.mmap(-1, 32 * MiB) as m:
                for off in range(0, 32 * MiB, mmap.PAGESIZE):
                    m[off] = 1
                recs = probe.poll()
                high = fresh_pgfault()
            assert pgfault(recs) >= low + 32 * MiB // mmap.PAGESIZE
            assert pgfault(recs) <= high
            psi = next(r for r in recs if isinstance(r, Pressure))
            assert some_low <= psi.some_total_us <= fresh_some_us()
            mem = next(r for r in recs if isinstance(r, MemInfo))
            assert mem.total_bytes > 0 and mem.free_bytes > 0
        # held: each opened once, at the first poll
        assert sorted(opened) == ["/proc/meminfo", "/proc/pressure/memory", "/proc/vmstat"]
    finally:
        probe.close()
    assert not probe._host_fds  # noqa: SLF001 - closed with the probe
