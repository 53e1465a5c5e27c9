"""The app tells its source which probes feed what is on screen (Source.watch): the pane's, the
drill-in's while it covers the pane, and everything while a recording runs."""

from __future__ import annotations

from pathlib import Path

from support import FakeSource, vmscan_batches
from support.ui import settle

from memtop.ui.app import MemtopApp
from memtop.ui.panes.base import DrillIn
from memtop.ui.screens.process import ProcessScreen
from memtop.views import get_view


async def test_the_pane_or_drill_in_shown_is_what_is_watched(tmp_path: Path) -> None:
    source = FakeSource(vmscan_batches())
    app = MemtopApp(source, initial_pane="reclaim", snapshot_dir=str(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        assert source.watched[-1] == frozenset(get_view("reclaim").probes)
        await pilot.press("8")  # the Kernel pane
        await settle(pilot)
        assert source.watched[-1] == frozenset(get_view("kernel").probes)
        assert "kernel" in source.watched[-1]
        app.post_message(DrillIn(101))
        await settle(pilot)
        assert isinstance(app.screen, ProcessScreen)
        app.redraw()  # the tick's redraw
        assert source.watched[-1] == frozenset(get_view("process").probes)
        assert "kernel" not in source.watched[-1]
        await pilot.press("escape")
        await settle(pilot)
        app.redraw()
        assert source.watched[-1] == frozenset(get_view("kernel").probes)
        await pilot.press("R")  # a recording is of every pane
        await settle(pilot)
        app.redraw()
        assert source.watched[-1] is None
        await pilot.press("R")
        await settle(pilot)
        app.redraw()
        assert source.watched[-1] == frozenset(get_view("kernel").probes)
