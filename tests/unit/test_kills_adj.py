"""The kills probe's oom_score_adj scan on the real /proc: each process's file is held open and
re-read, a change is seen at the next scan as the kernel reports it, and a process that exits
has its file closed (no BPF: the scan is the probe's /proc side)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from memtop.probes.kills import KillsProbe


def test_adj_scan_holds_each_file_and_follows_the_kernel() -> None:
    child = subprocess.Popen(["sleep", "600"])
    probe = KillsProbe()
    try:
        adj_file = Path(f"/proc/{child.pid}/oom_score_adj")
        assert child.pid not in dict(probe.scan_adj())  # 0: not listed
        assert child.pid in probe._adj_fds  # held for the next scan
        held = probe._adj_fds[child.pid]
        adj_file.write_text("300")  # raising one's own (or a child's) adj needs no privilege
        got = dict(probe.scan_adj())
        assert got[child.pid] == int(adj_file.read_text()) == 300
        assert probe._adj_fds[child.pid] == held  # re-read through the same open file
        adj_file.write_text("0")
        assert child.pid not in dict(probe.scan_adj())
        child.kill()
        child.wait()
        assert child.pid not in dict(probe.scan_adj())
        assert child.pid not in probe._adj_fds
        fds = list(probe._adj_fds.values())
        assert fds
    finally:
        child.kill()
        child.wait()
        probe.close()
    assert not probe._adj_fds
    for fd in fds:  # every file the scan held is closed
        try:
            os.fstat(fd)
        except OSError:
            continue
        assert not os.readlink(f"/proc/self/fd/{fd}").endswith("/oom_score_adj")
