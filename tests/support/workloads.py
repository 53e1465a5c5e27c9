"""The C workloads' side of a test: started paused, released, read line by line."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Iterable
from typing import IO

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
    ("ready", "done", figures) with a bound instead of blocking for ever on a workload that hung
    or died. Every line read is kept in ``lines``."""

    def __init__(self, stream: IO[str], name: str = "workload") -> None:
        self.name = name
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                self._queue.put(line.rstrip("\n"))
        except (OSError, ValueError):  # closed under us: the end, as end of file is
            pass
        self._queue.put(None)

    def readline(self, timeout_s: float = BOUND_S) -> str:
        """The next line; AssertionError at end of file or after ``timeout_s``."""
        try:
            line = self._queue.get(timeout=timeout_s)
        except queue.Empty:
            raise WaitTimeout(f"{self.name} printed nothing for {timeout_s:g} s") from None
        if line is None:
            self._queue.put(None)  # every later read sees the end too
            raise AssertionError(f"{self.name} ended; it printed {self.lines[-5:]!r}")
        self.lines.append(line)
        return line

    def wait_for(self, prefix: str, timeout_s: float = BOUND_S) -> str:
        """The first line from now starting with ``prefix`` (lines before it are kept, skipped)."""
        deadline = time.monotonic() + timeout_s
        while True:
            line = self.readline(max(0.0, deadline - time.monotonic()))
            if line.startswith(prefix):
                return line
