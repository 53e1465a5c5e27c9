"""The main screen's partial updates (memtop/ui/textual_compat.py ``LeanCompositor``): the same
pieces sent as Textual's own partial update, from renders of only the widgets under the dirty
lines."""

from __future__ import annotations

import random
from typing import Any

import pytest
from rich.console import Console
from rich.segment import Segment
from support.ui import drive, replay_app, settle, wait_until
from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Static

from memtop.ui.textual_compat import LeanCompositor

SIZE = (160, 45)


def sent(update: ChopsUpdate | None) -> list[Segment]:
    """What an update writes to the terminal, as segments (cursor moves included)."""
    if update is None:
        return []
    console = Console(width=SIZE[0], height=SIZE[1], force_terminal=True, color_system="truecolor")
    out = list(update.__rich_console__(console, console.options))
    assert all(isinstance(s, Segment) for s in out)
    return [s for s in out if isinstance(s, Segment)]


class Twins:
    """Every partial update of a LeanCompositor made twice from the same dirty regions: the lean
    way, then Textual's; what each sends is compared."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.compared = 0
        self.differ: list[str] = []
        lean = LeanCompositor.render_partial_update

        def both(compositor: LeanCompositor) -> ChopsUpdate | None:
            regions = set(compositor._dirty_regions)
            mine = lean(compositor)
            compositor._dirty_regions = set(regions)
            theirs = Compositor.render_partial_update(compositor)
            a, b = sent(mine), sent(theirs)
            self.compared += 1
            if a != b:
                self.differ.append(f"{sorted(regions)}: {len(a)} segments against {len(b)}")
            return mine

        monkeypatch.setattr(LeanCompositor, "render_partial_update", both)


@pytest.mark.parametrize("pane", ["processes", "vmscan", "reclaim", "kernel"])
async def test_partial_updates_send_what_textuals_send(monkeypatch: pytest.MonkeyPatch, pane: str) -> None:
    twins = Twins(monkeypatch)
    app = replay_app(pane, at_s=20.0)
    async with app.run_test(size=SIZE) as pilot:
        replay = app.source.replay
        assert replay is not None
        for _ in range(6):  # the recording's pressure: rows, charts, header move
            replay.step(1)
            await drive(app, pilot)
        # and pieces of any shape: over, under and between widgets, one cell to several lines
        compositor = app.main_screen._compositor
        rng = random.Random(36)
        for _ in range(40):
            x, y = rng.randrange(SIZE[0]), rng.randrange(SIZE[1])
            w, h = rng.randint(1, SIZE[0] - x), rng.randint(1, min(6, SIZE[1] - y))
            compositor._dirty_regions.add(Region(x, y, w, h))
            if rng.random() < 0.5:
                compositor._dirty_regions.add(Region(0, rng.randrange(SIZE[1]), SIZE[0], 1))
            app.main_screen._compositor_refresh()
        replay.step(1)
        await drive(app, pilot)
    assert twins.compared > 40
    assert not twins.differ, twins.differ[:3]


async def test_a_changed_header_renders_the_header_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Textual rendered every widget overlapping the box around the dirty regions, each over its
    whole height: the header's line rendered the screen, the panes and every table behind and
    below it."""
    rendered: list[str] = []
    render_lines = Widget.render_lines

    def counting(self: Widget, crop: Region) -> Any:
        rendered.append(f"{type(self).__name__}#{self.id}:{crop.height}")
        return render_lines(self, crop)

    app = replay_app("processes", at_s=20.0)
    async with app.run_test(size=SIZE) as pilot:
        await drive(app, pilot, ticks=2)
        monkeypatch.setattr(Widget, "render_lines", counting)
        app.main_screen.query_one("#header", Static).refresh()
        await settle(pilot)
        header_only = list(rendered)
        rendered.clear()
        app.main_screen.query_one("#header", Static).refresh()
        app.main_screen.query_one("#keys").refresh()  # the bottom line too: the box is the screen
        await settle(pilot)
        both = list(rendered)
    assert header_only == ["Static#header:1"]
    assert sorted(both) == ["KeyLine#keys:1", "Static#header:1"]


async def test_a_drill_in_sends_what_textual_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drill-in screens draw through the same compositor: the process drill-in's charts,
    tables and sections as the replay moves."""
    from memtop.ui.screens import DrillScreen

    twins = Twins(monkeypatch)
    app = replay_app("processes", at_s=20.0, initial_pid=3620)  # the recording's memory hog
    async with app.run_test(size=SIZE) as pilot:
        await drive(app, pilot)
        await wait_until(pilot, lambda: isinstance(app.screen, DrillScreen), "the drill-in")
        replay = app.source.replay
        assert replay is not None
        before = twins.compared
        for _ in range(6):
            replay.step(1)
            await drive(app, pilot)
        assert isinstance(app.screen, DrillScreen)
        assert twins.compared > before
    assert not twins.differ, twins.differ[:3]
