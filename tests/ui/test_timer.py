"""The app's own timer ticks it. Every other UI test turns the timer off and ticks the app itself
(tests/ui/conftest.py, tests/support/ui.py ``drive``), so this is where the timer is checked: it
polls the source and draws what came, and `+` re-arms it at the new interval."""

from __future__ import annotations

import pytest
from support import FakeSource
from support.ui import wait_until

from memtop.records import Batch, ProbeStatus
from memtop.ui.app import MemtopApp


async def test_the_timer_ticks_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MemtopApp, "timer_ticks", True)
    source = FakeSource([Batch(10**9, (ProbeStatus("one", "attached"),)), Batch(2 * 10**9, ())])
    app = MemtopApp(source, interval_s=0.5)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_until(pilot, lambda: app.ticks_done >= 2, "two ticks of the timer")
        assert not source.batches and "one" in app.state.statuses
        await pilot.press("plus")
        assert app.runner.interval_s == 1.0
        done = app.ticks_done
        await wait_until(pilot, lambda: app.ticks_done > done, "a tick at the new interval")


async def test_the_timer_asks_each_poll_for_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timer does not wake the event loop to poll: it asks the source for each tick's poll
    at its time on the grid (the live source waits for it in its poll thread), so the loop is
    woken once a tick, by the batch."""
    monkeypatch.setattr(MemtopApp, "timer_ticks", True)
    asked: list[float | None] = []

    class Timed(FakeSource):
        async def poll(self, at: float | None = None) -> Batch | None:
            asked.append(at)
            return await super().poll(at)

    app = MemtopApp(Timed([Batch(10**9, ()), Batch(2 * 10**9, ()), Batch(3 * 10**9, ())]), interval_s=0.25)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_until(pilot, lambda: len([a for a in asked if a is not None]) >= 3, "three timed polls")
    timed = [a for a in asked if a is not None]
    # one time on the grid a tick: a quarter of a second apart (a late tick skips a time)
    steps = [round((b - a) / 0.25, 6) for a, b in zip(timed, timed[1:], strict=False)]
    assert steps and all(s >= 1 and s == int(s) for s in steps), steps
