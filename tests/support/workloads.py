"""The C workloads' side of a test: started paused, released, read line by line; the leakers
the leaks tests trace, started and killed in one place."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import IO

import pytest

from support.programs import compile_c
from support.waits import BOUND_S, WaitTimeout


def case_lines(lines: Iterable[str]) -> dict[str, tuple[int, int]]:
    """A leaker workload's report (allocfamily, stackwalk): one "<tag> NAME COUNT BYTES" line a
    case up to "done"; NAME -> (COUNT, BYTES)."""
    cases: dict[str, tuple[int, int]] = {}
    for line in lines:
        if line.startswith("done"):
            break
        _, name, n, b = line.split()
        cases[name] = (int(n), int(b))
    return cases


class PausedWorkload:
    """A test workload started paused ("ready PID"), released with a line on stdin, finished when
    it prints "done", kept alive until closed so its /proc counters can be read."""

    def __init__(self, *cmd: str) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().startswith("ready")
        self.pid = self.proc.pid

    def run(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.startswith("done"), f"workload failed: {line!r} rc={self.proc.poll()}"

    def close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write("bye\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class LineReader:
    """A workload's stdout read line by line in a thread, so a test waits for the line it needs
    ("ready", "done", its figures) with a bound instead of blocking for ever on a workload that
    hung or died. Every line read is kept in ``lines``."""

    def __init__(self, stream: IO[str], name: str = "workload") -> None:
        self.name = name
        self.lines: list[str] = []
        self.ended = False
        self._next = 0  # the first line readline has not returned
        self._cv = threading.Condition()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                with self._cv:
                    self.lines.append(line.strip())
                    self._cv.notify_all()
        except (OSError, ValueError):  # closed under us: the end, as end of file is
            pass
        with self._cv:
            self.ended = True
            self._cv.notify_all()

    def _wait(self, found: Callable[[], str | None], what: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while True:
                line = found()
                if line is not None:
                    return line
                if self.ended:
                    raise AssertionError(f"{self.name} ended before {what} (it printed {self.lines[-5:]})")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeout(f"{self.name}: no {what} after {timeout_s:g} s (got {self.lines[-5:]})")
                self._cv.wait(left)

    def readline(self, timeout_s: float = BOUND_S) -> str:
        """The next line not returned yet."""

        def found() -> str | None:
            if self._next < len(self.lines):
                self._next += 1
                return self.lines[self._next - 1]
            return None

        return self._wait(found, "next line", timeout_s)

    def wait_for(self, prefix: str, timeout_s: float = BOUND_S) -> str:
        """The first line it printed, now or before, that starts with ``prefix`` (a workload's
        "ready", "done" or figures line, read as often as a test likes)."""

        def found() -> str | None:
            return next((line for line in self.lines if line.startswith(prefix)), None)

        return self._wait(found, repr(prefix), timeout_s)

    def lines_with(self, prefix: str, n: int, timeout_s: float = 2 * BOUND_S) -> list[str]:
        """Every line so far that starts with ``prefix``, once there are ``n`` of them."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while True:
                got = [line for line in self.lines if line.startswith(prefix)]
                if len(got) >= n:
                    return got
                if self.ended:
                    raise AssertionError(f"{self.name} ended with {len(got)} {prefix!r} lines of {n}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeout(
                        f"{self.name}: {len(got)} {prefix!r} lines of {n} after {timeout_s:g} s"
                    )
                self._cv.wait(left)


class Leaker:
    """A leaking workload running (tests/workloads/leaky.c, laneleak.c, budgetchurn.c,
    addrchurn.c: each prints "ready PID", its figures, "leaked BYTES COUNT"), its stdout read by
    a :class:`LineReader`; returned once it printed "ready"."""

    def __init__(
        self,
        argv: Sequence[str | bytes | os.PathLike[str]],
        name: str = "",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        self.out = LineReader(self.proc.stdout, name or os.path.basename(os.fsdecode(argv[0])))
        try:
            ready = self.out.wait_for("ready").split()
        except BaseException:
            self.kill()
            raise
        #: the pid it printed: its own, even when argv starts it through chroot or unshare
        self.pid = int(ready[1]) if len(ready) > 1 else self.proc.pid

    def wait_for(self, prefix: str) -> str:
        return self.out.wait_for(prefix)

    def leaked(self) -> tuple[int, int]:
        """(bytes, count) of what it says it leaked so far: its last "leaked" line (one waited
        for; a workload that prints one every second has leaked more since its first)."""
        _, b, n = self.out.lines_with("leaked", 1)[-1].split()
        return int(b), int(n)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def leaky_argv(mode: str = "a", leak_s: float = 5, tail_s: float = 60) -> list[str]:
    """tests/workloads/leaky.c's command: leak (mode "a" or "b") for ``leak_s`` seconds, then
    live ``tail_s`` more."""
    return [str(compile_c("leaky")), mode, str(leak_s), str(tail_s)]


class Leakers:
    """The leakers a test started, each killed when the test ends (the ``leakers`` fixture)."""

    def __init__(self) -> None:
        self.started: list[Leaker] = []

    def start(
        self,
        argv: Sequence[str | bytes | os.PathLike[str]],
        name: str = "",
        env: Mapping[str, str] | None = None,
    ) -> Leaker:
        leaker = Leaker(argv, name, env)
        self.started.append(leaker)
        return leaker

    def kill_all(self) -> None:
        for leaker in self.started:
            leaker.kill()


@pytest.fixture
def leakers() -> Iterator[Leakers]:
    """Start leakers with ``leakers.start(argv)``; every one is killed after the test."""
    made = Leakers()
    try:
        yield made
    finally:
        made.kill_all()
