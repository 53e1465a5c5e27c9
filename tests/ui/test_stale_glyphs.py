"""No cell on the screen shows a glyph its widget does not hold: every visible table row, as the
terminal shows it, is made of that row's cells and blanks, whatever was switched before (sorts,
filters, panes, the help, the drill-in's sections). Two-cell block remnants (`▅▅`, `▇▇`) at the
right of rows without sparklines were what users saw: scrollbars' partial cells, which read as
stale sparklines in any terminal that shows the glyph, not a bar."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from rich.cells import cell_len
from support.ui import settle
from test_snapshots import HOG_PID, make_app, prepared
from textual.pilot import Pilot
from textual.screen import ModalScreen
from textual.widgets import DataTable

from memtop.ui.app import MemtopApp

#: glyphs no memtop text puts at the end of a row or alone: the eighths of a cell
PARTIAL = set("▁▂▃▄▅▆▇▉▊▋▌▍▎▏")


def screen_cells(app: MemtopApp) -> list[str]:
    """The terminal's lines, each character at its cell (the SVG export places every run of text
    at x = column × the cell width; blank runs may be left out)."""
    svg = app.export_screenshot()
    width, height = app.size
    rows = [[" "] * width for _ in range(height)]
    cell_w = cell_h = 0.0
    for x, y, length, text in re.findall(
        r'<text class="[^"]*-r\d+" x="([\d.]+)" y="([\d.]+)" textLength="([\d.]+)"[^>]*>([^<]*)</text>', svg
    ):
        text = html.unescape(text).replace("\xa0", " ")
        if not cell_w and cell_len(text):
            cell_w = float(length) / cell_len(text)
        cell_h = cell_h or 24.4  # Rich's SVG line height for its 20 px font
        col, row = round(float(x) / cell_w), round((float(y) - 20) / cell_h)
        for ch in text:
            if 0 <= row < height and 0 <= col < width:
                rows[row][col] = ch
            col += cell_len(ch)
    return ["".join(r) for r in rows]


def foreign_cells(app: MemtopApp) -> list[str]:
    """Where the screen shows, in a visible table's rows, text that is not in the row's cells;
    and any partial-cell glyph on a line outside the tables."""
    lines = screen_cells(app)
    problems: list[str] = []
    in_tables: set[int] = set()
    # a modal screen (the help) covers part of the screen below it: what shows around it is
    # the screen below's
    base = app.screen_stack[-2] if isinstance(app.screen, ModalScreen) else app.screen
    covered = [w.region for w in app.screen.query("*") if w.region.area] if base is not app.screen else []
    # an input's tall border is drawn with eighths, a chart with half blocks
    edges = [w.region for w in base.query("*") if type(w).__name__ in ("Input", "PlotextPlot", "Chart")]
    for table in base.query(DataTable):
        if not table.display or not table.region.height:
            continue
        region = table.region
        header = table.header_height if table.show_header else 0
        for y in range(region.y + header, region.bottom):
            in_tables.add(y)
            if any(r.y <= y < r.bottom for r in covered):
                continue
            line = lines[y] if y < len(lines) else ""
            seen = line[region.x : region.right]
            index = y - region.y - header + int(table.scroll_offset.y)
            cells = [str(c) for c in table.get_row_at(index)] if index < table.row_count else []
            for token in seen.split():
                if not any(token.strip("…") in c for c in cells):
                    problems.append(f"{table.id} row {index}: {token!r} not in {cells}")
    for y, line in enumerate(lines):
        if y in in_tables or y == len(lines) - 1 or any(r.y <= y < r.bottom for r in edges + covered):
            continue  # the key line is the app's
        for word in line.split():
            if set(word) <= PARTIAL:
                problems.append(f"line {y}: a lone {word!r}: {line!r}")
    return problems


async def _check(pilot: Pilot[Any], app: MemtopApp, what: str, seen: list[str]) -> None:
    await settle(pilot)
    app.redraw()
    await settle(pilot)
    seen += [f"after {what}: {p}" for p in foreign_cells(app)]


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
async def test_no_cell_shows_what_its_row_does_not_hold(size: tuple[int, int]) -> None:
    app = make_app(pane="processes")
    seen: list[str] = []
    async with app.run_test(size=size) as pilot:
        await prepared(pilot)
        await _check(pilot, app, "start", seen)
        for keys, what in (
            ((">", ">", ">"), "sorting by another column"),
            (("r",), "reversing"),
            (("slash", "b", "a", "enter"), "a filter"),
            (("escape",), "clearing the filter"),
            (("question_mark",), "the help"),
            (("escape",), "closing the help"),
        ):
            for k in keys:
                await pilot.press(k)
            await _check(pilot, app, what, seen)
        for pane in "234567":
            await pilot.press(pane)
            await _check(pilot, app, f"pane {pane}", seen)
        await pilot.press("1")
        await _check(pilot, app, "back to pane 1", seen)
    assert not seen, "\n".join(seen[:20])


async def test_no_cell_in_the_drill_in_shows_what_its_row_does_not_hold() -> None:
    app = make_app(pid=HOG_PID)
    seen: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await prepared(pilot, "ProcessScreen")
        for section in "23451":
            await pilot.press(section)
            await _check(pilot, app, f"section {section}", seen)
    assert not seen, "\n".join(seen[:20])
