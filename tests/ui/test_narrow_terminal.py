"""At 80×24 (issue 36, item 3) the sortable tables (Processes, Cgroups, Reclaim, Swap-in, Kernel)
show whole columns only (a figure never loses its unit at the screen's edge), the column sorted by
is always on screen, a new sort shows the top of the new order, every name cut says so with an
ellipsis, and the header keeps swap used and memory pressure. Drawn from the pressure recording
(a pane with a recording of its own from that), compared with the pane's own document and the
recorded /proc/meminfo and pressure."""

from __future__ import annotations

from typing import Any

import pytest
from support.ui import drive
from test_processes_pane import screen_lines
from test_snapshots import make_app, prepared
from textual.widgets import DataTable

from memtop.state.host import HostState
from memtop.ui.app import MemtopApp
from memtop.ui.panes.base import SortableTablePane
from memtop.views.header import bytes_short

SIZE = (80, 24)
#: pane -> its main table's id and the sort keys to step through with `>` (the low-priority
#: columns the narrow layout leaves out until sorted by)
PANES = {
    "processes": "processes-table",
    "cgroups": "cgroups-table",
    "reclaim": "reclaim-procs",
    "swapin": "swapin-table",
    "kernel": "kernel-table",
    "pagecache": "pagecache-table",
}


def pane_of(app: MemtopApp) -> SortableTablePane:
    pane = app.active_pane()
    assert isinstance(pane, SortableTablePane)
    return pane


def header_row(app: MemtopApp, lines: list[str], table: DataTable[Any]) -> str:
    """The table's header line on screen."""
    labels = [c.label.plain.split(" ")[0] for c in table.ordered_columns]
    return next(line for line in lines if all(label in line for label in labels[:2]))


def assert_whole(app: MemtopApp, table: DataTable[Any]) -> None:
    """Every column shown fits the screen: no horizontal scrolling, every label whole on the
    header line, every cell on screen as the column formats it."""
    lines = screen_lines(app)
    assert table.max_scroll_x == 0, [c.label.plain for c in table.ordered_columns]
    head = header_row(app, lines, table)
    for c in table.ordered_columns:
        assert c.label.plain.split(" ▼")[0].split(" ▲")[0] in head, (c.label.plain, head)
    body = lines[lines.index(head) + 1 :]
    shown = min(table.row_count, 5)
    for i in range(shown):
        cells = [str(x).strip() for x in table.get_row_at(i)]
        at, line = 0, body[i]
        for cell in cells:
            found = line.find(cell, at)
            assert found >= 0, (cell, line)
            at = found + len(cell)


@pytest.mark.parametrize("pane", list(PANES))
async def test_the_columns_shown_are_whole_and_the_sort_column_on_screen(pane: str) -> None:
    app = make_app(pane=pane)
    async with app.run_test(size=SIZE) as pilot:
        await prepared(pilot)
        p = pane_of(app)
        table = app.query_one(f"#{PANES[pane]}", DataTable)
        every = [c.key for c in p.view.columns]
        assert table.row_count and len(table.columns) < len(every), "80 columns hold every column?"
        assert_whole(app, table)
        # step through every sort key: each time the column sorted by is on screen, whole, and
        # the table shows the top of the new order, though the cursor was at the bottom
        for _ in p.sort_keys:
            await pilot.press("end")
            await pilot.press("greater_than_sign")
            await drive(app, pilot)
            key = p.opts.sort
            if key in every:
                assert key in [str(c.key.value) for c in table.ordered_columns], key
            assert_whole(app, table)
            assert table.cursor_row == 0 and table.scroll_offset.y == 0, key
            doc = p.view.document(app.state, p.opts)
            first = p.view.table_rows(doc)[0]
            assert str(table.get_row_at(0)[0]).strip() == p.view.columns[0].cell(first).strip()


async def test_growth_keeps_its_unit_and_a_cut_name_says_so() -> None:
    app = make_app(pane="processes")
    async with app.run_test(size=SIZE) as pilot:
        await prepared(pilot)
        table = app.query_one("#processes-table", DataTable)
        keys = [str(c.key.value) for c in table.ordered_columns]
        assert "rss_growth_bytes_per_s" in keys, keys
        grow = keys.index("rss_growth_bytes_per_s")
        comm = keys.index("comm")
        p = pane_of(app)
        doc = p.view.document(app.state, p.opts)
        comms = {r["pid"]: r["comm"] for r in doc["rows"]}
        seen_growth, cut = False, 0
        for i in range(table.row_count):
            cells = [str(x) for x in table.get_row_at(i)]
            g = cells[grow].strip()
            assert g in ("", "-", "0") or g[-1] in "BKMGT", g  # +384K, never +384
            seen_growth = seen_growth or g[-1:] in ("K", "M")
            full, shown = comms[int(cells[0])], cells[comm]
            assert shown == full or (shown.endswith("…") and full.startswith(shown[:-1])), (shown, full)
            cut += shown != full
        # the recording has a 15-character name: at 80 columns it is cut to keep GROW/s
        assert seen_growth and cut
        assert_whole(app, table)


@pytest.mark.parametrize("pane", list(PANES))
async def test_the_header_keeps_swap_and_pressure(pane: str) -> None:
    app = make_app(pane=pane)
    async with app.run_test(size=SIZE) as pilot:
        await prepared(pilot)
        host = app.state.get(HostState)
        m, psi = host.meminfo, host.pressure
        assert m is not None and psi is not None
        used = m.swap_total_bytes - m.swap_free_bytes
        want_swap = f"sw {bytes_short(used)}/{bytes_short(m.swap_total_bytes)}"
        want_psi = f"psi {psi.some_avg10:.0f}/{psi.full_avg10:.0f}"
        top = "\n".join(screen_lines(app)[:2])
        assert want_swap in top and want_psi in top, top
