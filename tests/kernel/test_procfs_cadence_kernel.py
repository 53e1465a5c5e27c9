"""The /proc poller on the real /proc: 200 sleepers skipped while quiet, kept stat files pread, a
waking one's RSS shown exactly, the files of exited processes closed."""

from __future__ import annotations

import os
import time

import pytest
from support import kb, pid_reads, proc_status, waking_sleepers
from support import proc_samples as samples

from memtop.probes.procfs import QUIET_AFTER, ProcfsProbe


@pytest.mark.bpf  # runs with the kernel tests (real /proc); needs no BPF itself
def test_real_proc_sleepers_skipped_then_a_waking_one_shows_exact_rss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """200 sleepers on the real /proc: quiet ones are skipped, kept stat files are pread, one that
    wakes and allocates 64 MiB shows its RSS (= /proc/PID/status) within quiet_every ticks, and the
    files of exited processes are closed. Only this test's own children are counted: other
    processes on the machine come, go and reclaim as they please."""
    kids = waking_sleepers(200)
    probe = ProcfsProbe()
    read = pid_reads(monkeypatch, probe)
    probe.load()
    try:
        assert probe.quiet_every > 1 and probe.keep_open
        for k in kids:  # each one started and now sleeps on its stdin
            assert k.stdout is not None and k.stdout.readline().strip() == "ready"
        kid_pids = {k.pid for k in kids}
        for _ in range(QUIET_AFTER + 2):
            samples(probe)
        assert kid_pids <= set(probe._fds), len(kid_pids - set(probe._fds))  # noqa: SLF001
        # a tick reads a quiet process once in quiet_every, unless the kernel reclaimed since the
        # last one (then every process is read): count the ticks that skipped most of ours
        skipped_ticks = 0
        for _ in range(100):
            read.clear()
            got = samples(probe)
            assert kid_pids <= set(got), "a quiet process must still be listed"
            skipped_ticks += len(kid_pids.intersection(read)) <= len(kid_pids) // probe.quiet_every + 10
            if skipped_ticks >= probe.quiet_every:
                break
            time.sleep(0.05)
        assert skipped_ticks >= probe.quiet_every, "quiet processes were not skipped"
        waker = kids[0]
        assert waker.stdin is not None and waker.stdout is not None
        waker.stdin.write("go\n")
        waker.stdin.flush()
        assert waker.stdout.readline().strip() == "ok"
        # the waker sleeps again: its RSS can only shrink (reclaim) while the probe reads it, so
        # /proc/PID/status before and after bracket what the probe saw
        before = kb(proc_status(waker.pid), "RssAnon")
        row = None
        for _ in range(probe.quiet_every):
            row = samples(probe)[waker.pid]
            if row.rss_anon_bytes >= 64 << 20:
                break
        after = kb(proc_status(waker.pid), "RssAnon")
        assert row is not None and row.rss_anon_bytes >= 64 << 20, "the woken process's RSS never showed"
        assert after <= row.rss_anon_bytes <= before, (after, row.rss_anon_bytes, before)
        # exits: their kept files are closed on the next tick
        gone = {k.pid for k in kids[100:]}
        for k in kids[100:]:
            k.kill()
            k.wait()
        got = samples(probe)
        assert not gone & set(got)
        assert not gone & set(probe._fds)  # noqa: SLF001
        assert kid_pids - gone <= set(probe._fds)  # noqa: SLF001
        own = len(os.listdir("/proc/self/fd"))
    finally:
        for k in kids:
            k.kill()
            k.wait()
        probe.close()
    assert len(os.listdir("/proc/self/fd")) <= own - 100, "close() left stat files open"
