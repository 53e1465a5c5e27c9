"""Every use of Textual's private API, in one place.

memtop's FastTable (memtop/ui/table.py) reaches into DataTable's internals to draw only what
changed and to add many rows at once. Those internals are not Textual's promise: they may change
shape in any release. Everything it needs of them is here, behind names of memtop's own, so a new
Textual is checked in one place: ``problems()`` lists what no longer has the expected shape, and
tests/unit/test_textual_compat.py fails with that list and the Textual version. pyproject.toml
bounds Textual below its next major release; raise the bound once that test passes on it.

Nothing outside this module may import ``textual._*`` or touch a Textual attribute whose name
starts with an underscore.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import selectors
from bisect import bisect_left
from codecs import getincrementaldecoder
from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from itertools import zip_longest
from typing import Any, Self, cast

from rich.color import Color as RichColor
from rich.style import Style
from textual._compositor import ChopsUpdate, Compositor
from textual._parser import ParseError
from textual._two_way_dict import TwoWayDict
from textual.geometry import Region
from textual.screen import UPDATE_PERIOD as SCREEN_UPDATE_PERIOD_S
from textual.screen import Screen
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets._data_table import Row  # not re-exported: rows are built as add_row does
from textual.widgets.data_table import CellDoesNotExist, CellKey, ColumnKey, DuplicateKey, RowKey


def textual_version() -> str:
    """The installed Textual's version (for the compatibility test's message). Asked only then:
    importlib.metadata, which reads it, cost ~15 ms of CPU before the first frame (of ~350 ms)."""
    from importlib.metadata import version

    return version("textual")


class LeanScrollBar(ScrollBar):
    """A scrollbar repainted only when what it draws changed.

    Textual repaints a scrollbar, every line of it, whenever its range, window or position
    changes: a table of processes whose rows come and go changes its range every tick, mostly
    without moving the thumb by a cell (on the shared machine the table's scrollbar was ~55 of
    the ~90 lines a second the TUI drew). Here a repaint asked with nothing else changed is made
    only when the bar's segments (what it draws: the thumb's cells and eighths, its colours and
    click targets) or its size differ from those last painted."""

    def __init__(self, vertical: bool = True, name: str | None = None, *, thickness: int = 1) -> None:
        #: what the bar was last painted from (None: not known, the next repaint is made)
        self.painted: tuple[object, ...] | None = None
        #: set while its table's range changes with its rows (CompatDataTable.update_scrollbars):
        #: only such repaints are skipped when nothing drawn changed; any other (a style, a
        #: hover, a layout) is Textual's own
        self.lean = False
        super().__init__(vertical, name, thickness=thickness)

    def bar_key(self) -> tuple[object, ...] | None:
        """What the bar draws now, as ScrollBarRender draws it (None: not a plain bar)."""
        bar = self.render()
        if type(bar) is not self.renderer or not isinstance(bar.style, Style):
            return None
        width, height = self.size
        size, thickness = (height, width) if self.vertical else (width, height)
        style = bar.style
        segments = bar.render_bar(
            size=size,
            window_size=bar.window_size,
            virtual_size=bar.virtual_size,
            position=bar.position,
            vertical=bar.vertical,
            thickness=thickness,
            back_color=style.bgcolor or RichColor.parse("#555555"),
            bar_color=style.color or RichColor.parse("bright_magenta"),
        )
        # the colours come from the table's styles and its ancestors' backgrounds: any change of
        # their rules (an animation's steps too) is a repaint
        parent = self.parent
        styles = tuple(n.styles._cache_key for n in parent.ancestors_with_self) if parent else ()
        generation = (self.app._css_update_count, self.styles._cache_key, styles)
        return (width, height, generation, tuple(segments.segments))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.painted = None

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        if not self.lean or regions or layout or recompose or not repaint or not self.is_mounted:
            self.painted = None
            return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
        try:
            key = self.bar_key()
        except Exception:  # noqa: BLE001 - not laid out yet, Textual internals moved: repaint
            key = None
        if key is not None and key == self.painted:
            return self
        self.painted = key
        return super().refresh()


#: a cell a row does not hold (a column added or removed since it was built)
_MISSING: Any = object()


class RowCells(MutableMapping[Any, Any]):
    """A row's cells by column key, as DataTable keeps them, but compact: the values in a list,
    their positions in one dictionary shared by every row of the table. DataTable keeps a dict
    per row (~650 B for memtop's 13 columns, ~0.65 MiB of RssAnon with 1,000 processes); this is
    ~200 B. It behaves as that dict for every use DataTable makes of it (lookup by ColumnKey or
    str, assignment, deletion, iteration in column order)."""

    __slots__ = ("_index", "_values")

    def __init__(self, index: dict[Any, int], values: list[Any]) -> None:
        self._index = index
        self._values = values

    def __getitem__(self, key: Any) -> Any:
        i = self._index[key]
        values = self._values
        if i >= len(values) or values[i] is _MISSING:
            raise KeyError(key)
        return values[i]

    def get(self, key: Any, default: Any = None) -> Any:
        i = self._index.get(key)
        values = self._values
        if i is None or i >= len(values) or values[i] is _MISSING:
            return default
        return values[i]

    def __contains__(self, key: object) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def __setitem__(self, key: Any, value: Any) -> None:
        index, values = self._index, self._values
        i = index.get(key)
        if i is None:  # a new column (DataTable.add_column sets it in every row)
            i = index[key] = len(index)
        if i >= len(values):
            values.extend([_MISSING] * (i + 1 - len(values)))
        values[i] = value

    def __delitem__(self, key: Any) -> None:
        if key not in self:
            raise KeyError(key)
        self._values[self._index[key]] = _MISSING

    def __iter__(self) -> Iterator[Any]:
        values = self._values
        n = len(values)
        for key, i in list(self._index.items()):
            if i < n and values[i] is not _MISSING:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


class CompactRows(dict[RowKey, Any]):
    """DataTable's ``_data`` (row key -> the row's cells) holding :class:`RowCells`: a dict
    assigned as a row's cells (DataTable.add_row) is stored compact, its column positions in
    ``index``, which is begun anew when the table is emptied (its columns may change then)."""

    def __init__(self) -> None:
        super().__init__()
        self.index: dict[Any, int] = {}

    def __setitem__(self, key: RowKey, cells: Any) -> None:
        if isinstance(cells, dict):
            cells = self.row(cells.keys(), cells.values())
        super().__setitem__(key, cells)

    def row(self, keys: Iterable[Any], values: Iterable[Any]) -> RowCells:
        """The cells ``values`` of the columns ``keys`` as a row."""
        index = self.index
        positions = [index.setdefault(k, len(index)) for k in keys]
        vals = list(values)
        if positions == list(range(len(positions))) and len(positions) == len(index):
            return RowCells(index, vals)  # the usual case: every column, in the table's order
        got = RowCells(index, [])
        for i, v in zip(positions, vals, strict=True):
            got._values.extend([_MISSING] * (i + 1 - len(got._values)))
            got._values[i] = v
        return got

    def clear(self) -> None:
        super().clear()
        self.index = {}


class CompatDataTable(DataTable[Any]):
    """DataTable with the internals FastTable uses behind names of memtop's own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._data = CompactRows()

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        """Widget's own, created as it creates it, but a :class:`LeanScrollBar`."""
        if self._vertical_scrollbar is not None:
            return self._vertical_scrollbar
        self._vertical_scrollbar = scroll_bar = LeanScrollBar(
            vertical=True, name="vertical", thickness=self.scrollbar_size_vertical
        )
        self._vertical_scrollbar.display = False
        self.app._start_widget(self, scroll_bar)
        return scroll_bar

    # -- rows --------------------------------------------------------------------------------------
    def row_key_at(self, row_index: int) -> RowKey | None:
        """The key of the row shown at ``row_index`` (None past the end)."""
        return self._row_locations.get_key(row_index)

    def row_index_of(self, row_key: RowKey) -> int | None:
        """Where the row ``row_key`` is shown (None once it is removed)."""
        return self._row_locations.get(row_key)

    def has_row_key(self, row_key: RowKey) -> bool:
        return row_key in self._row_locations

    def row_cells(self, row_key: RowKey) -> MutableMapping[ColumnKey, Any]:
        """The row's cells by column key, as stored (not formatted); empty if it is gone."""
        return self._data.get(row_key, {})

    def row_values(self, row_key: RowKey, column_keys: Sequence[ColumnKey]) -> list[Any]:
        """The row's cells of the columns ``column_keys``, in that order (KeyError for a row
        that is gone or a cell it does not hold): the lookups of ``row_cells`` without a call
        a cell."""
        data = cast(RowCells, self._data[row_key])  # CompactRows stores every row as one
        index, values = data._index, data._values
        try:
            got = [values[index[k]] for k in column_keys]
        except IndexError:
            raise KeyError(row_key) from None
        if _MISSING in got:
            raise KeyError(row_key)
        return got

    def set_row_order(self, keys: Sequence[RowKey]) -> None:
        """Show the rows in the order of ``keys`` (every row's key once), repainting them."""
        self._row_locations = TwoWayDict({key: i for i, key in enumerate(keys)})
        self._update_count += 1

    def append_rows(self, rows: Sequence[tuple[RowKey, Sequence[Any]]]) -> None:
        """One-line rows appended at once, ending where ``add_row`` per row ends: DataTable's
        add_row with its per-row work (column order, cursor check, idle check) done once."""
        columns = self.ordered_columns
        if any(len(cells) > len(columns) for _, cells in rows):
            raise ValueError("More values provided than there are columns.")
        keys = [key for key, _ in rows]
        if len(set(keys)) != len(keys) or any(key in self._row_locations for key in keys):
            raise DuplicateKey(f"repeated row keys among {len(keys)} new rows")
        was_empty = self.row_count == 0
        index = self.row_count
        data = cast(CompactRows, self._data)  # set in __init__, never replaced by DataTable
        column_keys = [column.key for column in columns]
        for row_key, cells in rows:
            self._row_locations[row_key] = index
            index += 1
            data[row_key] = data.row(column_keys, (c for _, c in zip_longest(column_keys, cells)))
            self.rows[row_key] = Row(row_key, 1, None, False)
            self._new_rows.add(row_key)
        self._require_update_dimensions = True
        self.cursor_coordinate = self.cursor_coordinate
        if was_empty and len(self.columns) > 0 and self.show_cursor and self.cursor_type != "none":
            self._highlight_cursor()
        self._update_count += len(keys)
        self.check_idle()

    def set_row_cells(self, row_key: RowKey, cells: Sequence[tuple[ColumnKey, Any, bool]]) -> None:
        """DataTable's ``update_cell`` for several cells of one row, each (column, value, whether
        its column may widen for it), with one repaint instead of one a cell."""
        if row_key not in self._row_locations or any(c not in self._column_locations for c, _, _ in cells):
            raise CellDoesNotExist(f"No such cells in row_key={row_key!r}: {[c for c, _, _ in cells]!r}.")
        data = self._data[row_key]
        for column_key, value, widen in cells:
            data[column_key] = value
            self._update_count += 1
            if widen:
                self._updated_cells.add(CellKey(row_key, column_key))
                self._require_update_dimensions = True
        self.refresh()

    def remove_rows(self, keys: Iterable[RowKey]) -> None:
        """Rows removed at once, ending where ``remove_row`` per row ends: DataTable's remove_row
        renumbers every row below the one removed (a log that drops its 64 oldest of 200 rows a
        tick: 64 walks of the table), here the rest are renumbered once."""
        gone = {k for k in keys if k in self._row_locations}
        if not gone:
            return
        self._require_update_dimensions = True
        self.check_idle()
        kept = sorted(
            (i, k) for k, i in ((k, self._row_locations.get(k)) for k in self._row_locations) if k not in gone
        )
        self._row_locations = TwoWayDict({k: n for n, (_, k) in enumerate(kept)})
        for row_key in gone:
            for column_key in self._data.get(row_key, {}):
                self._updated_cells.discard(CellKey(row_key, column_key))
            del self.rows[row_key]
            del self._data[row_key]
        self.cursor_coordinate = self.cursor_coordinate
        self.hover_coordinate = self.hover_coordinate
        self._update_count += len(gone)
        self.refresh(layout=True)

    # -- measuring ---------------------------------------------------------------------------------
    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        rows = list(new_rows)
        # the new virtual size repaints the whole table; quiet_repaint: only what changed
        with self.quiet_repaint():
            if self.measure_new_rows(rows):
                super()._update_dimensions([])  # nothing left to measure: only the virtual size
                return
            super()._update_dimensions(rows)

    def update_scrollbars(self) -> None:
        """What a layout does for a scroll view whose virtual size changed and whose own size did
        not (ScrollView._size_updated): the scrollbars' range and visibility, the scroll offset
        kept within the new size. A scrollbar shown or hidden asks for a layout itself. The
        vertical scrollbar repaints only if what it draws changed (:class:`LeanScrollBar`)."""
        bar = self._vertical_scrollbar
        if not isinstance(bar, LeanScrollBar):
            self._scroll_update(self.virtual_size)
            return
        bar.lean = True
        try:
            self._scroll_update(self.virtual_size)
        finally:
            bar.lean = False

    def quiet_repaint(self) -> AbstractContextManager[None]:
        """Where a whole repaint asked by rows edited within may be narrowed (FastTable)."""
        return nullcontext()

    def measure_new_rows(self, new_rows: list[RowKey]) -> bool:
        """Widen the columns for ``new_rows`` and return True, or return False to let DataTable
        measure them its own way. Called when rows were added or changed, before a frame."""
        return False

    # -- drawing -----------------------------------------------------------------------------------
    def row_style(self, row_index: int, base: Style) -> Style:
        """DataTable's style for the row at ``row_index`` (zebra stripes, header)."""
        return self._get_row_style(row_index, base)

    def body_cell_styles(self, cursor: bool, hover: bool) -> tuple[Style, Style]:
        """(component, post) styles DataTable gives a body cell of a row with the cursor and/or
        the mouse on it."""
        return self._get_styles_to_render_cell(
            False,
            False,
            False,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )

    def fixed_cell_styles(self, cursor: bool, hover: bool) -> tuple[Style, Style, Style]:
        """(base, component, post) styles DataTable gives a body cell of a fixed column (its own
        colour, not the row's) in a row with the cursor and/or the mouse on it."""
        base = self.get_component_styles("datatable--fixed").rich_style + Style.from_meta({"fixed": True})
        component, post = self._get_styles_to_render_cell(
            False,
            False,
            True,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        return base, component, post

    @property
    def hover_cursor_shown(self) -> bool:
        """Whether DataTable draws the mouse's row/cell highlighted now."""
        return bool(self._show_hover_cursor)

    @property
    def renders_row_labels(self) -> bool:
        return bool(self._should_render_row_labels)


class LeanCompositor(Compositor):
    """A compositor whose partial updates render only what they send.

    Textual's partial update renders every widget that overlaps the box around all the dirty
    regions, each over its whole height, then sends only the dirty lines: when the header
    (line 0) and a row near the bottom changed, every widget on screen was rendered (ten on the
    Processes pane, ~45 lines each through the styles cache; py-spy put most of an idle
    memtop's screen updates there). Here each dirty line takes its pieces front to back as
    Textual's do, but a widget is rendered only over the dirty lines where something in front
    of it left a piece that is sent still empty, so the same pieces are sent from far fewer
    renders. A full update (the first frame, a resize, a screenshot) is Textual's own."""

    def render_partial_update(self) -> ChopsUpdate | None:
        update_regions = self._dirty_regions.copy()
        self._dirty_regions.clear()
        if not update_regions:
            return None
        spans = list(self._regions_to_spans(update_regions))
        chops = self.lean_chops(spans)
        return ChopsUpdate(chops, spans, [cut_set[1:] for cut_set in self.cuts])

    def lean_chops(self, spans: Sequence[tuple[int, int, int]]) -> list[dict[int, Strip | None]]:
        """The pieces of each line of ``spans`` ((y, x1, x2), as ChopsUpdate reads them), as
        Textual's ``_render_chops`` makes them for the pieces sent: per line, every piece a span
        overlaps holds the strip of the front-most widget there."""
        cuts = self.cuts
        chops: list[dict[int, Strip | None]] = [dict.fromkeys(cut_set[:-1]) for cut_set in cuts]
        # per line, the pieces (their first cell) ChopsUpdate sends: those a span overlaps
        wanted: dict[int, list[int]] = {}
        for y, x1, x2 in spans:
            if not 0 <= y < len(cuts):
                continue
            line = cuts[y]
            got = wanted.setdefault(y, [])
            got += [
                c for c, end in zip(line, line[1:], strict=False) if c <= x2 and end > x1 and c not in got
            ]
        if not wanted:
            return chops
        lines = sorted(wanted)
        for widget, (region, clip) in self.visible_widgets.items():  # front to back
            render_region = region.intersection(clip)
            top, bottom = render_region.y, render_region.bottom
            if not render_region.width or not render_region.height:
                continue
            first_cut, last_cut = render_region.column_span
            # the dirty lines of this widget where a piece it covers is still empty
            need = []
            for y in lines[bisect_left(lines, top) : bisect_left(lines, bottom)]:
                line_chops = chops[y]
                for c in wanted[y]:
                    if first_cut <= c < last_cut and line_chops[c] is None:
                        need.append(y)
                        break
            if not need:
                continue
            y0, y1 = need[0], need[-1] + 1
            strips = widget.render_lines(
                Region(render_region.x - region.x, y0 - region.y, render_region.width, y1 - y0)
            )
            render_x = render_region.x
            for y, strip in zip(range(y0, y1), strips, strict=False):
                if y not in wanted:
                    continue
                line_chops = chops[y]
                final_cuts = [cut for cut in cuts[y] if last_cut >= cut >= first_cut]
                pieces = strip.divide([cut - render_x for cut in final_cuts[1:]])
                for cut, piece in zip(final_cuts, pieces, strict=False):
                    if line_chops.get(cut) is None:
                        line_chops[cut] = piece
        return chops


class UpdateTimer:
    """The screen's update timer (``Screen._update_timer``) without its wake-up for nothing.

    Textual's is a :class:`textual.timer.Timer` that the screen resumes when a widget asks for a
    repaint and pauses in the update it fires. After each update the timer's task still sleeps to
    its next 1/60 s before waiting to be resumed again: on an idle tick (one update a second)
    that sleep is a wake-up of the event loop of its own, a third of the main thread's. Here an
    update is one callback on the loop, scheduled when resumed: at once, or as Textual's would,
    no sooner than one period after the last (the frame-rate cap), and nothing is left to wake
    up once it ran. Paused, the scheduled update is cancelled, as Textual's waits."""

    def __init__(self, screen: Screen[Any], period_s: float) -> None:
        self._screen = screen
        self._period_s = period_s
        self._handle: asyncio.Handle | None = None
        #: the loop's time of the last update (its frame-rate cap)
        self._last = float("-inf")
        self._stopped = False
        #: the context the screen's own timer task would run in (its app, its message pump)
        self._context = contextvars.copy_context()

    def resume(self) -> None:
        if self._handle is not None or self._stopped:
            return
        loop = asyncio.get_running_loop()
        delay = self._last + self._period_s - loop.time()
        if delay > 0:
            self._handle = loop.call_later(delay, self._fire, context=self._context)
        else:
            self._handle = loop.call_soon(self._fire, context=self._context)

    def pause(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def stop(self) -> None:
        self.pause()
        self._stopped = True

    def _fire(self) -> None:
        self._handle = None
        self._last = asyncio.get_running_loop().time()
        app = self._screen.app
        if app._exit:  # as Timer._tick: no update once the app is exiting
            return
        try:
            self._screen._on_timer_update()
        except Exception as error:  # noqa: BLE001 - as Timer._tick: the app shows it and exits
            app._handle_exception(error)


class LeanScreen(Screen[Any]):
    """A screen that draws its partial updates through :class:`LeanCompositor`, and updates
    through an :class:`UpdateTimer`."""

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._compositor = LeanCompositor()
        self._lean_timer: UpdateTimer | None = None

    @property
    def _update_timer(self) -> Any:  # Screen's is a Timer: every use of it is pause and resume
        timer = self._lean_timer
        if timer is None:
            timer = self._lean_timer = UpdateTimer(self, SCREEN_UPDATE_PERIOD_S)
        return timer

    async def _message_loop_exit(self) -> None:
        if self._lean_timer is not None:
            self._lean_timer.stop()
        await super()._message_loop_exit()


def _compositor_problems() -> list[str]:
    out = []
    for name in ("cuts", "visible_widgets", "_dirty_regions", "_regions_to_spans", "render_partial_update"):
        if not hasattr(Compositor, name) and name not in inspect.getsource(Compositor.__init__):
            out.append(f"textual._compositor.Compositor has no {name}")
    params = list(inspect.signature(ChopsUpdate.__init__).parameters)[1:]
    if params != ["chops", "spans", "chop_ends"]:
        out.append(f"textual._compositor.ChopsUpdate takes {params}, not chops, spans, chop_ends")
    updates = inspect.getsource(Screen._on_idle) + inspect.getsource(Screen._refresh_layout)
    updates += inspect.getsource(Screen._on_timer_update)
    if not isinstance(Screen.__dict__.get("_update_timer"), property) or any(
        f"self._update_timer.{call}()" not in updates for call in ("resume", "pause")
    ):
        out.append("Screen._update_timer is no longer a property that is resumed and paused")
    if "self._compositor = Compositor()" not in inspect.getsource(Screen.__init__):
        out.append("Screen.__init__ no longer sets self._compositor = Compositor()")
    source = inspect.getsource(Compositor._render_chops)
    for part in ("strip.divide([cut - render_x for cut in final_cuts[1:]])", "last_cut >= cut >= first_cut"):
        if part not in source:
            out.append(f"Compositor._render_chops no longer has {part!r} (LeanCompositor copies it)")
    return out


def _scrollbar_problems() -> list[str]:
    from textual.widget import Widget

    out = []
    getter = Widget.__dict__["vertical_scrollbar"].fget
    source = inspect.getsource(getter) if getter is not None else ""
    for part in (
        "self._vertical_scrollbar = scroll_bar = ScrollBar(",
        'vertical=True, name="vertical", thickness=self.scrollbar_size_vertical',
        "self._vertical_scrollbar.display = False",
        "self.app._start_widget(self, scroll_bar)",
    ):
        if part not in source:
            out.append(f"Widget.vertical_scrollbar no longer has {part!r} (CompatDataTable copies it)")
    params = list(inspect.signature(ScrollBarRender.render_bar).parameters)
    if params != [
        "size",
        "virtual_size",
        "window_size",
        "position",
        "thickness",
        "vertical",
        "back_color",
        "bar_color",
    ]:
        out.append(f"ScrollBarRender.render_bar takes {params}")
    return out


def _attribute_problems(table: DataTable[Any]) -> list[str]:
    out: list[str] = []
    expected: dict[str, type | tuple[type, ...]] = {
        "_row_locations": TwoWayDict,
        "_data": dict,
        "_new_rows": set,
        "_updated_cells": set,
        "_require_update_dimensions": bool,
        "_update_count": int,
        "_show_hover_cursor": bool,
    }
    for name, kind in expected.items():
        if not isinstance(getattr(table, name, None), kind):
            out.append(f"DataTable().{name} is not a {kind}")
    if not isinstance(DataTable.__dict__.get("_should_render_row_labels"), property):
        out.append("DataTable._should_render_row_labels is not a property")
    return out


def _signature_problems() -> list[str]:
    out: list[str] = []
    methods = {
        "_update_dimensions": ["new_rows"],
        "_highlight_cursor": [],
        "_scroll_update": ["virtual_size"],
        "_get_row_style": ["row_index", "base_style"],
        "_get_styles_to_render_cell": [
            "is_header_cell",
            "is_row_label_cell",
            "is_fixed_style_cell",
            "hover",
            "cursor",
            "show_cursor",
            "show_hover_cursor",
            "has_css_foreground_priority",
            "has_css_background_priority",
        ],
    }
    for name, params in methods.items():
        method = getattr(DataTable, name, None)
        if not callable(method):
            out.append(f"DataTable.{name} is gone")
            continue
        got = list(inspect.signature(method).parameters)[1:]
        if got != params:
            out.append(f"DataTable.{name} takes {got}, not {params}")
    row_fields = [f for f in getattr(Row, "__dataclass_fields__", {})]
    if row_fields != ["key", "height", "label", "auto_height"]:
        out.append(f"textual.widgets._data_table.Row has fields {row_fields}")
    for name in ("get", "get_key", "__setitem__", "__contains__"):
        if not callable(getattr(TwoWayDict, name, None)):
            out.append(f"textual._two_way_dict.TwoWayDict.{name} is gone")
    return out


def set_driver_output(driver: Any, stream: Any) -> None:
    """Make a Linux driver draw on ``stream`` (memtop/ui/term_compat.py: the TUI draws on its own
    copy of stdout while fd 2 goes to the log file). ``LinuxDriver._file`` is that stream."""
    driver._file = stream


def run_input_loop(driver: Any, wake_fd: int, selector: selectors.BaseSelector | None = None) -> None:
    """Textual's ``LinuxDriver.run_input_thread``, without its polling: Textual's thread wakes
    every 0.1 s (``select(0.1)``) to let its parser time out a lone Escape, ten wake-ups a
    second for nothing while no key is pressed (about 1 ms of CPU a second, a tenth of an idle
    memtop's). Here the thread sleeps until the terminal or ``wake_fd`` (written when the
    driver's ``exit_event`` is set: memtop/ui/term_compat.py) is readable, with a timeout only
    while the parser waits for the rest of an escape sequence (``Parser._timeout_time``).
    ``selector``: the one to wait on (a test's, to see the timeouts asked for)."""
    from textual._time import get_time
    from textual._xterm_parser import XTermParser

    sel = selector if selector is not None else selectors.SelectSelector()
    fileno: int = driver.fileno
    sel.register(fileno, selectors.EVENT_READ)
    sel.register(wake_fd, selectors.EVENT_READ)
    parser = XTermParser(driver._debug)
    decode = getincrementaldecoder("utf-8")().decode
    post = driver.process_message
    try:
        while not driver.exit_event.is_set():
            due = parser._timeout_time
            ready = sel.select(None if due is None else max(0.0, due - get_time()))
            for key, _mask in ready:
                if key.fd == wake_fd:
                    try:  # drained, so a restarted loop (after a suspend) does not spin on it
                        while os.read(wake_fd, 512):
                            pass
                    except BlockingIOError:
                        pass
                    continue
                data = decode(os.read(fileno, 4096))
                if data:  # empty: end of file (the session's watch handles a hung-up terminal)
                    for event in parser.feed(data):
                        post(event)
            for event in parser.tick():
                post(event)
    finally:
        sel.close()
        try:
            for _event in parser.feed(""):
                pass
        except (EOFError, ParseError):
            pass


def _driver_problems() -> list[str]:
    from textual._parser import Parser
    from textual.drivers.linux_driver import LinuxDriver

    out = []
    if "self._file" not in inspect.getsource(LinuxDriver.__init__):
        out.append("LinuxDriver.__init__ no longer sets self._file (the stream the driver draws on)")
    init = inspect.getsource(Parser.__init__)
    if "self._timeout_time" not in init or "_timeout_time" not in inspect.getsource(Parser.tick):
        out.append("textual._parser.Parser no longer keeps _timeout_time (when tick() is due)")
    source = inspect.getsource(LinuxDriver.run_input_thread)
    for part in ("XTermParser(self._debug)", "self.process_message(event)", "self.exit_event.is_set()"):
        if part not in source:
            out.append(f"LinuxDriver.run_input_thread no longer has {part!r} (memtop's input loop copies it)")
    return out


def problems() -> list[str]:
    """What of Textual's private API memtop uses no longer has the shape it expects (empty when
    this Textual is compatible). Checks a DataTable instance: call it where one may be built."""
    out = _signature_problems()
    out += _driver_problems()
    out += _compositor_problems()
    out += _scrollbar_problems()
    out += _attribute_problems(DataTable())
    # memtop's own names must not shadow (or be shadowed by) DataTable's
    for name in (
        "row_key_at",
        "row_index_of",
        "has_row_key",
        "row_cells",
        "row_values",
        "set_row_order",
        "append_rows",
        "set_row_cells",
        "remove_rows",
        "quiet_repaint",
        "update_scrollbars",
        "measure_new_rows",
        "row_style",
        "body_cell_styles",
        "fixed_cell_styles",
        "hover_cursor_shown",
        "renders_row_labels",
    ):
        if hasattr(DataTable, name):
            out.append(f"DataTable has its own {name}: CompatDataTable's hides it")
    return out
