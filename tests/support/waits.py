"""Bounded waits for what the tests cannot be told about: the kernel, a child process, a thread.

A test waits on the thing itself (a counter reaching a value, a line a workload prints, a file
appearing); the bound only keeps a broken run from hanging, so it is generous (BOUND_S) and is
never what a test asserts: the test asserts the figures it then reads. Waits inside the TUI go
through tests/ui/conftest.py instead, which waits on the app's own ticks, workers and messages.
"""

from __future__ import annotations

import asyncio
import inspect
import select
import time
from collections.abc import Awaitable, Callable
from typing import IO, Any

#: seconds a wait may take before the run is declared stuck (the machine may be loaded)
BOUND_S = 30.0
#: seconds between two looks at something nothing notifies us of (a /proc file, a thread's flag)
STEP_S = 0.02


class WaitTimeout(AssertionError):
    """What was waited for did not happen within the bound: the run is stuck or broken."""


def wait_until(predicate: Callable[[], object], what: str, timeout_s: float = BOUND_S) -> None:
    """Return once ``predicate()`` is true; raise WaitTimeout naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise WaitTimeout(f"still waiting for {what} after {timeout_s:g} s")
        time.sleep(STEP_S)


async def wait_until_async(
    predicate: Callable[[], object] | Callable[[], Awaitable[object]],
    what: str,
    timeout_s: float = BOUND_S,
) -> None:
    """:func:`wait_until` inside an event loop: ``predicate`` may be a coroutine function (a poll
    of a source, say), and the loop runs between two looks."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = predicate()
        if inspect.isawaitable(got):
            got = await got
        if got:
            return
        if time.monotonic() > deadline:
            raise WaitTimeout(f"still waiting for {what} after {timeout_s:g} s")
        await asyncio.sleep(STEP_S)


def readable(f: IO[Any] | int, timeout_s: float) -> bool:
    """Whether ``f`` (a pipe, a pty) has something to read within ``timeout_s``. poll, not
    select: a test whose process holds over 1,024 fds (a probe reading hundreds of memcgs)
    makes select() raise "filedescriptor out of range"."""
    p = select.poll()
    p.register(f, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(p.poll(max(0.0, timeout_s) * 1000.0))
