"""The /proc poller's listing on the real /proc, skipped while no task is created: /proc/stat's
count of tasks created (``processes``) is read first at each poll; when it is the count of the
last poll, the pids of the last listing are read again (a process that exited since is found by
its read failing and its directory gone) and /proc is not listed. A process started between two
polls moves the count and shows at the next; one that exits without another made shows gone at
the next, and its children's new parent at once."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from support import proc_samples as samples

from memtop.probes.procfs import ProcfsProbe


def probe_on_real_proc() -> ProcfsProbe:
    probe = ProcfsProbe()
    probe.load()
    assert probe.schedstat, "this kernel's /proc/PID/schedstat should tell when a task ran"
    return probe


def no_task_created(monkeypatch: pytest.MonkeyPatch, probe: ProcfsProbe) -> None:
    """From now on the probe reads one count of tasks created at every poll (the machine is shared:
    other sessions' processes come and go), as if none were: the listing is skipped."""
    monkeypatch.setattr(probe, "_forks", lambda: 42)


@pytest.mark.bpf  # runs with the kernel tests (real /proc); needs no BPF itself
def test_a_process_started_between_two_polls_shows_at_the_next() -> None:
    probe = probe_on_real_proc()
    try:
        samples(probe)
        kid = subprocess.Popen(["sleep", "1000"])
        try:
            got = samples(probe)
            assert probe.last_listed, "a task was created: /proc is listed"
            assert kid.pid in got and got[kid.pid].comm == "sleep"
        finally:
            kid.kill()
            kid.wait()
    finally:
        probe.close()


@pytest.mark.bpf
def test_with_no_task_created_the_listing_is_skipped_and_an_exit_is_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kid = subprocess.Popen(["sleep", "1000"])
    probe = probe_on_real_proc()
    try:
        listed = samples(probe)
        assert kid.pid in listed
        no_task_created(monkeypatch, probe)
        samples(probe)  # the count read differs from the real one before: listed once more
        assert probe.last_listed
        again = samples(probe)
        assert not probe.last_listed, "the same count: the last listing's pids read again"
        assert kid.pid in again and set(again) <= set(listed) | {os.getpid()}
        kid.kill()
        kid.wait()
        gone = samples(probe)
        assert not probe.last_listed
        assert kid.pid not in gone, "an exit is seen without a listing"
        assert kid.pid not in probe._inodes  # noqa: SLF001 - forgotten as a listing forgets it
        assert kid.pid not in (probe._order or [])  # noqa: SLF001
    finally:
        if kid.poll() is None:
            kid.kill()
            kid.wait()
        probe.close()


@pytest.mark.bpf
def test_with_no_task_created_a_sleeper_whose_parent_exits_shows_its_new_parent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A parent that exits while its child sleeps: the child's stat line changes (its parent)
    without it running; with the listing skipped the parent's exit is still seen (its read
    fails) and the child read again at once."""
    pidfile = tmp_path / "child"
    parent = subprocess.Popen(
        ["sh", "-c", f"sleep 1000 & echo $! > {pidfile}; read x"], stdin=subprocess.PIPE, text=True
    )
    probe = probe_on_real_proc()
    try:
        from support import wait_until

        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip().isdigit(), "the child's pid")
        child = int(pidfile.read_text())
        for _ in range(4):  # quiet by now
            got = samples(probe)
        assert got[child].ppid == parent.pid
        no_task_created(monkeypatch, probe)
        samples(probe)
        assert samples(probe)[child].ppid == parent.pid and not probe.last_listed
        assert parent.stdin is not None
        parent.stdin.write("\n")
        parent.stdin.flush()
        parent.wait()
        after = samples(probe)
        assert not probe.last_listed
        assert parent.pid not in after
        assert after[child].ppid != parent.pid
        assert after[child].ppid == int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[1])
        os.kill(child, signal.SIGKILL)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        probe.close()


@pytest.mark.bpf
def test_the_count_of_tasks_created_is_read_from_proc_stat() -> None:
    probe = probe_on_real_proc()
    try:
        before = probe._forks()  # noqa: SLF001
        assert before is not None and before > 0
        subprocess.run(["true"], check=True)
        after = probe._forks()  # noqa: SLF001
        assert after is not None and after > before
    finally:
        probe.close()
