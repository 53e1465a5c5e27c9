"""The terminal under the TUI, and the one place memtop reaches into Textual's Linux driver.

A terminal can go at any moment: its window closed, tmux killed, ssh dropped. Textual's input
thread then loops on ``read() == 0`` (a hung-up tty reads end-of-file) at 100 % CPU, its output
thread dies on EIO, and nothing ends the app: a memtop whose terminal had gone sat at ~69 % CPU,
re-parented to pid 1, with its BPF programs loaded (issue 19, item 5). Here:

- a watch thread polls the terminal's fds for hangup or error (no input is read), and when it
  comes, points them at /dev/null (output) and at a pipe that never becomes readable (input), so
  Textual's threads neither spin nor block, arms the exit deadline, and asks the app to exit
  through its normal path, which detaches every probe;
- the driver drops output once the terminal is gone and treats a read error like a hangup;
- while the TUI is up, fd 2 (where clang and libbcc print) goes to the log file, and the driver
  draws on its own copy of stdout; fd 2 is restored afterwards for memtop's last message.

Private API used (Textual 8), through memtop/ui/textual_compat.py: ``LinuxDriver._file``, the
stream the driver draws on. Textual's resume on SIGCONT is limited to a resume after a suspend (see MemtopDriver).
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import io
import os
import select
import sys
import termios
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from textual.drivers.linux_driver import LinuxDriver

from memtop.runtime import lifecycle
from memtop.ui import textual_compat

if TYPE_CHECKING:
    from textual.app import App

#: exit status when the terminal went away (as for SIGHUP)
LOST_CODE = 129
#: what the exit deadline writes to a terminal still there, so a hard exit leaves it usable:
#: kitty keys off, main screen, cursor on, focus events, mouse, paste and line wrap back
RESTORE = (
    "\x1b[<u\x1b[?1049l\x1b[?25h\x1b[?1004l\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?2004l\x1b[?7h"
)


class TerminalSession:
    """fds and terminal state of one TUI run (see the module's docstring)."""

    def __init__(self) -> None:
        self.lost = threading.Event()
        self.log_path = ""
        self.out: io.TextIOWrapper | None = None  # the driver's copy of stdout
        self._closing = False
        self._out_fd = -1
        self._saved_err = -1
        self._log_fd = -1  # kept open to the end: the exit deadline may write to it
        self._attrs: list[Any] | None = None
        self._on_lost: Callable[[], None] | None = None
        self._never_ready: tuple[int, int] | None = None

    # -- setup / teardown ---------------------------------------------------------------------------
    def __enter__(self) -> TerminalSession:
        try:
            self._attrs = termios.tcgetattr(0)
        except termios.error:
            self._attrs = None
        self._out_fd = os.dup(1)
        os.set_inheritable(self._out_fd, False)
        self.out = open(self._out_fd, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stderr.flush()
        self._saved_err = os.dup(2)
        os.set_inheritable(self._saved_err, False)
        self._log_fd, self.log_path = lifecycle.open_log()
        os.dup2(self._log_fd, 2)
        lifecycle.on_hard_exit(self.restore_terminal)
        lifecycle.on_hard_exit(self.log_threads)
        threading.Thread(target=self._watch, name="memtop-terminal-watch", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing = True  # the watch stops here: closing our fds is no hangup
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        if self._saved_err >= 0:
            os.dup2(self._saved_err, 2)  # memtop's last words go where stderr went
            os.close(self._saved_err)
            self._saved_err = -1
        if self.out is not None:
            with contextlib.suppress(OSError, ValueError):
                self.out.close()
        if self._out_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._out_fd)
            self._out_fd = -1

    def log_threads(self) -> None:
        """What every thread was doing when the exit deadline struck, for the log."""
        if self._log_fd < 0:
            return
        os.write(self._log_fd, f"memtop {os.getpid()}: exit deadline reached; threads:\n".encode())
        faulthandler.dump_traceback(self._log_fd, all_threads=True)

    def restore_terminal(self) -> None:
        """Best effort (the exit deadline does not wait for it long): leave the alternate screen
        and raw mode if Textual did not get to it."""
        if self.lost.is_set() or self._out_fd < 0:
            return
        with contextlib.suppress(OSError):
            os.write(self._out_fd, RESTORE.encode())
        if self._attrs is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(0, termios.TCSANOW, self._attrs)

    # -- the terminal going away -----------------------------------------------------------------------
    def on_lost(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (from the watch thread) when the terminal goes; at once if it has."""
        self._on_lost = fn
        if self.lost.is_set():
            fn()

    def _fds(self) -> list[int]:
        return [fd for fd in (0, 1, self._out_fd, self._saved_err) if fd >= 0]

    def _watch(self) -> None:
        poller = select.poll()
        for fd in (0, 1):
            poller.register(fd, 0)  # hangup and errors are always reported; no input is read
        while True:
            events = poller.poll()
            if self._closing:
                return
            if any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _fd, ev in events):
                self.gone()
                return

    def gone(self) -> None:
        """The terminal is gone (hangup, end of file, read error): detach from it and exit."""
        if self.lost.is_set() or self._closing:
            return
        self.lost.set()
        lifecycle.arm_exit_deadline(LOST_CODE)
        null = os.open(os.devnull, os.O_RDWR)
        try:
            hung = {fd for fd in self._fds() if _hung_up(fd)} | {0, 1, self._out_fd}
            for fd in hung - {0}:
                if fd >= 0:
                    os.dup2(null, fd)
            # the input thread waits on a pipe nobody writes to instead of spinning on end of
            # file; non-blocking, so a read its last select() allowed ends it instead of hanging
            self._never_ready = os.pipe()
            os.set_blocking(self._never_ready[0], False)
            os.dup2(self._never_ready[0], 0)
        finally:
            os.close(null)
        fn = self._on_lost
        if fn is not None:
            fn()


def _hung_up(fd: int) -> bool:
    p = select.poll()
    p.register(fd, 0)
    return any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _fd, ev in p.poll(0))


#: the session of the TUI running now (the driver finds it here)
SESSION: TerminalSession | None = None


class WakingEvent(threading.Event):
    """The driver's ``exit_event``: setting it also writes to a pipe the input thread waits on,
    so that thread can wait without a timeout (memtop.ui.textual_compat.run_input_loop)."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self.wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        with contextlib.suppress(OSError):  # full (the thread is awake anyway) or closed
            os.write(self.wake_fd, b"x")


class MemtopDriver(LinuxDriver):
    """Textual's Linux driver, drawing on the session's copy of stdout, quiet once the terminal
    has gone, its input thread asleep until a key comes."""

    def __init__(self, app: App[Any], **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._suspended = False
        # kept for the process's life: a driver is made once per app run
        self._wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.exit_event = WakingEvent(wake_w)
        if SESSION is not None and SESSION.out is not None:
            textual_compat.set_driver_output(self, SESSION.out)

    def suspend_application_mode(self) -> None:
        self._suspended = True
        super().suspend_application_mode()

    def resume_application_mode(self) -> None:
        """Only after a suspend (Ctrl-Z). Textual resumes on every SIGCONT, and the kernel sends
        one with SIGHUP when a terminal hangs up: that restarted the input thread, after the
        app's teardown had stopped it, on a terminal that was gone; it then kept the exited
        process alive (issue 19, item 5)."""
        if not self._suspended or (SESSION is not None and SESSION.lost.is_set()):
            return
        self._suspended = False
        super().resume_application_mode()

    def write(self, data: str) -> None:
        if SESSION is not None and SESSION.lost.is_set():
            return
        super().write(data)

    def run_input_thread(self) -> None:
        try:
            textual_compat.run_input_loop(self, self._wake_r)
        except OSError:  # EIO: the other end of the terminal closed
            if SESSION is not None:
                SESSION.gone()


@contextlib.contextmanager
def terminal_session() -> Iterator[TerminalSession]:
    global SESSION
    with TerminalSession() as session:
        SESSION = session
        try:
            yield session
        finally:
            SESSION = None


def attach(app: App[Any], code: int = LOST_CODE) -> None:
    """Have ``app`` exit (normal path, probes detached) when the session's terminal goes."""
    session = SESSION
    if session is None:
        return
    loop = asyncio.get_running_loop()

    def exit_app() -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: the app has ended anyway
            loop.call_soon_threadsafe(app.exit, code)

    session.on_lost(exit_app)


def run_in_terminal(app: App[Any]) -> Any:
    """``app.run()`` on the terminal, inside a :class:`TerminalSession`."""
    with terminal_session():
        return app.run()
