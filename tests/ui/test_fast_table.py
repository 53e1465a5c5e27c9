"""FastTable draws table lines itself (plain text, cached per row, per-frame lookups); what it draws
must equal what Textual's DataTable draws for the same rows, cursor, scroll and edits."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from rich.style import Style
from rich.text import Text
from support.ui import count_layouts, settle
from textual.app import App, ComposeResult
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from memtop.ui.panes.base import _reorder
from memtop.ui.table import FastTable

#: (row % 4, column) -> the cell's own style
STYLED = {(1, 3): "bold red", (2, 5): "yellow", (3, 0): "bold red", (3, 1): "yellow"}


class TableApp(App[None]):
    """One table of class ``table_cls``; the rows it highlighted, in order."""

    def __init__(self, table_cls: type[DataTable[Any]], fixed: int = 0) -> None:
        super().__init__()
        self.table_cls = table_cls
        self.fixed = fixed
        self.highlighted: list[int] = []

    def compose(self) -> ComposeResult:
        yield self.table_cls(id="t", cursor_type="row", zebra_stripes=True, fixed_columns=self.fixed)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.highlighted.append(event.cursor_row)


def _app(cls: type[DataTable[Any]], fixed: int = 0) -> TableApp:
    return TableApp(cls, fixed)


async def _screens(cls: type[DataTable[Any]], bulk: bool = False, fixed: int = 0) -> list[str]:
    """Screens of a table as memtop uses one; ``bulk``: rows added with FastTable.add_keyed_rows;
    ``fixed``: that many columns stay put when it scrolls right."""
    app = _app(cls, fixed)
    shots: list[str] = []
    highlighted = app.highlighted

    def add(t: Any, rows: list[tuple[str, list[Text]]]) -> None:
        if bulk:
            t.add_keyed_rows(rows)
        else:
            for key, cells in rows:
                t.add_row(*cells, key=key)

    async with app.run_test(size=(90, 24)) as pilot:
        t = app.query_one("#t", DataTable)
        for c in range(16):
            t.add_column(Text(f"COL{c}", justify="right" if c else "left"), key=f"c{c}")
        add(
            t,
            [
                (
                    str(r),
                    [
                        Text(
                            f"proc-{r:02d}" if c == 0 else f"{r * 37 + c * 1001:>7}",
                            justify="left" if c == 0 else "right",
                            # figures past a threshold are coloured (memtop/ui/levels.py)
                            style=STYLED.get((r % 4, c), ""),
                        )
                        for c in range(16)
                    ],
                )
                for r in range(60)
            ],
        )
        await settle(pilot)
        shots.append(app.export_screenshot())
        t.move_cursor(row=5, animate=False)  # cursor row
        t.update_cell("2", "c3", Text("9999999", justify="right"))  # an edit in place
        await settle(pilot)
        shots.append(app.export_screenshot())
        t.remove_row("0")  # rows shift: zebra parity changes below
        add(
            t,
            [
                (
                    "new",
                    [
                        Text("new-row" if c == 0 else "1", justify="left" if c == 0 else "right")
                        for c in range(16)
                    ],
                )
            ],
        )
        t.scroll_to(x=12, y=45, animate=False)  # scrolled right and down
        await settle(pilot)
        shots.append(app.export_screenshot())
        await pilot.hover("#t", offset=(30, 0))  # the mouse on a header cell, then on a row
        await settle(pilot)
        shots.append(app.export_screenshot())
        await pilot.hover("#t", offset=(30, 4))
        await settle(pilot)
        shots.append(app.export_screenshot())
        order = [str(r.key.value) for r in t.ordered_rows]
        _reorder(t, order[::-2] + order[-2::-2])  # fill_table's re-order (FastTable: order_rows)
        t.scroll_to(x=0, y=0, animate=False)
        await settle(pilot)
        shots.append(app.export_screenshot())
        shots.append(
            repr(
                (
                    [str(r.key.value) for r in t.ordered_rows],
                    t.cursor_coordinate,
                    highlighted[:1],
                    {str(k.value): [c.plain for c in v.values()] for k, v in t._data.items()},
                )
            )
        )
    return shots


def test_fast_table_draws_what_data_table_draws() -> None:
    fast = asyncio.run(_screens(FastTable))
    plain = asyncio.run(_screens(DataTable))
    assert "9999999" in fast[1] and fast[2] != fast[1]  # the edit shows; the scroll moved the view

    def norm(svg: str) -> str:  # the SVG's element ids are a hash that differs between runs
        return re.sub(r"terminal-\d+", "terminal-N", svg)

    for i, (a, b) in enumerate(zip(fast, plain, strict=True)):
        assert norm(a) == norm(b), f"screen {i} differs from DataTable's"


def test_fast_table_draws_coloured_cells_itself(monkeypatch: Any) -> None:
    """A cell with a style of its own (a level's colour) is drawn on the fast path, not handed to
    DataTable's renderer (the screens above say it draws the same)."""
    body_key = FastTable._body_key
    fell_back: list[int] = []

    def counting(self: FastTable, row_index: int) -> Any:
        key = body_key(self, row_index)
        if key is None:
            fell_back.append(row_index)
        return key

    monkeypatch.setattr(FastTable, "_body_key", counting)
    shots = asyncio.run(_screens(FastTable, fixed=2))
    assert "red" in shots[0] or "#" in shots[0]
    assert fell_back == []


def test_fast_table_with_fixed_columns_draws_what_data_table_draws() -> None:
    """PID and COMMAND stay put while the rest scrolls right: drawn as DataTable draws them."""
    fast = asyncio.run(_screens(FastTable, fixed=2))
    plain = asyncio.run(_screens(DataTable, fixed=2))
    assert "proc-" in fast[2] and fast[2] != fast[1]  # scrolled right, the first column still shows
    for i, (a, b) in enumerate(zip(fast, plain, strict=True)):
        assert re.sub(r"terminal-\d+", "terminal-N", a) == re.sub(r"terminal-\d+", "terminal-N", b), i


def test_fast_table_rows_added_at_once_end_where_one_by_one_ends() -> None:
    bulk = asyncio.run(_screens(FastTable, bulk=True))
    plain = asyncio.run(_screens(DataTable))
    assert "'new'" in bulk[-1] and "[0]" in bulk[-1]  # the appended row; the first row was highlighted
    for i, (a, b) in enumerate(zip(bulk, plain, strict=True)):
        assert re.sub(r"terminal-\d+", "terminal-N", a) == re.sub(r"terminal-\d+", "terminal-N", b), i


def test_fast_table_header_is_not_redrawn_for_cell_changes(monkeypatch: Any) -> None:
    """DataTable re-renders its header after any cell changes; FastTable keeps the line while the
    labels, widths, scroll and styles are the same (the drawing itself is compared above)."""
    header_renders: list[int] = []
    plain_render_line = DataTable.render_line

    def counting(self: DataTable[Any], y: int) -> Any:
        if y == 0:
            header_renders.append(y)
        return plain_render_line(self, y)

    monkeypatch.setattr(DataTable, "render_line", counting)

    async def run() -> None:
        app = _app(FastTable)
        async with app.run_test(size=(90, 24)) as pilot:
            t = app.query_one("#t", DataTable)
            for c in range(4):
                t.add_column(Text(f"COL{c}"), key=f"c{c}")
            for r in range(10):
                t.add_row(*[Text(f"{r}-{c}") for c in range(4)], key=str(r))
            await settle(pilot)
            drawn = len(header_renders)
            assert drawn >= 1
            for i in range(5):  # cell changes, rows gone and added: the whole table repaints
                t.update_cell("9", "c1", Text(f"v{i}"))
                t.remove_row(str(i))
                t.add_row(*[Text(f"n{i}-{c}") for c in range(4)], key=f"n{i}")
                t.refresh()
                await settle(pilot)
            assert len(header_renders) == drawn
            t.add_column(Text("COL4"), key="c4")  # a new column: the header is drawn again
            await settle(pilot)
            assert len(header_renders) > drawn

    asyncio.run(run())


def count_lines_drawn(monkeypatch: Any) -> list[int]:
    """The y of every line FastTable renders from now on, in order."""
    drawn: list[int] = []
    render_line = FastTable.render_line

    def counting(self: FastTable, y: int) -> Any:
        drawn.append(y)
        return render_line(self, y)

    monkeypatch.setattr(FastTable, "render_line", counting)
    return drawn


def test_rows_that_come_and_go_off_screen_repaint_no_line_on_screen(monkeypatch: Any) -> None:
    """A process started and gone at the bottom of a long table changes nothing on screen:
    DataTable repaints every line for it, FastTable none (and the lines that did change, only
    those). What it then draws is compared with DataTable's above."""
    drawn = count_lines_drawn(monkeypatch)

    async def run() -> tuple[list[int], list[int]]:
        app = _app(FastTable)
        async with app.run_test(size=(60, 24)) as pilot:
            t = app.query_one("#t", FastTable)
            for c in range(4):
                t.add_column(Text(f"COL{c}"), key=f"c{c}")
            t.add_keyed_rows([(str(r), [Text(f"{r}-{c}") for c in range(4)]) for r in range(100)])
            await settle(pilot)
            assert len(drawn) >= 20  # the first frame drew every line
            drawn.clear()
            for i in range(3):  # off screen: rows gone and added at the bottom, the order kept
                t.remove_rows([RowKey(str(99 - i))])
                t.add_keyed_rows([(f"n{i}", [Text(f"n{i}-{c}") for c in range(4)])])
                await settle(pilot)
            off_screen = list(drawn)
            drawn.clear()
            keys = [str(r.key.value) for r in t.ordered_rows]
            t.order_rows([keys[1], keys[0], *keys[2:]])  # the first two rows swap places
            await settle(pilot)
            return off_screen, list(drawn)

    off_screen, swapped = asyncio.run(run())
    # at most the cursor's row (line 1), which the table re-validates and repaints when rows go
    assert set(off_screen) <= {1}
    assert sorted(set(swapped)) == [1, 2]  # below the header: the two rows that swapped


async def _log_screens(cls: type[DataTable[Any]]) -> tuple[list[str], int]:
    """A newest-first log of 60 rows through fill_table, 40 new rows a tick (the Reclaim pane's
    episodes in a swap storm), the cursor on a row that stays: screens, and how often the table
    was cleared after the first fill."""
    from memtop.ui.panes.base import fill_table
    from memtop.views import Column

    columns = (Column("key", "KEY", numeric=False), Column("n", "N"), Column("t", "TEXT", numeric=False))
    app = _app(cls)
    shots: list[str] = []
    cleared = 0
    async with app.run_test(size=(60, 24)) as pilot:
        t = app.query_one("#t", DataTable)
        clear = t.clear

        def counting_clear(columns: bool = False) -> Any:
            nonlocal cleared
            cleared += 1
            return clear(columns)

        t.clear = counting_clear  # type: ignore[method-assign]
        for tick in range(4):
            newest = 100 + 40 * tick
            rows = [{"key": f"e{i}", "n": i * 7, "t": "x" * (i % 9)} for i in range(newest, newest - 60, -1)]
            fill_table(t, columns, rows, "key", edits=120)
            if tick == 0:  # the first fill builds the table
                cleared = 0
                t.move_cursor(row=10, animate=False)  # e90: still listed next tick
            await settle(pilot)
            shots.append(app.export_screenshot())
            shots.append(repr(([str(r.key.value) for r in t.ordered_rows], t.cursor_coordinate)))
    return shots, cleared


def test_a_log_turned_over_is_edited_and_draws_what_data_table_draws() -> None:
    fast, fast_cleared = asyncio.run(_log_screens(FastTable))
    plain, _ = asyncio.run(_log_screens(DataTable))
    assert fast_cleared == 0, "the log was rebuilt, not edited"
    assert "'e220'" in fast[-1] and "'e100'" not in fast[-1]  # the newest rows, the oldest gone
    assert "row=50," in fast[3]  # the cursor stayed on e90, 40 rows further down
    for i, (a, b) in enumerate(zip(fast, plain, strict=True)):
        assert re.sub(r"terminal-\d+", "terminal-N", a) == re.sub(r"terminal-\d+", "terminal-N", b), i


class FixedTableApp(App[None]):
    """A table of fixed height (as the Processes pane's: ``1fr``) below a line of text."""

    CSS = "#t { height: 1fr; }"

    def __init__(self, table_cls: type[DataTable[Any]]) -> None:
        super().__init__()
        self.table_cls = table_cls

    def compose(self) -> ComposeResult:
        from textual.widgets import Static

        yield Static("above")
        yield self.table_cls(id="t", cursor_type="row", zebra_stripes=True)


async def _fixed_screens(cls: type[DataTable[Any]], monkeypatch: Any) -> tuple[list[str], list[int]]:
    """Screens of a fixed-height table whose rows come and go (the scrollbar appears, its range
    changes, it goes; scrolled to the end when rows go), and how many times the screen was laid
    out in each step after the first frame."""
    layouts = count_layouts(monkeypatch)
    app = FixedTableApp(cls)
    shots: list[str] = []
    per_step: list[int] = []

    def add(t: DataTable[Any], keys: range) -> None:
        for r in keys:
            t.add_row(Text(f"p{r}"), Text(f"{r * 7:>5}", justify="right"), key=str(r))

    async with app.run_test(size=(40, 14)) as pilot:
        t = app.query_one("#t", DataTable)
        t.add_column(Text("NAME"), key="n")
        t.add_column(Text("N", justify="right"), key="v")
        add(t, range(5))
        await settle(pilot)
        shots.append(app.export_screenshot())
        steps: list[tuple[range, range, int | None]] = [
            (range(5, 30), range(0), None),  # 0: past the table's height: a scrollbar
            (range(30, 40), range(0, 3), None),  # 1: its range grows
            (range(0), range(0), 99),  # 2: scrolled to the end
            (range(0), range(3, 8), None),  # 3: rows go while scrolled to the end
            (range(0), range(8, 30), None),  # 4: back below the height: the scrollbar goes
            (range(40, 42), range(0), None),  # 5: two more, still no scrollbar
        ]
        for added, gone, scroll_y in steps:
            layouts.n = 0
            for r in gone:
                t.remove_row(str(r))
            add(t, added)
            if scroll_y is not None:
                t.scroll_to(y=scroll_y, animate=False)
            await settle(pilot)
            per_step.append(layouts.n)
            shots.append(app.export_screenshot())
            shots.append(repr((t.scroll_y, t.max_scroll_y, t.show_vertical_scrollbar, t.virtual_size)))
    return shots, per_step


def test_rows_of_a_fixed_height_table_come_and_go_without_laying_out_the_screen(monkeypatch: Any) -> None:
    """Rows that come and go change a fixed-height table's virtual size, for which DataTable
    lays out the whole screen (every widget re-rendered: once a tick whenever a process starts
    or exits); FastTable updates its scrollbars instead, and lays out only when a scrollbar
    appears or goes (or the view scrolls). What it draws is what DataTable draws."""
    fast, fast_layouts = asyncio.run(_fixed_screens(FastTable, monkeypatch))
    plain, plain_layouts = asyncio.run(_fixed_screens(DataTable, monkeypatch))
    assert "True" in fast[2] and "True" in fast[8] and "False" in fast[10]  # the scrollbar came, went
    quiet = [1, 3, 5]  # the steps where rows came or went and the scrollbar stayed as it was
    assert all(plain_layouts[i] for i in quiet), plain_layouts
    assert [fast_layouts[i] for i in quiet] == [0, 0, 0], fast_layouts
    for i, (a, b) in enumerate(zip(fast, plain, strict=True)):
        assert re.sub(r"terminal-\d+", "terminal-N", a) == re.sub(r"terminal-\d+", "terminal-N", b), i


def test_an_empty_table_filled_with_no_rows_again_repaints_nothing(monkeypatch: Any) -> None:
    """A table that stays empty (no process exited, no reclaim episode) is not cleared and
    repainted every tick: with the Processes pane's "Recently exited" that was most of the lines
    an idle tick drew. Rows that come are drawn, and the table emptied again is repainted."""
    from memtop.ui.panes.base import fill_table
    from memtop.views import Column

    columns = (Column("key", "KEY", numeric=False), Column("n", "N"))
    drawn = count_lines_drawn(monkeypatch)

    async def run() -> tuple[list[int], list[int], list[int]]:
        app = _app(FastTable)
        async with app.run_test(size=(60, 12)) as pilot:
            t = app.query_one("#t", FastTable)
            fill_table(t, columns, [], "key")
            await settle(pilot)
            assert drawn, "the first frame drew the table"
            drawn.clear()
            for _ in range(3):
                fill_table(t, columns, [], "key")
                await settle(pilot)
            idle = list(drawn)
            drawn.clear()
            fill_table(t, columns, [{"key": "a", "n": 1}], "key")
            await settle(pilot)
            came = list(drawn)
            drawn.clear()
            fill_table(t, columns, [], "key")
            await settle(pilot)
            assert t.row_count == 0
            return idle, came, list(drawn)

    idle, came, went = asyncio.run(run())
    assert idle == []
    assert 1 in came  # the row below the header
    assert went  # emptied again: drawn again (here one line high: the header)


def test_a_row_replaced_in_place_is_the_only_one_keyed_measured_and_formatted(monkeypatch: Any) -> None:
    """One process's figures moved among many idle ones: fill_table neither keys the rows
    again nor measures, formats or compares the others (with 1,000 rows those passes were most
    of a fill); rows that come, go and move cost the rows that came; the table shows what a
    table filled afresh with the same rows shows, also once a wider name widens its column. A
    row of another key in that place is keyed again."""
    from memtop.ui.panes import base
    from memtop.views import Column

    formatted: list[str] = []

    def name(v: object) -> str:
        formatted.append(str(v))
        return str(v)

    columns = (Column("key", "KEY", name, numeric=False), Column("n", "N"))
    keyed: list[int] = []
    unique_keys = base._unique_keys

    def counted_keys(rows: Any, key: str) -> list[str]:
        keyed.append(len(rows))
        return unique_keys(rows, key)

    monkeypatch.setattr(base, "_unique_keys", counted_keys)
    looked_at: list[str] = []
    cells_for = base._Filler.cells_for

    def counted_cells(self: Any, row: Any, k: str) -> list[str]:
        looked_at.append(k)
        return cells_for(self, row, k)

    monkeypatch.setattr(base._Filler, "cells_for", counted_cells)

    def cells(t: FastTable) -> list[list[str]]:
        return [[c.plain for c in t.get_row_at(i)] for i in range(t.row_count)]

    async def run() -> None:
        app = _app(FastTable)
        async with app.run_test(size=(60, 12)) as pilot:
            t = app.query_one("#t", FastTable)
            rows = [{"key": f"p{i}", "n": i} for i in range(200)]
            base.fill_table(t, columns, rows, "key")
            await settle(pilot)
            keyed.clear()
            formatted.clear()
            looked_at.clear()
            rows = [*rows[:7], {"key": "p7", "n": 70}, *rows[8:]]
            base.fill_table(t, columns, rows, "key")
            await settle(pilot)
            assert keyed == [] and formatted == ["p7", "p7"]  # measured, and its cell written
            assert looked_at == ["p7"]
            assert cells(t)[7] == ["p7", "70"]
            rows = [*rows[:9], {"key": "p9", "n": 9}, *rows[10:]]
            rows[9]["key"] = "a-wider-name-p9"  # another key in its place: keyed again
            base.fill_table(t, columns, rows, "key")
            await settle(pilot)
            assert keyed == [200]
            formatted.clear()
            looked_at.clear()
            # one gone, one come, the order moved: only the row that came is measured and drawn
            rows = [{"key": "p200", "n": 200}, *rows[:3], *rows[4:]][::-1]
            base.fill_table(t, columns, rows, "key")
            await settle(pilot)
            assert formatted == ["p200", "p200"] and looked_at == ["p200"]
            assert [str(t.get_row_at(i)[0]) for i in range(t.row_count)] == [str(r["key"]) for r in rows]
            fresh = _app(FastTable)
            shown, widths = cells(t), [c.content_width for c in t.ordered_columns]
        async with fresh.run_test(size=(60, 12)) as pilot:
            t2 = fresh.query_one("#t", FastTable)
            base.fill_table(t2, columns, rows, "key")
            await settle(pilot)
            assert shown == cells(t2)
            assert widths == [c.content_width for c in t2.ordered_columns] == [15, 3]

    asyncio.run(run())


class StyledTableApp(TableApp):
    """A table whose colours follow a class of the screen and the focus, as the panes' do
    (``.stale DataTable`` greys a pane whose probe stopped reading)."""

    CSS = """
    Screen.grey DataTable { color: $text-muted; background: $panel; }
    Screen.grey DataTable > .datatable--odd-row { background: $boost; }
    """


async def _restyled_screens(cls: type[DataTable[Any]]) -> list[str]:
    """Screens of a table, a row edited between them, after each change of the CSS that applies
    to it: a class of the screen, the focus, the theme."""
    app = StyledTableApp(cls, fixed=1)
    shots: list[str] = []
    async with app.run_test(size=(90, 16)) as pilot:
        t = app.query_one("#t", DataTable)
        for c in range(6):
            t.add_column(Text(f"COL{c}"), key=f"c{c}")
        for r in range(20):
            t.add_row(*[Text(f"{r}-{c}") for c in range(6)], key=str(r))
        steps: list[Callable[[], object]] = [
            lambda: app.screen.set_class(True, "grey"),
            lambda: t.blur(),
            lambda: t.focus(),
            lambda: setattr(app, "theme", "textual-light"),
            lambda: app.screen.set_class(False, "grey"),
        ]
        await settle(pilot)
        for i, step in enumerate(steps):
            step()
            await settle(pilot)
            t.update_cell("3", "c2", Text(f"x{i}"))  # a line drawn anew after the change
            await settle(pilot)
            shots.append(app.export_screenshot())
    return shots


def test_styles_kept_between_frames_follow_the_css() -> None:
    """FastTable keeps a row's styles from frame to frame until Textual says the table's CSS may
    have changed: after each change it draws what DataTable draws."""
    fast = asyncio.run(_restyled_screens(FastTable))
    plain = asyncio.run(_restyled_screens(DataTable))
    colours = [set(re.findall(r"fill: (#[0-9a-f]+)", svg)) for svg in fast]
    assert colours[0] != colours[3]  # the class and the theme changed what is drawn
    for i, (a, b) in enumerate(zip(fast, plain, strict=True)):
        assert re.sub(r"terminal-\d+", "terminal-N", a) == re.sub(r"terminal-\d+", "terminal-N", b), i


def test_a_changed_row_is_drawn_without_walking_the_dom(monkeypatch: Any) -> None:
    """A row's styles are those of its zebra stripe, cursor and mouse, the same every frame until
    the CSS changes: a changed row's line does not compute them again (DOMNode.rich_style walks
    every ancestor's styles; it was most of such a line's cost), nor its cells' (a meta style
    per cell, saying which row and column a click is on, and the sums with the row's)."""
    from textual.dom import DOMNode

    walks: list[str] = []
    rich_style = vars(DOMNode)["rich_style"].fget

    def counting(self: DOMNode) -> Any:
        walks.append(type(self).__name__)
        return rich_style(self)

    async def run() -> None:
        app = _app(FastTable)
        async with app.run_test(size=(60, 12)) as pilot:
            t = app.query_one("#t", FastTable)
            for c in range(4):
                t.add_column(Text(f"COL{c}"), key=f"c{c}")
            t.add_keyed_rows([(str(r), [Text(f"{r}-{c}") for c in range(4)]) for r in range(20)])
            await settle(pilot)
            t.update_cell("2", "c1", Text("first"))
            t.update_cell("3", "c1", Text("first"))
            await settle(pilot)
            monkeypatch.setattr(DOMNode, "rich_style", property(counting))
            from_meta = Style.from_meta

            def meta_counting(meta: Any) -> Style:
                walks.append("meta")
                return from_meta(meta)

            monkeypatch.setattr(Style, "from_meta", meta_counting)
            drawn = count_lines_drawn(monkeypatch)
            for i in range(3):
                t.update_cell("2", "c1", Text(f"v{i}"))
                t.update_cell("3", "c1", Text(f"v{i}"))
                await settle(pilot)
            assert drawn  # the rows were drawn again
            # nor the styles of its cells: the same row, column and colours as the frame before
            assert [w for w in walks if w in ("FastTable", "meta")] == []

    asyncio.run(run())


def test_a_row_whose_cells_changed_is_repainted_once(monkeypatch: Any) -> None:
    """fill_table writes every changed cell of a row at once: one repaint of the row (DataTable's
    update_cell repaints it for each cell), and the row shows what DataTable shows."""
    from memtop.ui.panes import base
    from memtop.views import Column

    columns = (Column("key", "KEY", numeric=False), Column("a", "A"), Column("b", "B"), Column("c", "C"))
    repaints: list[int | None] = []
    refresh = FastTable.refresh

    def counting(self: FastTable, *regions: Any, **kwargs: Any) -> Any:
        repaints.append(self._partial_row)
        return refresh(self, *regions, **kwargs)

    async def run(cls: type[DataTable[Any]]) -> tuple[str, list[int | None]]:
        app = _app(cls)
        async with app.run_test(size=(60, 12)) as pilot:
            t = app.query_one("#t", DataTable)
            rows = [{"key": f"p{i}", "a": i, "b": i, "c": i} for i in range(20)]
            base.fill_table(t, columns, rows, "key")
            await settle(pilot)
            repaints.clear()
            rows = [*rows[:3], {"key": "p3", "a": 30, "b": 31, "c": 123456}, *rows[4:]]
            base.fill_table(t, columns, rows, "key")
            got = list(repaints)
            await settle(pilot)
            return re.sub(r"terminal-\d+", "terminal-N", app.export_screenshot()), got

    monkeypatch.setattr(FastTable, "refresh", counting)
    fast, fast_repaints = asyncio.run(run(FastTable))
    plain, _ = asyncio.run(run(DataTable))
    assert fast_repaints == [3]  # the row at index 3, once
    assert "123456" in fast
    assert fast == plain


class TallTableApp(TableApp):
    """A table of a height of its own, as the panes' are (its rows change what it scrolls over,
    not its box)."""

    CSS = "DataTable { height: 1fr; }"


async def _growing_screens(cls: type[DataTable[Any]], repaints: list[int]) -> list[str]:
    """Screens of a long table whose rows come and go below the screen one at a time (the range
    moves, the thumb mostly not), then by hundreds (the thumb moves), scrolled down once."""
    app = TallTableApp(cls)
    shots: list[str] = []
    async with app.run_test(size=(60, 14)) as pilot:
        t = app.query_one("#t", DataTable)
        for c in range(3):
            t.add_column(Text(f"COL{c}"), key=f"c{c}")
        for r in range(500):
            t.add_row(*[Text(f"{r}-{c}") for c in range(3)], key=str(r))
        await settle(pilot)
        shots.append(app.export_screenshot())
        repaints.clear()

        def add(keys: list[str]) -> None:
            for k in keys:
                t.add_row(*[Text(k) for _ in range(3)], key=k)

        def remove(keys: list[str]) -> None:
            for k in keys:
                t.remove_row(k)

        hundreds = [f"m{i}" for i in range(300)]
        steps: list[Callable[[], object]] = [
            *[lambda k=f"n{i}": add([k]) for i in range(6)],
            *[lambda k=f"n{i}": remove([k]) for i in range(3)],
            lambda: add(hundreds),
            lambda: t.scroll_to(y=200, animate=False),
            lambda: remove(hundreds),
        ]
        for step in steps:
            step()
            await settle(pilot)
            shots.append(app.export_screenshot())
    return shots


def test_a_scrollbar_whose_thumb_did_not_move_is_not_repainted(monkeypatch: Any) -> None:
    """Rows that come and go change the table's range every tick, mostly without moving the
    scrollbar's thumb by a cell: FastTable's scrollbar is repainted for a new range only when
    what it draws changed, and draws what DataTable's draws after every step."""
    from textual.widget import Widget

    from memtop.ui.textual_compat import LeanScrollBar

    asked: list[int] = []  # repaints asked for a new range
    made: list[int] = []  # of which made
    refresh, lean_refresh = Widget.refresh, LeanScrollBar.refresh

    def counting(self: Widget, *regions: Any, **kwargs: Any) -> Any:
        if isinstance(self, LeanScrollBar) and self.lean:
            made.append(len(regions))
        return refresh(self, *regions, **kwargs)

    def asking(self: LeanScrollBar, *regions: Any, **kwargs: Any) -> Any:
        if self.lean:
            asked.append(len(regions))
        return lean_refresh(self, *regions, **kwargs)

    monkeypatch.setattr(Widget, "refresh", counting)
    monkeypatch.setattr(LeanScrollBar, "refresh", asking)
    fast = asyncio.run(_growing_screens(FastTable, []))
    plain = asyncio.run(_growing_screens(DataTable, []))
    for i, (a, b) in enumerate(zip(fast, plain, strict=True)):
        assert re.sub(r"terminal-\d+", "terminal-N", a) == re.sub(r"terminal-\d+", "terminal-N", b), i
    assert len(asked) >= 9  # each step that moved the range
    assert 0 < len(made) <= 4, (asked, made)  # the thumb's moves


def test_a_fast_table_s_compact_rows_read_and_edit_as_data_table_s() -> None:
    """FastTable keeps a row's cells in a list with positions shared by the rows (RowCells), not
    a dict a row: every DataTable call that reads or edits them (a cell, a row, a column added
    or removed, a sort, a row removed) gives what a DataTable's dicts give."""
    from memtop.ui.textual_compat import RowCells

    async def run(cls: type[DataTable[Any]]) -> list[Any]:
        app = _app(cls)
        out: list[Any] = []
        async with app.run_test(size=(90, 24)) as pilot:
            t = app.query_one("#t", DataTable)
            t.add_column("a", key="a")
            t.add_column("b", key="b")
            for i in range(5):
                t.add_row(Text(str(5 - i)), Text(f"b{i}"), key=f"r{i}")
            if isinstance(t, FastTable):
                t.add_keyed_rows([("r5", [Text("9"), Text("b5")])])
            else:
                t.add_row(Text("9"), Text("b5"), key="r5")
            await settle(pilot)
            t.update_cell("r1", "b", Text("changed"))
            t.add_column("c", key="c", default=Text("-"))
            out.append([[c.plain for c in t.get_row(f"r{i}")] for i in range(6)])
            t.sort("a", key=lambda v: int(v.plain))
            out.append([str(r.key.value) for r in t.ordered_rows])
            t.remove_column("b")
            t.remove_row("r3")
            out.append([[c.plain for c in t.get_row(str(r.key.value))] for r in t.ordered_rows])
            out.append([c.plain for c in t.get_column("c")])
            out.append(t.get_cell("r0", "a").plain)
            await settle(pilot)
            if isinstance(t, FastTable):
                rows = [t.row_cells(r.key) for r in t.ordered_rows]
                assert all(isinstance(r, RowCells) for r in rows)
                row = t.row_cells(RowKey("r0"))
                a, c = ColumnKey("a"), ColumnKey("c")
                assert dict(row) == {a: row[a], c: row[c]} and ColumnKey("b") not in row and len(row) == 2
        return out

    assert asyncio.run(run(FastTable)) == asyncio.run(run(DataTable))


def test_the_same_rows_again_are_not_fitted_keyed_or_compared(monkeypatch: Any) -> None:
    """An idle tick hands fill_table the very rows of the last (the "Recently exited" table
    every tick, the processes when none moved): nothing is fitted, keyed or compared again, but
    the sort mark still follows the sort, a new width fits the columns again, computed cells
    that may have moved are computed, and a table changed behind fill_table's back is filled."""
    from memtop.ui.panes import base
    from memtop.views import Column

    fills: list[int] = []
    filler_init = base._Filler.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        fills.append(1)
        filler_init(self, *args, **kwargs)

    monkeypatch.setattr(base._Filler, "__init__", counted)
    columns = (Column("key", "KEY", numeric=False), Column("n", "N"))
    computed: list[str] = []

    def twice(row: Any) -> str:
        computed.append(row["key"])
        return str(2 * row["n"])

    def labels(t: DataTable[Any]) -> list[str]:
        return [c.label.plain for c in t.ordered_columns]

    def cells(t: DataTable[Any]) -> list[list[str]]:
        return [[c.plain for c in t.get_row_at(i)] for i in range(t.row_count)]

    async def run() -> None:
        app = _app(FastTable)
        async with app.run_test(size=(60, 12)) as pilot:
            t = app.query_one("#t", FastTable)
            rows = [{"key": f"p{i}", "n": 1000 + i} for i in range(20)]
            base.fill_table(t, columns, rows, "key", sort=("n", True))
            await settle(pilot)
            assert fills == [1] and labels(t) == ["KEY", "N"]  # measured after: no room yet
            base.fill_table(t, columns, list(rows), "key", sort=("n", True))
            assert fills == [1] and labels(t) == ["KEY", "N ▼"]  # the column widened since
            base.fill_table(t, columns, list(rows), "key", sort=("n", False))  # reversed: the mark
            assert fills == [1] and labels(t) == ["KEY", "N ▲"]
            # a row replaced: filled
            rows[3] = {"key": "p3", "n": 3333}
            base.fill_table(t, columns, rows, "key", sort=("n", False))
            assert fills == [1, 1] and cells(t)[3] == ["p3", "3333"]
            # computed cells: filled unless said unchanged
            extra: dict[str, base.Cell] = {"TWICE": twice}
            base.fill_table(t, columns, rows, "key", extra=extra, sort=("n", False))
            base.fill_table(t, columns, rows, "key", extra=extra, sort=("n", False))
            assert len(fills) == 4
            computed.clear()
            base.fill_table(t, columns, rows, "key", extra=extra, extra_same=lambda r: r["n"] != 3333)
            assert len(fills) == 5 and computed == ["p3"]
            base.fill_table(t, columns, rows, "key", extra=extra, extra_same=lambda r: True)
            assert len(fills) == 5 and cells(t)[3] == ["p3", "3333", "6666"]
            # another width: fitted again
            await pilot.resize_terminal(50, 12)
            await settle(pilot)
            base.fill_table(t, columns, rows, "key", extra=extra, extra_same=lambda r: True)
            assert len(fills) == 6
            # emptied behind its back: filled again
            t.clear()
            base.fill_table(t, columns, rows, "key", extra=extra, extra_same=lambda r: True)
            assert len(fills) == 7 and t.row_count == 20 and cells(t)[3] == ["p3", "3333", "6666"]

    asyncio.run(run())
