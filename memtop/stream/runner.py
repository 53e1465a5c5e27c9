"""The Runner: the one tick every front end runs on (the TUI, `memtop snapshot`, `memtop record`,
`memtop --batch`, and later the exporter).

It owns the state and is the source's one subscriber: each batch the source hands out (a poll, or
the records an intent published) is applied to the state first, then passed to the runner's own
subscribers (a recorder, an exporter), so they all see the same stream in the same order. A
replayed source's seeks go through it too: going back in time starts the state afresh or from a
checkpoint the runner saved. Nothing here imports Textual or bcc.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator

from memtop.records import Batch
from memtop.state import State
from memtop.state.base import Notice
from memtop.stream.source import Source, Subscriber

#: how long a headless front end waits for the probes to attach before going on without them
SETTLE_TIMEOUT_S = 120.0
#: the range `+` and `-` move the interval within (`--interval` may start it outside)
STEP_MIN_S, STEP_MAX_S = 0.25, 10.0


async def wait_or_stop(stop: asyncio.Event | None, seconds: float) -> None:
    """Sleep ``seconds``, or less when ``stop`` is set meanwhile."""
    if seconds <= 0:
        return
    if stop is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


#: notice keys remembered (an OOM storm logs at most 1,000 kills: more than the pane keeps)
ANNOUNCED_KEPT = 4096


class Runner:
    def __init__(self, source: Source, *, interval_s: float = 1.0, checkpoints: bool = True) -> None:
        """``checkpoints``: a replay's seeks may start from saved states (worth it when the user
        moves about a recording; a one-off snapshot seeks once)."""
        self.source = source
        self._interval_s = interval_s
        self.state = State(mode=source.mode)
        #: held while a batch is applied or the state replaced: a reader in another thread (the
        #: exporter's scrapes) holds it to see no half-applied batch
        self.lock = threading.Lock()
        self._subs: list[Subscriber] = []
        #: keys of the notices announced, across states: a replay's seek back applies the same
        #: batches to a fresh state, which would announce a kill again on every seek across it
        self._announced: dict[str, None] = {}
        source.subscribe(self._on_batch)
        replay = source.replay
        if replay is not None:
            replay.on_reset(self.reset_state)
            if checkpoints:
                replay.on_checkpoint(self.save_state, self.restore_state)

    # -- the stream ---------------------------------------------------------------------------------
    def subscribe(self, fn: Subscriber) -> None:
        """``fn`` gets every batch after the state has applied it."""
        self._subs.append(fn)

    def unsubscribe(self, fn: Subscriber) -> None:
        if fn in self._subs:
            self._subs.remove(fn)

    def _on_batch(self, batch: Batch) -> None:
        with self.lock:
            self.state.mode = self.source.mode
            self.state.apply(batch)
        for fn in list(self._subs):
            fn(batch)

    # -- the tick -----------------------------------------------------------------------------------
    @property
    def interval_s(self) -> float:
        """Seconds between ticks: the one value every front end, header and recording reads."""
        return self._interval_s

    def change_interval(self, delta_s: float) -> float:
        """Tick ``delta_s`` seconds less often (negative: more often), kept within
        [STEP_MIN_S, STEP_MAX_S] (`+` and `-`); the new interval. :meth:`ticks` moves to it from
        its next tick on."""
        self._interval_s = min(STEP_MAX_S, max(STEP_MIN_S, self._interval_s + delta_s))
        return self._interval_s

    async def start(self) -> None:
        """Start the source: its first batch (the /proc readers) is in the state on return."""
        await self.source.start()

    async def tick(self, at: float | None = None) -> Batch | None:
        """One poll of the source, applied and passed on. None when the source had nothing this
        time (a poll still running absorbs the tick; a paused replay). ``at``: the poll is made
        at that ``time.monotonic()`` (the source waits for it), else now."""
        return await self.source.poll(at)

    async def settle(self, stop: asyncio.Event | None = None, timeout_s: float = SETTLE_TIMEOUT_S) -> bool:
        """Wait until every probe is attached or has failed (or ``stop``, or the timeout)."""
        deadline = time.monotonic() + timeout_s
        while not self.source.settled():
            if (stop is not None and stop.is_set()) or time.monotonic() > deadline:
                return False
            await wait_or_stop(stop, 0.05)
        return True

    async def ticks(self, stop: asyncio.Event | None = None) -> AsyncIterator[int]:
        """Tick now and then every interval on a fixed grid (a slow tick does not shift the
        next ones), yielding the tick's number (0, 1, …) after each, until ``stop`` is set. A
        changed interval starts a new grid at the tick just made."""
        t0 = time.monotonic()
        step = self.interval_s
        n = k = 0
        while stop is None or not stop.is_set():
            await self.tick()
            yield k
            k += 1
            if self.interval_s != step:
                t0, n, step = t0 + n * step, 0, self.interval_s
            n += 1
            await wait_or_stop(stop, t0 + n * step - time.monotonic())

    def pop_notices(self) -> list[Notice]:
        """What the state asks to announce (an OOM kill), once each, even across a replay's
        seeks."""
        out: list[Notice] = []
        for sub in self.state.subs.values():
            for notice in sub.pop_notices():
                if notice.key:
                    if notice.key in self._announced:
                        continue
                    self._announced[notice.key] = None
                    if len(self._announced) > ANNOUNCED_KEPT:  # the oldest go first
                        del self._announced[next(iter(self._announced))]
                out.append(notice)
        return out

    async def stop(self) -> None:
        await self.source.stop()

    # -- a replay's seeks ---------------------------------------------------------------------------
    def reset_state(self) -> None:
        """A fresh state: a replay going back in time applies the batches again from the start."""
        with self.lock:
            self.state = State(mode=self.source.mode)

    def save_state(self) -> bytes:
        """The state, frozen (a replay's checkpoint, a pause's copy): under the lock, never half
        a batch."""
        from memtop.stream.replay import freeze

        with self.lock:
            return freeze(self.state)

    def restore_state(self, saved: bytes) -> None:
        from memtop.stream.replay import thaw

        state = thaw(saved)
        assert isinstance(state, State)
        with self.lock:
            self.state = state
