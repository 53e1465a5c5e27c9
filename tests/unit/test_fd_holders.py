"""Probes hold raw file descriptors (a quiet process's schedstat, /proc/meminfo and vmstat, the
swap files, the mount table): a probe dropped without ``close()`` (a test's, a front end's on a
path that forgot) gives them back when it is collected, not at the process's exit. Unclosed
probes in the suite once held enough of them that a test lowering RLIMIT_NOFILE to 256 found no
descriptor left to open."""

from __future__ import annotations

import gc
import os

import pytest

from memtop.probes.base import Probe
from memtop.probes.procfs import ProcfsProbe
from memtop.probes.swapin import SwapinfoProbe


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("make", [ProcfsProbe, SwapinfoProbe], ids=["procfs", "swapinfo"])
def test_a_probe_dropped_unclosed_gives_its_descriptors_back(make: type[Probe]) -> None:
    gc.collect()
    before = open_fds()
    probe = make()
    probe.load()
    probe.poll()
    probe.poll()
    held = open_fds() - before
    assert held > 0, "the probe holds no descriptor here: the test is void"
    del probe
    gc.collect()
    assert open_fds() == before
