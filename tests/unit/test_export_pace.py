"""`memtop export` without --interval reads the kernel at the pace of its scrapes
(memtop.export.pace): once before each scrape of a scraper whose period it learned, when a scrape
finds the state older than FRESH_S (and that scrape gets the new reading), and at least every
IDLE_READ_S; never every second. On a fake clock: the loop's waits are real, but it is woken by
each scrape and by the test, and what it does is decided by the clock the test moves."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

import pytest
from support.exporter import clocked_exporter

from memtop.export.pace import FRESH_S, IDLE_READ_S, LEAD_S, Pace, follow

#: a bound on waits for the loop (a broken run), never what a test asserts
WAIT_S = 60.0


def value(body: bytes, name: str) -> float:
    m = re.search(rb"^" + name.encode() + rb" (\S+)$", body, re.M)
    assert m is not None, name
    return float(m.group(1))


def test_when_the_next_reading_is_due() -> None:
    ex, now = clocked_exporter(50)
    assert ex.next_read_at(1000.0) == 1000.0 + IDLE_READ_S  # nobody scrapes: the idle bound
    for t in (1000.0, 1015.0):  # a scraper every 15 s: its period known at its second scrape
        now[0] = t
        ex.exposition(gzip=True)
    assert ex.next_read_at(1015.0) == 1030.0 - LEAD_S  # just before its next scrape
    assert ex.next_read_at(1030.0 - LEAD_S) == 1029.0 + IDLE_READ_S  # read for it already
    now[0] = 1030.0
    ex.exposition(gzip=True)
    assert ex.next_read_at(1029.0) == 1045.0 - LEAD_S
    for t in (1030.2, 1030.4, 1030.6):  # another kind of scrape, every 0.2 s: no prediction
        now[0] = t
        ex.exposition()
    assert ex.next_read_at(1029.0) == 1045.0 - LEAD_S  # (it is read for when it asks: FRESH_S)
    for t in (1045.0, 1045.2, 1045.4, 1045.6):  # the first scraper's burst: its period holds
        now[0] = t
        ex.exposition(gzip=True)
    assert ex.next_read_at(1045.0) == 1060.6 - LEAD_S
    for t in (1050.6, 1055.6):  # a scraper every 5 s on that kind: its period, whatever before
        now[0] = t
        ex.exposition(gzip=True)
    assert ex.next_read_at(1055.0) == 1060.6 - LEAD_S
    assert ex.next_read_at(1059.7) == 1059.7 + IDLE_READ_S  # read for it already
    for t in (1060.0, 1060.999, 1061.998, 1062.997):  # a Prometheus every second, gaps a hair short
        now[0] = t
        ex.exposition(accept="application/openmetrics-text", gzip=True)
    # half its period (the smallest gap) before its next scrape, not left to be asked for
    assert ex.next_read_at(1062.0) == pytest.approx(1062.997 + 0.999 / 2)


async def until(what: str, ok: Callable[[], bool]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not ok():
        assert loop.time() < deadline, f"{what}: not within {WAIT_S} s"
        await asyncio.sleep(0.01)


def test_the_loop_reads_when_a_scrape_is_due_or_asks_and_not_in_between() -> None:
    ex, now = clocked_exporter(50)
    pace = ex.pace = Pace()

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.create_task(follow(ex.runner, ex, stop, clock=lambda: now[0]))
        await until("the first reading", lambda: pace.reads == 1)
        assert ex.generation == 1
        # a scrape of a state younger than FRESH_S is answered from it, no reading
        now[0] += FRESH_S / 2
        body = (await asyncio.to_thread(ex.exposition))[0]
        assert pace.reads == 1 and value(body, "memtop_exporter_readings_total") == 1
        # one of an older state waits for a reading of its own and gets it
        now[0] += 5.0
        body = (await asyncio.to_thread(ex.exposition))[0]
        assert pace.reads == 2 and value(body, "memtop_exporter_readings_total") == 2
        assert value(body, "memtop_exporter_exposition_age_seconds") == 0.0
        # its period known (5 s): the loop reads LEAD_S before the next scrape, not sooner
        next_scrape = now[0] + 5.0
        now[0] = next_scrape - LEAD_S - 0.5
        looks = pace.looks
        pace.wake()
        await until("the loop's look", lambda: pace.looks > looks)
        assert pace.reads == 2
        now[0] = next_scrape - LEAD_S
        pace.wake()
        await until("the reading before the scrape", lambda: pace.reads == 3)
        now[0] = next_scrape
        body = (await asyncio.to_thread(ex.exposition))[0]
        assert pace.reads == 3 and value(body, "memtop_exporter_readings_total") == 3
        assert value(body, "memtop_exporter_exposition_age_seconds") == LEAD_S
        # the scraper gone: the loop still reads every IDLE_READ_S
        now[0] += 5.0 - LEAD_S  # its next reading, made (the scrape does not come)
        pace.wake()
        await until("the reading for a scrape that does not come", lambda: pace.reads == 4)
        now[0] += IDLE_READ_S
        pace.wake()
        await until("the idle reading", lambda: pace.reads == 5)
        stop.set()
        await asyncio.wait_for(loop, WAIT_S)

    asyncio.run(run())
    assert ex.generation == 5  # five readings, one batch applied each
