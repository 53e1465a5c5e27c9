"""`memtop export` without ``--interval``: the kernel read at the pace of the scrapes, as
node_exporter reads at each scrape, instead of every second.

The export loop (:func:`follow`) reads (a Runner tick, then the prebuild of what the next scrapes
will ask for) when one of these comes first:

* a scraper's next scrape is ``LEAD_S`` away: each kind of scrape's period is learned from the
  gaps between its scrapes (``Exporter._scrapers``), so a Prometheus every 15 s costs one reading
  per scrape and finds its exposition built;
* a scrape came whose state is older than ``FRESH_S`` (a first scrape, a curl, a scraper off its
  schedule): it asks for a reading and waits for it (:meth:`Pace.ask`, at most ``ASK_WAIT_S``),
  so what is served is never older than that (``memtop_exporter_exposition_age_seconds``);
* ``IDLE_READ_S`` passed since the last reading, scraped or not: the probes' buffers are
  drained, a failed probe retried and short-lived processes and memcgs seen at least that often
  (as at ``--interval 15``).

Readings are at least ``MIN_GAP_S`` apart unless a scrape asks. With ``--interval`` (or
``--textfile``, which no scrape paces) the loop reads every interval on a fixed grid instead."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memtop.export.server import Exporter
    from memtop.stream.runner import Runner

#: a scrape is served a state at most this old: an older one is read anew first
FRESH_S = 2.0
#: the reading for a scraper's next scrape comes this long before it is due (a reading and a
#: build take tens of ms; the rest is room for a loaded machine)
LEAD_S = 1.0
#: the kernel is read at least this often, scraped or not
IDLE_READ_S = 15.0
#: readings at least this far apart, but for one a scrape asks for
MIN_GAP_S = 1.0
#: a scrape waits at most this long for the reading it asked for (then it gets the last one)
ASK_WAIT_S = 5.0


class Pace:
    """What the export loop and the scrapes (the HTTP server's threads) share: the readings done,
    whether a scrape asked for one, and how to wake the loop."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        #: readings done (each a tick and its prebuild)
        self.reads = 0
        self._asked = False
        #: times the loop looked at whether to read (tests wait on it)
        self.looks = 0
        #: wakes the loop to look again (set by :func:`follow`; thread-safe)
        self.wake: Callable[[], None] = lambda: None

    def ask(self, timeout_s: float = ASK_WAIT_S) -> bool:
        """A scrape's: a reading now, waited for (True: done; False: the loop did not read within
        ``timeout_s``, or is not running). A reading running already answers it."""
        with self._cv:
            target = self.reads + 1
            self._asked = True
        self.wake()
        with self._cv:
            return self._cv.wait_for(lambda: self.reads >= target, timeout_s)

    def take_ask(self) -> bool:
        """The loop's: whether a scrape asked for a reading since the last one."""
        with self._cv:
            return self._asked

    def done(self) -> None:
        """The loop's: a reading (tick and prebuild) is done; the scrapes waiting for it go on."""
        with self._cv:
            self.reads += 1
            self._asked = False
            self._cv.notify_all()


async def _wait_any(events: tuple[asyncio.Event, ...], seconds: float) -> None:
    if seconds <= 0:
        return
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


async def follow(
    runner: Runner,
    exporter: Exporter,
    stop: asyncio.Event,
    duration_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Read when a scrape is due or asks, or every ``IDLE_READ_S`` (the module's docstring), until
    ``stop`` (or ``duration_s``)."""
    pace = exporter.pace
    assert pace is not None
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()

    def wake_loop() -> None:
        loop.call_soon_threadsafe(wake.set)

    pace.wake = wake_loop
    end = math.inf if duration_s is None else clock() + duration_s
    last = -math.inf
    try:
        while not stop.is_set():
            wake.clear()  # before looking: a wake from now on is seen by the wait below
            now = clock()
            if now >= end:
                break
            due = exporter.next_read_at(last)
            pace.looks += 1
            if pace.take_ask() or now >= due:
                last = now
                await runner.tick()
                # off the loop: a build must not delay the signals' handling
                await asyncio.to_thread(exporter.prebuild)
                pace.done()
                continue
            await _wait_any((wake, stop), min(due, end) - now)
    finally:
        pace.wake = lambda: None
        pace.done()  # a scrape still waiting gets the last reading
