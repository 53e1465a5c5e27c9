"""The process around the app (memtop.runtime.lifecycle): the log file fd 2 goes to under the TUI, fds
0-2 opened when closed, the exit deadline no thread can outlive, perf events released at once."""

from __future__ import annotations

import ctypes
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memtop.runtime import lifecycle


def test_log_is_created_private_to_its_owner_and_appended(tmp_path: Path) -> None:
    d = tmp_path / "memtop"
    fd, path = lifecycle.open_log(d)
    try:
        os.write(fd, b"one\n")
    finally:
        os.close(fd)
    fd, path2 = lifecycle.open_log(d)
    try:
        os.write(fd, b"two\n")
    finally:
        os.close(fd)
    assert path == path2 == str(d / "memtop.log")
    assert (d / "memtop.log").read_text() == "one\ntwo\n"
    assert stat.S_IMODE(d.stat().st_mode) == 0o755
    assert stat.S_IMODE((d / "memtop.log").stat().st_mode) == 0o644


@pytest.mark.parametrize("trap", ["symlinked file", "symlinked dir", "dir writable by others", "hard link"])
def test_log_is_never_written_through_a_trap(trap: str, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    d = tmp_path / "memtop"
    if trap == "symlinked dir":
        (tmp_path / "elsewhere").mkdir()
        d.symlink_to(tmp_path / "elsewhere")
        victim = tmp_path / "elsewhere" / "memtop.log"
        victim.write_text("precious\n")
    else:
        d.mkdir(mode=0o755)
        if trap == "symlinked file":
            (d / "memtop.log").symlink_to(victim)
        elif trap == "hard link":
            os.link(victim, d / "memtop.log")
        else:
            d.chmod(0o777)
            victim = d / "memtop.log"
            victim.write_text("precious\n")
    fd, path = lifecycle.open_log(d)
    try:
        os.write(fd, b"clang says\n")
        assert path == ""
        assert os.readlink(f"/proc/self/fd/{fd}") == "/dev/null"
    finally:
        os.close(fd)
    assert victim.read_text() == "precious\n"


def test_log_rotates_when_large(tmp_path: Path) -> None:
    d = tmp_path / "memtop"
    d.mkdir()
    (d / "memtop.log").write_bytes(b"x" * (lifecycle.LOG_ROTATE_BYTES + 1))
    fd, _path = lifecycle.open_log(d)
    os.close(fd)
    assert (d / "memtop.log").stat().st_size == 0
    assert (d / "memtop.log.1").stat().st_size == lifecycle.LOG_ROTATE_BYTES + 1


def test_closed_std_fds_are_opened_on_dev_null() -> None:
    """`memtop 2>&-`: fd 2 is /dev/null before anything else can take its number."""
    code = (
        "import os, sys; from memtop.runtime import lifecycle; lifecycle.ensure_std_fds();"
        "f = open('/proc/self/status'); print(os.readlink('/proc/self/fd/2'), f.fileno());"
        "print('to stderr', file=sys.stderr)"
    )
    out = subprocess.run(
        f'exec {sys.executable} -c "{code}" 2>&-', shell=True, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    target, fileno = out.stdout.split()
    assert target == "/dev/null" and int(fileno) > 2


def test_no_thread_outlives_the_exit_deadline() -> None:
    """A non-daemon thread stuck for good (as Textual's input thread was) would keep the
    interpreter in threading._shutdown forever; the deadline ends the process with its code."""
    code = (
        "import threading; from memtop.runtime import lifecycle;"
        "threading.Thread(target=threading.Event().wait).start();"
        "lifecycle.arm_exit_deadline(7, 0.5); lifecycle.arm_exit_deadline(9, 0.1)"
    )
    out = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert out.returncode == 7  # the first deadline holds; later calls do not move it


class PerfEventAttr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64)] + [
        (f"pad{i}", ctypes.c_uint64) for i in range(14)
    ]


def open_sw_event() -> int:
    """A software perf event (task clock) on this thread: needs no privilege."""
    attr = PerfEventAttr(type=1, size=ctypes.sizeof(PerfEventAttr), config=1)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = int(libc.syscall(298, ctypes.byref(attr), 0, -1, -1, 0))  # perf_event_open, x86-64
    if fd < 0:
        pytest.skip(f"perf_event_open: {os.strerror(ctypes.get_errno())}")
    return fd


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall number for x86-64")
def test_release_perf_events_leaves_dev_null_in_their_place() -> None:
    """Released from many threads at once; the numbers stay taken, so a later close() by the
    library that opened them closes /dev/null, never a file opened since."""
    fds = [open_sw_event() for _ in range(8)]
    other = os.open("/proc/self/status", os.O_RDONLY)
    released = [0]
    t = threading.Thread(target=lambda: released.__setitem__(0, lifecycle.release_perf_events()))
    t.start()
    t.join(timeout=30)
    assert not t.is_alive()
    try:
        assert released[0] >= 8
        assert {os.readlink(f"/proc/self/fd/{fd}") for fd in fds} == {"/dev/null"}
        assert os.readlink(f"/proc/self/fd/{other}") == "/proc/self/status".replace("self", str(os.getpid()))
    finally:
        for fd in [*fds, other]:
            os.close(fd)
