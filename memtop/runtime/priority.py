"""The CPU priority of memtop's start: raised from its first line to its first frame, then put back.

Started into a loaded machine (a fault storm on every vCPU), memtop's ~0.3 s of CPU to its first
frame took 0.75 s and more of wall time: the scheduler shares a contended core between sessions
(autogroups, /proc/PID/autogroup) and, within one, between threads by their nice value. So until
the first frame the session's autogroup and the thread's nice are raised (:data:`BOOST`), and at
the first frame (or any way out before it) both go back to what they were. Only a start at the
default priority (nice 0) is raised: a user who started memtop niced, or set the session's
autogroup, chose that (and another memtop starting in the same session at the same moment
finds it raised and leaves it). Only what memtop set is put back: a value someone changed
meanwhile is theirs. Without the privilege (not root) or without autogroups it is a no-op; a
start killed outright (SIGKILL) before its first frame leaves its session raised. The boost is for the start only: once drawn, memtop competes
with what it watches at the priority it was started with, and the BPF compiler's process, which
starts after the first frame, inherits that too (docs/performance.md)."""

from __future__ import annotations

import os
import threading

#: nice values lower (higher priority) than the start's during the start; -10 weighs ~9.3 times
#: a nice-0 task (the kernel's sched_prio_to_weight)
BOOST = 10
AUTOGROUP = "/proc/self/autogroup"

_lock = threading.Lock()
#: what was raised, to be put back: (autogroup nice before, after) and (thread nice before, after)
_autogroup: tuple[int, int] | None = None
_nice: tuple[int, int] | None = None


def _read_autogroup() -> int | None:
    """The nice value of this process's autogroup ("/autogroup-42 nice 0"), None without one."""
    try:
        with open(AUTOGROUP, encoding="ascii") as f:
            return int(f.read(128).split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def _write_autogroup(value: int) -> bool:
    try:
        with open(AUTOGROUP, "w", encoding="ascii") as f:
            f.write(str(value))
        return True
    except OSError:  # not root, no autogroups (the file refuses writes when they are off)
        return False


def boost() -> None:
    """Raise the start's priority (idempotent; a no-op where it may not)."""
    global _autogroup, _nice
    with _lock:
        if _autogroup is None:
            if _read_autogroup() == 0 and _write_autogroup(-BOOST):
                _autogroup = (0, -BOOST)
        if _nice is None:
            try:
                if os.getpriority(os.PRIO_PROCESS, 0) == 0:
                    # Linux: this thread only; the threads it starts from now on inherit it
                    os.setpriority(os.PRIO_PROCESS, 0, -BOOST)
                    _nice = (0, -BOOST)
            except OSError:  # not permitted
                pass


def restore() -> None:
    """Put back what :func:`boost` raised (idempotent): the autogroup, and every thread of the
    process still at the raised nice value (the threads started meanwhile inherited it)."""
    global _autogroup, _nice
    with _lock:
        if _autogroup is not None:
            before, after = _autogroup
            _autogroup = None
            if _read_autogroup() == after:
                _write_autogroup(before)
        if _nice is not None:
            before, after = _nice
            _nice = None
            for tid in _threads():
                try:
                    if os.getpriority(os.PRIO_PROCESS, tid) == after:
                        os.setpriority(os.PRIO_PROCESS, tid, before)
                except OSError:  # the thread ended meanwhile
                    pass


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [threading.get_native_id()]
