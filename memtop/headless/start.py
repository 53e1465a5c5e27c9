"""How every headless front end starts and stops (``memtop snapshot``, ``record``, ``--batch``
and ``export``): the signals that end it, and the start of the source with its intents, waited
on until every probe attached or failed. A module of its own, so the exporter, which runs for
weeks, does not import what the other front ends write with (views, snapshots, recordings)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Sequence

from memtop.runtime import ready
from memtop.stream.runner import Runner


def stop_on_signals(
    stop: asyncio.Event, sigs: Sequence[signal.Signals] = (signal.SIGINT, signal.SIGTERM)
) -> Callable[[], None]:
    """The signals set ``stop`` (the loop then finishes what it does); returns an undo."""
    loop = asyncio.get_running_loop()
    done: list[signal.Signals] = []
    for sig in sigs:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            done.append(sig)

    def undo() -> None:
        for sig in done:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)

    return undo


async def begin(
    runner: Runner,
    stop: asyncio.Event,
    focus: int | None,
    leak_pids: Sequence[int],
    tracers: Sequence[str] = (),
) -> None:
    """Start the source, state the intents, wait until every probe attached or failed.
    ``tracers``: the pane's while-shown tracers (a snapshot or --batch of it shows the pane)."""
    await runner.start()
    if focus is not None:
        runner.source.focus(focus)
    if leak_pids:
        runner.source.trace_allocations(leak_pids)
    for tracer in tracers:
        runner.source.trace_kernel(tracer, True)
    await runner.settle(stop)
    ready.announce(runner.source.statuses())
