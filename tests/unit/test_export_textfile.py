"""`memtop export --textfile` as root for weeks: the directory is the one checked at start even
when its path is later swapped for a symlink; temporary files of killed runs are cleaned at the
next start; SIGTERM/SIGINT leave no temporary file; an unsafe directory is refused and a failed
write is exit 2. Real files, a real full tmpfs, the real `memtop export` (no BPF needed)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support import fill_up, memtop_cmd, small_tmpfs

from memtop.core.errors import UnsafePath
from memtop.export.textfile import Textfile

WAIT_S = 60.0


def until(what: str, ok: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


def start(path: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*memtop_cmd(), "export", "--no-bpf", "--no-listen", "--textfile", str(path), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> tuple[int, str]:
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=WAIT_S)
    return proc.returncode, err.decode(errors="replace")


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_parent_swapped_for_a_symlink_is_not_followed(tmp_path: Path) -> None:
    d, evil = tmp_path / "textfile", tmp_path / "evil"
    d.mkdir()
    evil.mkdir()
    proc = start(d / "memtop.prom", "--interval", "0.5")
    try:
        until("the first write", lambda: (d / "memtop.prom").exists())
        # the directory's path now leads elsewhere; the exporter keeps writing where it checked
        real = tmp_path / "textfile.real"
        d.rename(real)
        d.symlink_to(evil)
        first = (real / "memtop.prom").stat().st_mtime_ns
        until("a later write", lambda: (real / "memtop.prom").stat().st_mtime_ns != first)
        assert list(evil.iterdir()) == []
    finally:
        rc, err = finish(proc)
    assert rc == 0, err
    assert [p.name for p in real.iterdir()] == ["memtop.prom"]


def test_temp_files_of_killed_runs_are_cleaned_at_start(tmp_path: Path) -> None:
    gone, alive = dead_pid(), os.getpid()
    stale = tmp_path / f".memtop.prom.{gone}.tmp"
    running = tmp_path / f".memtop.prom.{alive}.tmp"  # a run still going: not ours to remove
    unrelated = tmp_path / f".other.prom.{gone}.tmp"
    for p in (stale, running, unrelated):
        p.write_text("half a write\n")
    run = subprocess.run(
        [*memtop_cmd(), "export", "--no-bpf", "--no-listen", "--textfile", str(tmp_path / "memtop.prom")]
        + ["--duration", "1"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert run.returncode == 0, run.stderr
    assert not stale.exists() and running.exists() and unrelated.exists()
    assert (tmp_path / "memtop.prom").exists()


def test_a_sigkilled_run_leaves_nothing_after_the_next_start(tmp_path: Path) -> None:
    """SIGKILL cannot be handled: whatever it leaves, the next start removes."""
    target = tmp_path / "memtop.prom"
    proc = start(target, "--interval", "0.1")
    until("the first write", target.exists)
    proc.kill()
    proc.wait()
    # what a kill in the middle of a write leaves (the window is too short to hit on purpose)
    (tmp_path / f".memtop.prom.{proc.pid}.tmp").write_text("half a write\n")
    proc = start(target, "--duration", "1")
    _, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memtop.prom"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_leave_no_temp_file(tmp_path: Path, sig: int) -> None:
    target = tmp_path / "memtop.prom"
    proc = start(target, "--interval", "0.1")
    try:
        until("the first write", target.exists)
    finally:
        rc, err = finish(proc, sig)
    assert rc in (0, 130), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memtop.prom"]


def test_unsafe_directories_are_refused(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o775)  # group-writable, not sticky
    with pytest.raises(UnsafePath, match="writable by other users"):
        Textfile(loose / "memtop.prom")
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp: others cannot rename or remove what memtop writes
    Textfile(sticky / "memtop.prom").close()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    with pytest.raises(UnsafePath, match="belongs to uid 65534"):
        Textfile(theirs / "memtop.prom")
    link = tmp_path / "link"
    link.symlink_to(sticky)
    with pytest.raises(UnsafePath, match="cannot open directory"):
        Textfile(link / "memtop.prom")
    # the same through the command line: exit 2, a message, nothing written
    run = subprocess.run(
        [
            *memtop_cmd(),
            "export",
            "--no-bpf",
            "--no-listen",
            "--textfile",
            str(loose / "m.prom"),
            "--duration",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert run.returncode == 2 and "writable by other users" in run.stderr, run.stderr
    assert list(loose.iterdir()) == []


def test_a_failed_write_is_exit_2_and_leaves_no_temp_file() -> None:
    # room for any machine's exposition (500 cgroups made it bigger than 256 KiB, and memtop failed
    # at its first write): the disk is filled up to ENOSPC once memtop has written, whatever its size
    with small_tmpfs("16m") as mnt:
        target = mnt / "memtop.prom"
        proc = start(target, "--interval", "0.2")
        try:

            def written() -> bool:
                assert proc.poll() is None, proc.communicate()
                return target.exists()

            until("the first write", written)

            def failed() -> bool:
                # the disk full, and kept full: each write that replaces the file frees the old
                # one's pages, which the next write could take (one fill raced those writes)
                fill_up(mnt)
                return proc.poll() is not None

            until("memtop's exit on a failed write", failed)
            rc = proc.wait(timeout=WAIT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
            _, err = proc.communicate()
        assert rc == 2, err
        assert "cannot write" in err.decode(errors="replace")
        # no temporary file: the filler, and the last file memtop wrote whole (a rename)
        assert sorted(p.name for p in mnt.iterdir()) == ["filler", "memtop.prom"]
        assert target.read_bytes().endswith(b"\n")
