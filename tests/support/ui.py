"""What every UI test shares: the recording, the clock, and the ways to wait (tests/ui/conftest.py
makes the fixtures here apply to every UI test).

UI tests wait on the app, never on the clock (docs/development.md, "Waiting in tests"):

- the app's timer is off (``MemtopApp.timer_ticks``): a test ticks it itself with :func:`drive`,
  which runs the tick the timer would (poll, apply, notices, redraw) and then waits until the
  screen has handled every message that queued, so what a test sees never depends on when a
  loaded machine let a timer fire;
- :func:`settle` waits until every message queued so far (a key's action, a posted message, a
  ``call_later``) is handled;
- :func:`wait_until` waits for a condition the app reaches on its own (a worker, a screen being
  pushed, a batch published from a thread), handling messages between two looks. Its bound
  (``BOUND_S``) only keeps a broken run from hanging: it is never what a test asserts.

``PRESSURE`` is tests/data/pressure.jsonl.gz, loaded once per run (:func:`pressure`);
:func:`replay_app` is the app on it at a position.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from memtop.stream.recfile import Recording
from memtop.stream.replay import ReplaySource
from memtop.ui.app import MemtopApp
from support.waits import BOUND_S, WaitTimeout

DATA = Path(__file__).resolve().parents[1] / "data"
PRESSURE = DATA / "pressure.jsonl.gz"


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC on every machine (the header shows the recording's wall-clock time)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(autouse=True)
def ticks_by_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's timer does not tick (MemtopApp.timer_ticks): the test does, with :func:`drive`.
    A timer that fired whenever a loaded machine let it made what a test saw depend on the clock."""
    monkeypatch.setattr(MemtopApp, "timer_ticks", False)


@functools.cache
def recording(path: Path = PRESSURE) -> Recording:
    """A recording, read and checked once per run (a Recording is not changed by replaying it)."""
    return Recording.load(path)


def pressure() -> Recording:
    """tests/data/pressure.jsonl.gz, made under real memory pressure (reclaim, swap-ins, an OOM
    kill at 24.8 s, a leaking process)."""
    return recording(PRESSURE)


def replay_app(
    pane: str | None = None,
    at_s: float | None = 30.0,
    *,
    rec: Recording | None = None,
    speed: float = 1.0,
    playing: bool = True,
    **kwargs: Any,
) -> MemtopApp:
    """The app replaying ``rec`` (the pressure recording by default) from ``at_s`` seconds in,
    showing ``pane`` first; ``kwargs`` go to MemtopApp (``initial_pid``, ``interval_s``…)."""
    src = ReplaySource(rec or pressure(), speed=speed, at_s=at_s, playing=playing)
    kwargs.setdefault("interval_s", 1.0)
    return MemtopApp(src, initial_pane=pane, **kwargs)


async def settle(pilot: Pilot[Any]) -> None:
    """Return once the screen and the app have handled every message queued so far."""
    await pilot.pause()


async def drive(app: MemtopApp, pilot: Pilot[Any], ticks: int = 1) -> None:
    """Run ``ticks`` of the app's own ticks (what its timer runs: poll the source, apply the batch,
    show notices, redraw), then wait until the redraw's messages are handled."""
    for _ in range(ticks):
        await app.tick()
    await settle(pilot)


async def wait_until(
    pilot: Pilot[Any], predicate: Callable[[], object], what: str, timeout_s: float = BOUND_S
) -> None:
    """Return once ``predicate()`` is true, handling the app's messages between two looks;
    WaitTimeout naming ``what`` if it is still false after ``timeout_s`` (a stuck run)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise WaitTimeout(f"still waiting for {what} after {timeout_s:g} s")
        await settle(pilot)


async def wait_for_screen(pilot: Pilot[Any], name: str) -> None:
    """Return once the screen on top is a ``name`` (a class name: "ProcessScreen") and mounted."""
    app = pilot.app
    await wait_until(
        pilot, lambda: type(app.screen).__name__ == name and app.screen.is_mounted, f"the {name}"
    )
    await settle(pilot)


async def tick_until(
    app: MemtopApp, pilot: Pilot[Any], predicate: Callable[[], object], what: str, timeout_s: float = BOUND_S
) -> None:
    """Tick the app (:func:`drive`) until ``predicate()`` is true: for what reaches the state with
    a later batch of a live source (a status an intent set, a probe attached in the background; a
    tick that a poll in flight absorbed publishes nothing itself, so ticking goes on)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise WaitTimeout(f"still waiting for {what} after {timeout_s:g} s")
        await drive(app, pilot)


class LayoutCount:
    """How many times a screen was laid out since ``n`` was last set (:func:`count_layouts`)."""

    n: int = 0


def count_layouts(monkeypatch: pytest.MonkeyPatch) -> LayoutCount:
    """Count every layout of any screen from now on (a layout re-renders every widget on it):
    set ``.n = 0`` before a step, read it after."""
    from textual.screen import Screen

    count = LayoutCount()
    refresh_layout = Screen._refresh_layout

    def counting(self: Screen[Any], *args: Any, **kwargs: Any) -> None:
        count.n += 1
        refresh_layout(self, *args, **kwargs)

    monkeypatch.setattr(Screen, "_refresh_layout", counting)
    return count
