"""How often the TUI's event loop wakes up, and for what (issue 36): the TUI at 160x45 on a
pseudo-terminal as bench/self_profile.py runs it, each sleep of the main thread's event loop
(a select that waited) and the callbacks run after it, over a steady window.

    sudo .venv/bin/python bench/loop_wakeups.py [--warmup S] [--seconds S] [--show N] [-- MEMTOP ARGS…]

Prints the sleeps a second (each a wake-up: a context switch of the main thread, the loop's
turn and whatever Python it runs for nothing), what woke each (a timer: the sleep ran out; I/O:
a file descriptor, such as the poll thread's hand-over through the loop's self-pipe), and the
callbacks run in the first ``--show`` turns after the warm-up."""

from __future__ import annotations

import argparse
import asyncio
import selectors
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import self_profile  # noqa: E402 - beside this file


def inside(out: Path, warmup_s: float, seconds: float, argv: list[str]) -> int:
    """In memtop's process: note each select of the main thread that waited and each callback
    the loop ran, then run memtop; the notes of the window go to ``out``."""
    log: list[list[Any]] = []
    on = threading.Event()
    select = selectors.EpollSelector.select

    def noted_select(self: selectors.EpollSelector, timeout: float | None = None) -> Any:
        t0 = time.monotonic()
        ready = select(self, timeout)
        if on.is_set() and threading.current_thread() is threading.main_thread() and timeout != 0:
            log.append(["sleep", t0, time.monotonic() - t0, len(ready)])
        return ready

    selectors.EpollSelector.select = noted_select  # type: ignore[method-assign,assignment]
    run = asyncio.events.Handle._run

    def noted_run(self: asyncio.Handle) -> None:
        if on.is_set():
            cb = self._callback  # type: ignore[attr-defined]
            owner = getattr(cb, "__self__", None)
            name = getattr(cb, "__qualname__", repr(cb))
            if isinstance(owner, asyncio.Task):
                name = "task " + getattr(owner.get_coro(), "__qualname__", "?")
            log.append(["run", name])
        run(self)

    asyncio.events.Handle._run = noted_run  # type: ignore[method-assign]

    def count() -> dict[str, Any]:
        time.sleep(warmup_s)
        on.set()
        t0 = time.monotonic()
        time.sleep(seconds)
        on.clear()
        return {"window_s": time.monotonic() - t0, "log": list(log)}

    return self_profile.run_inside(out, argv, count)


def main(warmup_s: float, seconds: float, argv: list[str]) -> dict[str, Any]:
    return self_profile.run_in_pty(Path(__file__), "memtop's notes", warmup_s, seconds, argv)


def show(doc: dict[str, Any], turns: int) -> None:
    log: list[list[Any]] = doc["log"]
    window: float = doc["window_s"]
    sleeps = [e for e in log if e[0] == "sleep"]
    by_io = sum(1 for e in sleeps if e[3])
    print(
        f"the main thread's event loop over {window:.0f} s: {len(sleeps) / window:.2f} wake-ups a second"
        f" ({(len(sleeps) - by_io) / window:.2f} a timer's, {by_io / window:.2f} a file descriptor's)"
    )
    runs = [e for e in log if e[0] == "run"]
    print(f"{len(runs) / window:.1f} callbacks a second")
    shown = 0
    for e in log:
        if e[0] == "sleep":
            shown += 1
            if shown > turns:
                break
            woke = "a file descriptor" if e[3] else "the timeout"
            print(f"slept {1000 * e[2]:7.1f} ms, woken by {woke}")
        elif shown:
            print(f"    {e[1]}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warmup", type=float, default=20.0, help="seconds before counting")
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds counted")
    ap.add_argument("--show", type=int, default=4, help="the turns after this many sleeps are listed")
    ap.add_argument("--inside", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("memtop_args", nargs="*", help="memtop's own arguments (after --)")
    a = ap.parse_args()
    if a.inside is not None:
        raise SystemExit(inside(a.inside, a.warmup, a.seconds, a.memtop_args))
    show(main(a.warmup, a.seconds, a.memtop_args), a.show)
