"""The drill-in's working-set tab (Pilot, records fed as the wss probe sends them): nothing is
measured before the user's ``w``; ``w`` asks the source for a measurement and shows its tab; the
windows fill the curve, the split and the table; ``w`` again stops it."""

from __future__ import annotations

from support import FakeSource
from support.ui import settle
from textual.widgets import DataTable, Static

from memtop.records import Batch, ProbeStatus
from memtop.records.process import WorkingSetStart, WorkingSetWindow
from memtop.ui.app import MemtopApp
from memtop.ui.lines import shown_text
from memtop.ui.screens.process import ProcessScreen

PID = 4343
MiB = 1 << 20
S = 1_000_000_000


def text(screen: ProcessScreen, sel: str) -> str:
    widget = screen.query_one(sel)
    assert isinstance(widget, Static)
    return str(shown_text(widget) or "")


def window(i: int, ref: int) -> WorkingSetWindow:
    return WorkingSetWindow(
        PID,
        (1 + 10 * i) * S,
        (11 + 10 * i) * S,
        ref,
        1024 * MiB,
        ref,
        0,
        (("[anon]", 1024 * MiB, 1024 * MiB, ref), ("/usr/lib/libc.so.6", 2 * MiB, MiB, 0)),
        40_000_000,
        50_000_000,
    )


async def test_w_measures_and_w_again_stops() -> None:
    source = FakeSource()
    app = MemtopApp(source)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        screen = ProcessScreen(PID, app.source, app.state)
        app.push_screen(screen)
        await settle(pilot)
        assert source.working_set == []  # never without the user's key
        await pilot.press("w")
        await settle(pilot)
        assert source.working_set == [(PID, True, 10.0)]
        assert screen.section == "working_set"
        assert "w measures it" in text(screen, "#proc-working_set-title")
        app.state.apply(
            Batch(
                1,
                (
                    ProbeStatus("wss", "attached"),
                    WorkingSetStart(PID, 1 * S, 10 * S, "referenced bits", 1, 1),
                ),
            )
        )
        app.redraw()
        await settle(pilot)
        assert "first window is not over" in text(screen, "#proc-working_set-totals")
        app.state.apply(Batch(2, (window(0, 128 * MiB), window(1, 120 * MiB))))
        app.redraw()
        await settle(pilot)
        totals = text(screen, "#proc-working_set-totals")
        assert "touched 120" in totals and "cold 904" in totals and "128" in totals  # the curve
        assert "referenced bits, 10 s windows · measuring" in text(screen, "#proc-working_set-title")
        table = screen.query_one("#proc-working_set-table")
        assert isinstance(table, DataTable) and table.row_count == 2
        await pilot.press("w")  # running: stops
        assert source.working_set[-1] == (PID, False, 10.0)
