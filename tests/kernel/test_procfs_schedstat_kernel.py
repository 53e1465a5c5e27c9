"""The /proc poller's quiet rule on the real /proc: a quiet process with one thread is checked by
its schedstat every tick, so one that wakes shows at the next tick (not a few ticks late, which at
the exporter's 15 s interval was up to 45 s), and a sleeper whose parent exits shows its new
parent at once. Reclaim is taken out of the picture (``_reclaimed`` says none, and the fallback's
n-th tick never comes): what the probe shows is what the schedstat rule read."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import pytest
from support import kb, pid_reads, proc_status, wait_asleep, waking_sleepers
from support import proc_samples as samples

from memtop.probes.procfs import BACKSTOP_TICKS, QUIET_AFTER, ProcfsProbe
from memtop.records.processes import ProcSample

#: the fallback's n-th tick never comes within a test
NEVER = 1_000_000


def quiet_probe(monkeypatch: pytest.MonkeyPatch) -> tuple[ProcfsProbe, list[int]]:
    """A probe on the real /proc that never sees reclaim and never reaches its n-th tick, and the
    pids whose stat it reads."""
    probe = ProcfsProbe(quiet_every=NEVER)
    monkeypatch.setattr(probe, "_reclaimed", lambda _vmstat: False)
    read = pid_reads(monkeypatch, probe)
    probe.load()
    assert probe.schedstat, "this kernel's /proc/PID/schedstat should tell when a task ran"
    return probe, read


def poll_off_backstop(probe: ProcfsProbe, pids: set[int], read: list[int]) -> dict[int, ProcSample]:
    """A poll on a tick that is none of ``pids``' backstop tick (each is read once in
    BACKSTOP_TICKS ticks whatever its schedstat says), ``read`` holding only its reads."""
    due = {p % BACKSTOP_TICKS for p in pids}
    # fewer pids than BACKSTOP_TICKS, or every tick would be one's backstop tick
    assert len(due) < BACKSTOP_TICKS, "too many pids: no tick is free of their backstop reads"
    while (probe._tick + 1) % BACKSTOP_TICKS in due:  # noqa: SLF001
        samples(probe)
    read.clear()
    return samples(probe)


@pytest.mark.bpf  # runs with the kernel tests (real /proc); needs no BPF itself
def test_a_quiet_process_that_wakes_shows_at_the_next_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    kids = waking_sleepers(8)  # consecutive pids: fewer than BACKSTOP_TICKS, so a tick is none's backstop
    probe, read = quiet_probe(monkeypatch)
    try:
        for k in kids:
            assert k.stdout is not None and k.stdout.readline().strip() == "ready"
        pids = {k.pid for k in kids}
        # "ready" is printed before the read: on a loaded machine a child still runs for a while
        # (its schedstat moves, so its stat is read): quiet only once the kernel has it asleep
        wait_asleep(pids)
        for _ in range(QUIET_AFTER + 2):
            samples(probe)
        # asleep: their stat is not read (their schedstat is), yet every one is listed
        got = poll_off_backstop(probe, pids, read)
        assert pids <= set(got)
        assert not pids & set(read), "quiet sleepers' stat was read"
        waker = kids[0]
        assert waker.stdin is not None and waker.stdout is not None
        waker.stdin.write("go\n")
        waker.stdin.flush()
        assert waker.stdout.readline().strip() == "ok"
        # asleep again: its RSS can only shrink while the probe reads it
        before = kb(proc_status(waker.pid), "RssAnon")
        row = poll_off_backstop(probe, pids, read)[waker.pid]
        after = kb(proc_status(waker.pid), "RssAnon")
        assert after <= row.rss_anon_bytes <= before, (after, row.rss_anon_bytes, before)
        assert row.rss_anon_bytes >= 64 << 20
    finally:
        for k in kids:
            k.kill()
            k.wait()
        probe.close()


@pytest.mark.bpf
def test_a_sleeper_whose_parent_exits_shows_its_new_parent_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # sh starts a sleeper and waits on its stdin; when sh exits, the kernel gives the sleeper
    # another parent while it sleeps (it does not run: its schedstat stays)
    sh = subprocess.Popen(
        ["sh", "-c", "sleep 600 & echo $!; read x"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert sh.stdout is not None and sh.stdin is not None
    sleeper = int(sh.stdout.readline())
    wait_asleep([sleeper], "nanosleep")  # started, not yet asleep, it runs: its schedstat moves
    probe, read = quiet_probe(monkeypatch)
    try:
        for _ in range(QUIET_AFTER + 2):
            got = samples(probe)
        assert got[sleeper].ppid == sh.pid
        poll_off_backstop(probe, {sleeper}, read)
        assert sleeper not in read, "the quiet sleeper's stat was read"
        sh.stdin.write("x\n")
        sh.stdin.flush()
        sh.wait()
        got = poll_off_backstop(probe, {sleeper}, read)
        fields = Path(f"/proc/{sleeper}/stat").read_text().rsplit(")", 1)[1].split()
        assert got[sleeper].ppid == int(fields[1]) != sh.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(sleeper, signal.SIGKILL)
        probe.close()
