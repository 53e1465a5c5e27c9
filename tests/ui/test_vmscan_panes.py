"""vmscan and reclaim panes on a fake source (Pilot): charts built when first shown, tables,
untrusted names shown literally, lost events, sorting and drill-in."""

from __future__ import annotations

from typing import Any

import pytest
from support import FakeSource, vmscan_batches
from support.ui import settle

from memtop.records import Batch, Lost


async def test_panes_render_and_enter_drills_into_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.widgets import DataTable
    from textual_plotext import PlotextPlot

    from memtop.ui.app import MemtopApp
    from memtop.ui.panes.base import DrillIn
    from memtop.ui.panes.reclaim import ReclaimPane
    from memtop.ui.panes.vmscan import VmscanPane

    batches = vmscan_batches()
    lost = Batch(batches[-1].ts_ns + 1_000_000_000, (Lost("vmscan", "events", 17),))
    app = MemtopApp(FakeSource(batches + [lost], mode="replay"))
    async with app.run_test(size=(180, 50)) as pilot:
        await settle(pilot)
        for _ in range(3):
            await app.source.poll()
        assert len(app.query(PlotextPlot)) == 0  # built when the pane is first shown
        await pilot.press("2")  # tabs follow pane order: processes, vmscan, reclaim…
        await settle(pilot)
        app.redraw()
        await settle(pilot)
        vp = app.query_one(VmscanPane)
        assert app.query_one("#vmscan-origins", DataTable).row_count == 3
        assert app.query_one("#vmscan-slab", DataTable).row_count == 2
        assert len(app.query(PlotextPlot)) == 2
        assert vp.chart_data(app.state)["kswapd"][-1][1] == 1000.0

        await pilot.press("3")
        await settle(pilot)
        app.redraw()
        await settle(pilot)
        rp = app.query_one(ReclaimPane)
        procs = app.query_one("#reclaim-procs", DataTable)
        assert [str(r.key.value) for r in procs.ordered_rows] == ["77", "4242"]
        # untrusted comm is plain text, never markup
        cell = procs.get_row("77")[1]
        assert str(cell) == "[bold]x"
        status = str(app.query_one("#reclaim-status").render())
        assert "lost 17" in status
        posted: list[int] = []
        orig_post = rp.post_message

        def capture(msg: Any) -> bool:
            if isinstance(msg, DrillIn):
                posted.append(msg.pid)
                return True
            return orig_post(msg)

        monkeypatch.setattr(rp, "post_message", capture)
        procs.focus()
        await pilot.press("down")
        await pilot.press("enter")
        await settle(pilot)
        assert posted == [4242]
        await pilot.press("T")  # same key again: ascending total
        await settle(pilot)
        assert [str(r.key.value) for r in procs.ordered_rows] == ["4242", "77"]
        await pilot.press("K")  # kind: direct only
        await settle(pilot)
        assert not app.query_one("#reclaim-hist-memcg").display
