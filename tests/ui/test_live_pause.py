"""Space in a live memtop pauses the display while data keeps being collected (README, "Keys"):
whatever redraws the screen while paused (a resize, a sort key, another pane) shows the moment
paused, never the data collected since. The source here is the pressure recording played on,
as a live source goes on; ``set_paused`` is what Space does in a live memtop."""

from __future__ import annotations

from typing import Any

from support.ui import drive, replay_app
from textual.widgets import DataTable, Static


def table_cells(app: Any, table_id: str) -> list[tuple[str, ...]]:
    table = app.main_screen.query_one(f"#{table_id}", DataTable)
    return [tuple(str(c) for c in table.get_row_at(i)) for i in range(table.row_count)]


def status(app: Any, pane: str) -> str:
    return str(app.main_screen.query_one(f"#{pane}-status", Static).render())


async def test_a_resize_while_paused_redraws_the_moment_paused() -> None:
    app = replay_app("swapin", at_s=8.0, playing=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await drive(app, pilot, ticks=2)
        before = table_cells(app, "swapin-table"), status(app, "swapin")
        app.set_paused(True)
        replay = app.source.replay
        assert replay is not None
        replay.step(12)  # the data goes on: 12 more seconds of swap-ins
        await drive(app, pilot, ticks=2)
        moved = app.runner.state is not None and app.state is not app.runner.state
        assert moved
        await pilot.resize_terminal(100, 30)  # narrower: the pane is laid out again
        await drive(app, pilot)
        assert [row[:3] for row in table_cells(app, "swapin-table")] == [row[:3] for row in before[0]]
        await pilot.resize_terminal(160, 45)
        await drive(app, pilot)
        assert (table_cells(app, "swapin-table"), status(app, "swapin")) == before
        await pilot.press("W")  # a sort key while paused sorts what is shown (the other way)
        await drive(app, pilot)
        assert table_cells(app, "swapin-table") == before[0][::-1]
        await pilot.press("W")
        await drive(app, pilot)
        for pane in ("reclaim", "swapin"):  # another pane, and back
            app.show_pane(pane)
            await drive(app, pilot)
        assert status(app, "swapin") == before[1]
        app.set_paused(False)  # on again: the data now
        await drive(app, pilot)
        assert (table_cells(app, "swapin-table"), status(app, "swapin")) != before
