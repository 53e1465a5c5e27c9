"""The drill-in's mappings tab while a big table is still being read (Pilot, records fed as the
smaps probe sends them): the totals show first, the table fills, and keys are answered on the rows
read so far; the table shows the first MAP_ROWS_SHOWN in the order asked for and says so."""

from __future__ import annotations

from support import FakeSource
from support.ui import settle
from textual.widgets import DataTable, Static

from memtop.records import Batch, ProbeStatus
from memtop.records.process import MappingRow, Mappings, MappingTotals
from memtop.ui.app import MemtopApp
from memtop.ui.lines import shown_text
from memtop.ui.screens.process import MAP_ROWS_SHOWN, ProcessScreen

PID = 4242


def rows(n: int, start: int = 0, big_at: int = -1) -> tuple[MappingRow, ...]:
    out = []
    for i in range(start, start + n):
        size = (1 << 30) if i == big_at else 4096 * (1 + i % 5)
        out.append(
            (0x10000 * i, 0x10000 * i + size, size, 4096 * (i % 3), 4096, 0, 0, "rw-p", f"/lib/m{i % 9}")
        )
    return tuple(out)


def text(screen: ProcessScreen, sel: str) -> str:
    widget = screen.query_one(sel)
    assert isinstance(widget, Static)
    return str(shown_text(widget) or "")


def table_starts(screen: ProcessScreen) -> list[int]:
    table = screen.query_one("#proc-mappings-table")
    assert isinstance(table, DataTable)
    return [int(str(r.key.value)) for r in table.ordered_rows]


async def test_keys_are_answered_while_the_table_fills() -> None:
    app = MemtopApp(FakeSource())  # takes no probes, polls nothing: the test feeds state
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        screen = ProcessScreen(PID, app.source, app.state, section="mappings")
        app.push_screen(screen)
        await settle(pilot)
        # the rollup, then the first part of the read (the probe's first poll)
        app.state.apply(
            Batch(
                1,
                (
                    ProbeStatus("smaps", "attached"),
                    MappingTotals(PID, 123 << 20, 100 << 20, 1 << 20, 0),
                    Mappings(PID, rows(3000), append=False, complete=False),
                ),
            )
        )
        app.redraw()
        await settle(pilot)
        assert "RSS 125952" in text(screen, "#proc-mappings-totals")
        title = text(screen, "#proc-mappings-title")
        assert "3,000 mappings so far, reading" in title and f"first {MAP_ROWS_SHOWN:,}" in title
        assert table_starts(screen) == [0x10000 * i for i in range(MAP_ROWS_SHOWN)]
        # a key while the read goes on: the rows so far, sorted by size, largest first
        await pilot.press("greater_than_sign")
        assert screen.opts.sort == "size_bytes" and screen.opts.reverse
        shown = table_starts(screen)
        assert len(shown) == MAP_ROWS_SHOWN
        sizes = {m[0]: m[2] for m in rows(3000)}
        assert [sizes[s] for s in shown] == sorted(sizes.values(), reverse=True)[:MAP_ROWS_SHOWN]
        await pilot.press("r")
        assert not screen.opts.reverse and sizes[table_starts(screen)[0]] == min(sizes.values())
        await pilot.press("r")
        # the rest of the read, with the largest mapping of all in it
        app.state.apply(
            Batch(2, (Mappings(PID, rows(57000, 3000, big_at=42000), append=True, complete=True),))
        )
        app.redraw()
        await settle(pilot)
        title = text(screen, "#proc-mappings-title")
        assert "60,000 mappings ·" in title and "reading" not in title
        assert table_starts(screen)[0] == 0x10000 * 42000
        doc = screen.view.document(app.state, screen.options())
        assert doc["complete"] and len(doc["rows"]) == 60000  # a snapshot has every row
        assert doc["totals"]["rss_bytes"] == 123 << 20 and doc["totals"]["from"] == "smaps_rollup"
