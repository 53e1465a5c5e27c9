"""The process around the app: standard fds, the terminal check, the log file, the exit deadline.

- :func:`ensure_std_fds`: a closed fd 0, 1 or 2 (``memtop 2>&-``) is opened on /dev/null at
  start, so nothing memtop opens later lands on it, and LLVM, which writes its diagnostics to fd 2,
  does not abort (rc 134) on a write error there.
- :func:`require_terminal`: the TUI refuses to start without a terminal on stdin and stdout; it
  spun at 100 % CPU on ``read() == 0`` and outlived signals (issue 19, item 5).
- :func:`open_log`: where fd 2 goes while the TUI is up, so clang/libbcc text never lands on the
  screen: root's is /var/log/memtop/memtop.log, a user's $XDG_CACHE_HOME/memtop/memtop.log; never
  opened through a symlink, owned by the user, 0644.
- :func:`arm_exit_deadline`: once memtop starts exiting, it is gone within the deadline whatever
  a thread is doing. What it leaves attached the kernel detaches: BPF programs, perf events and
  uprobes go when the process's fds close.
"""

from __future__ import annotations

import atexit
import io
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from memtop.core.errors import NoTerminal
from memtop.runtime import priority

#: from the first exit request (q, a signal, the terminal gone) to the process being gone
EXIT_DEADLINE_S = 2.5
#: the log is moved to memtop.log.1 when it grows past this at start
LOG_ROTATE_BYTES = 1 << 20
#: how long the deadline waits on for perf events being released (see release_perf_events)
RELEASE_GRACE_S = 10.0

_deadline: threading.Timer | None = None
_releasing = threading.Event()
_deadline_lock = threading.Lock()
_last_words: list[Callable[[], None]] = []


def ensure_std_fds() -> None:
    """Open /dev/null on any of fds 0-2 that is closed (and give Python a stream for it)."""
    for fd, mode in ((0, "r"), (1, "w"), (2, "w")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        stream = io.TextIOWrapper(
            io.FileIO(fd, mode, closefd=False),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )
        setattr(sys, ("stdin", "stdout", "stderr")[fd], stream)
        setattr(sys, ("__stdin__", "__stdout__", "__stderr__")[fd], stream)


def require_terminal() -> None:
    """NoTerminal (exit 2) unless stdin and stdout are terminals."""
    if not (os.isatty(0) and os.isatty(1)):
        names = [n for fd, n in ((0, "stdin"), (1, "stdout")) if not os.isatty(fd)]
        which = f"{names[0]} is not a terminal" if len(names) == 1 else "stdin and stdout are not terminals"
        raise NoTerminal(
            f"the TUI needs a terminal ({which}); without one use "
            "`memtop --batch`, `memtop snapshot` or `memtop record`"
        )


def log_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/var/log/memtop")
    return Path(os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))) / "memtop"


def open_log(directory: Path | None = None) -> tuple[int, str]:
    """(fd, path) of the log, opened for appending; (fd of /dev/null, "") when it cannot be had
    safely. The directory and file must be the user's own, not symlinks, not writable by others."""
    d = directory if directory is not None else log_dir()
    dfd = -1
    try:
        d.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(d, 0o755)
        except FileExistsError:
            pass
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        st = os.fstat(dfd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise PermissionError(f"{d} is not {os.geteuid()}'s own or is writable by others")
        try:
            old = os.stat("memtop.log", dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISREG(old.st_mode) and old.st_size > LOG_ROTATE_BYTES:
                os.rename("memtop.log", "memtop.log.1", src_dir_fd=dfd, dst_dir_fd=dfd)
        except FileNotFoundError:
            pass
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open("memtop.log", flags, 0o644, dir_fd=dfd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
            os.close(fd)
            raise PermissionError(f"{d}/memtop.log is not a plain file of {os.geteuid()}'s own")
        os.fchmod(fd, 0o644)
        os.set_blocking(fd, True)
        return fd, str(d / "memtop.log")
    except OSError:
        return os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC), ""
    finally:
        if dfd >= 0:
            os.close(dfd)


def release_perf_events(threads: int = 32) -> int:
    """Detach every perf event this process holds (tracepoint, perf and uprobe attachments of
    its BPF programs), all at once: each fd is pointed at /dev/null, from many threads at a time.

    Detaching one waits for RCU grace periods in the kernel, partly outside any lock, so one after
    the other they were most of an exit, and together about half that (docs/performance.md). The fd numbers stay taken (by /dev/null), so the libraries'
    own close() later closes that, never another file. Returns how many were released.

    Until it returns, the exit deadline waits (up to RELEASE_GRACE_S): a uprobe's perf event
    released by a dying thread (or left to the kernel's close at exit) fails to take its
    breakpoint out of the target, "failed to unregister, leaking uprobe"."""
    _releasing.set()
    try:
        return _release_perf_events(threads)
    finally:
        _releasing.clear()


def _release_perf_events(threads: int) -> int:
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == "anon_inode:[perf_event]":
                fds.append(int(name))
        except (OSError, ValueError):
            continue
    if not fds:
        return 0
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)

    def release(batch: list[int]) -> None:
        for fd in batch:
            try:
                os.dup2(null, fd, inheritable=False)
            except OSError:
                pass

    n = min(threads, len(fds))
    workers = [threading.Thread(target=release, args=(fds[i::n],), daemon=True) for i in range(n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    os.close(null)
    return len(fds)


def on_hard_exit(fn: Callable[[], None]) -> None:
    """Run ``fn`` (best effort, quickly) before the deadline ends the process."""
    _last_words.append(fn)


def arm_exit_deadline(code: int, seconds: float = EXIT_DEADLINE_S) -> None:
    """End the process with ``code`` in ``seconds`` unless it has ended by then. The first call
    sets the deadline; later ones do not move it."""
    global _deadline
    with _deadline_lock:
        if _deadline is not None:
            return
        _deadline = threading.Timer(seconds, _hard_exit, args=(code,))
        _deadline.daemon = True
        _deadline.name = "memtop-exit-deadline"
        _deadline.start()


def _hard_exit(code: int) -> None:
    end = time.monotonic() + RELEASE_GRACE_S
    while _releasing.is_set() and time.monotonic() < end:
        time.sleep(0.02)
    for fn in reversed(_last_words):  # each in its own thread: a write to a frozen terminal blocks
        t = threading.Thread(target=_quietly, args=(fn,), daemon=True)
        t.start()
        t.join(timeout=0.2)
    # a start that never drew its first frame leaves its session's autogroup as it found it
    _quietly(priority.restore)
    os._exit(code)


def end(code: int) -> NoReturn:
    """End the process with ``code`` once memtop's own work is done: Python's exit handlers run
    (the probes' close among them), the standard streams are flushed, and the process goes
    without C++ static destructors. LLVM's (libbcc compiles with it) ran while a daemon thread was
    still inside libbcc (a compilation cut short by SIGTERM, a detach): a segfault, rc 139, after
    a clean quit."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing more to say there
            pass
    os._exit(code)


def _quietly(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - nothing may stop the exit
        pass
