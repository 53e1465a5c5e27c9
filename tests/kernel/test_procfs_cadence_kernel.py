"""The /proc poller on the real /proc: 200 sleepers skipped while quiet, kept stat files pread, a
waking one's RSS shown exactly, the files of exited processes closed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from support import kb, proc_status

from memtop.probes.procfs import QUIET_AFTER, ProcfsProbe
from memtop.records.system import ProcSample


def samples(probe: ProcfsProbe) -> dict[int, ProcSample]:
    return {r.pid: r for r in probe.poll() if isinstance(r, ProcSample)}


@pytest.mark.bpf  # runs with the kernel tests (real /proc); needs no BPF itself
def test_real_proc_sleepers_skipped_then_a_waking_one_shows_exact_rss() -> None:
    """200 sleepers on the real /proc: quiet ones are skipped, kept stat files are pread, one that
    wakes and allocates 64 MiB shows its RSS (= /proc/PID/status) within quiet_every ticks, and the
    files of exited processes are closed."""
    code = (
        "import sys; sys.stdin.readline(); b = bytearray(64 << 20); "
        "b[::4096] = b'x' * len(b[::4096]); print('ok', flush=True); sys.stdin.readline()"
    )
    kids = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(200)
    ]
    probe = ProcfsProbe()
    probe.load()
    try:
        assert probe.quiet_every > 1 and probe.keep_open
        time.sleep(1.0)  # let the children finish starting
        for _ in range(QUIET_AFTER + 2):
            samples(probe)
            time.sleep(0.05)
        fds_before = len(probe._fds)  # noqa: SLF001
        assert fds_before >= 200, fds_before
        kid_pids = {k.pid for k in kids}
        skipped_ticks = 0
        for _ in range(probe.quiet_every):
            got = samples(probe)
            assert kid_pids <= set(got), "a quiet process must still be listed"
            skipped_ticks += probe.last_reads < len(got) // 2
        assert skipped_ticks >= probe.quiet_every - 1, "quiet processes were not skipped"
        waker = kids[0]
        assert waker.stdin is not None and waker.stdout is not None
        waker.stdin.write("go\n")
        waker.stdin.flush()
        assert waker.stdout.readline().strip() == "ok"
        row = None
        for _ in range(probe.quiet_every):
            row = samples(probe)[waker.pid]
            if row.rss_anon_bytes >= 64 << 20:
                break
        assert row is not None and row.rss_anon_bytes >= 64 << 20, "the woken process's RSS never showed"
        st = proc_status(waker.pid)
        assert abs(row.rss_anon_bytes - kb(st, "RssAnon")) < (1 << 20), (row.rss_anon_bytes, st["RssAnon"])
        # exits: their kept files are closed on the next tick
        for k in kids[100:]:
            k.kill()
            k.wait()
        got = samples(probe)
        assert not any(k.pid in got for k in kids[100:])
        assert len(probe._fds) <= fds_before - 100  # noqa: SLF001
        own = len(os.listdir("/proc/self/fd"))
    finally:
        for k in kids:
            k.kill()
            k.wait()
        probe.close()
    assert len(os.listdir("/proc/self/fd")) < own - 90, "close() left stat files open"
