"""A DataTable that repaints only the rows that changed.

Textual's DataTable keys every render cache on one table-wide update counter, so a single changed
cell (memtop's own RSS, one busy process) re-renders every visible cell through Rich on the next
frame: with a 60-line table that was most of memtop's CPU at idle (bench/memtop_self.py, py-spy).
``FastTable`` draws a body line itself from its cells' plain text, one segment per cell, and keeps
the line keyed by what it shows (text, position, cursor, width, styles), so an unchanged row costs
a dictionary lookup. Everything else (cursor, scrolling, sorting, events, the header) is
DataTable's own. Fixed columns (PID and COMMAND staying put while the rest scrolls right) are
drawn as DataTable draws them: the fixed cells, then the rest cropped by the horizontal scroll.
Lines it cannot draw this way (styled cells, row labels, multi-line rows) fall back to DataTable's
renderer, as does everything if Textual's internals change shape.
The internals it needs are reached through memtop/ui/textual_compat.py only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self, TypeVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widgets.data_table import CellType, ColumnKey, RowKey

from memtop.ui.textual_compat import CompatDataTable

log = logging.getLogger(__name__)
#: what a per-frame lookup computes (FastTable._per_frame)
T = TypeVar("T")

#: lines kept by what they show, the least recently drawn dropped first: about three screens of
#: a 45-line table, enough for its lines to be drawn again after a scroll or a whole repaint. A
#: line's Strip holds its segments and Textual's crop and style caches of it (with their own
#: Strips), ~1-2 KiB: 512 lines, all cleared when full, held ~0.4 MiB more than these with
#: 1,000 processes (tracemalloc)
CACHE_LINES = 160
#: cells' combined styles kept (a screen of rows, zebra and cursor, a few colours)
CACHE_CELL_STYLES = 4096


class FastTable(CompatDataTable):
    # class-level: DataTable.__init__ refreshes before __init__ below sets anything
    _quiet = 0
    _quiet_full = False
    #: the row update_cell is repainting; a class default, as DataTable.__init__ refreshes
    #: before this class's __init__ has run
    _partial_row: int | None = None
    #: inside update_scrollbars: a layout asked meanwhile (a scrollbar shown or hidden) is one
    _in_scroll_update = False
    #: the virtual and container sizes the scrollbars were last updated for
    _scrolled_for: tuple[Size, Size] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: styles kept from frame to frame until the CSS changes (_per_style)
        self._style_memo: dict[Any, Any] = {}
        #: each cell's combined styles (_cell_styles)
        self._cell_style_memo: dict[tuple[Any, ...], tuple[Style, Style]] = {}
        super().__init__(*args, **kwargs)
        self._fast_lines: dict[tuple[Any, ...], Strip] = {}
        self._fast_ok = True
        #: lookups kept for the frame being rendered (None between frames)
        self._frame: dict[Any, Any] | None = None
        self._partial_row: int | None = None
        self._single_line_rows = True  # every row one line high (as memtop's tables add them)
        #: per line on screen (y): the key of what render_line drew there last (None: drawn by
        #: DataTable's renderer, unknown)
        self._drawn: dict[int, tuple[Any, ...] | None] = {}
        #: >0 while the rows are being edited: a whole repaint asked meanwhile becomes a repaint
        #: of the lines whose content changed (_repaint_changed)

    def add_row(
        self, *cells: CellType, height: int | None = 1, key: str | None = None, label: Any = None
    ) -> RowKey:
        if height != 1:
            self._single_line_rows = False
        return super().add_row(*cells, height=height, key=key, label=label)

    def add_keyed_rows(self, items: Sequence[tuple[str, Sequence[CellType]]]) -> None:
        """One-line rows appended at once, ending where ``add_row`` per row ends. DataTable's
        add_row recomputes the column order, re-validates the cursor and wakes the idle check for
        every row (with 1,000 rows a sizeable part of the first frame); here each is done
        once."""
        if not items:
            return
        self.append_rows([(RowKey(k), cells) for k, cells in items])

    def measure_new_rows(self, new_rows: list[RowKey]) -> bool:
        """Column widths for new rows. DataTable measures every new cell through Rich (a console
        options object per cell: with 1,000 rows most of a first frame); a
        plain one-line-per-row Text needs only its cell length. Anything else: DataTable's way."""
        if self._fast_ok:
            try:
                return self._fast_dimensions(new_rows)
            except Exception:  # noqa: BLE001 - Textual internals moved: measure its own way
                log.exception("fast table measure failed; using DataTable's")
        return False

    def _fast_dimensions(self, new_rows: list[RowKey]) -> bool:
        columns = self.ordered_columns
        keys = [c.key for c in columns]
        widths = [c.content_width for c in columns]
        for row_key in new_rows:
            if self.row_index_of(row_key) is None:  # removed before the table went idle
                continue
            row = self.rows.get(row_key)
            if row is None or row.label is not None or row.auto_height:
                return False
            data = self.row_cells(row_key)
            for i, key in enumerate(keys):
                cell = data.get(key)
                if not isinstance(cell, Text):
                    return False
                plain = cell.plain
                w = (
                    cell_len(plain)
                    if "\n" not in plain
                    else max((cell_len(x) for x in plain.splitlines()), default=0)
                )
                if w > widths[i]:
                    widths[i] = w
        for column, w in zip(columns, widths, strict=True):
            column.content_width = w
        return True

    def order_rows(self, keys: Sequence[str]) -> None:
        """Put the rows in the order of ``keys`` (each row's key once). DataTable's sort builds
        every row's cells for its key function (py-spy: 4 % of memtop's CPU in a fault storm,
        where the order changes every tick); the order is set directly here."""
        by_value = {str(rk.value): rk for rk in self.rows}
        if len(keys) != len(by_value) or any(k not in by_value for k in keys):
            raise ValueError("order_rows needs every row's key once")
        with self.quiet_repaint():
            self.set_row_order([by_value[k] for k in keys])
            self.refresh()

    def remove_rows(self, keys: Iterable[RowKey]) -> None:
        with self.quiet_repaint():
            super().remove_rows(keys)

    def clear(self, columns: bool = False) -> Self:
        self._single_line_rows = True
        return super().clear(columns)

    def update_cell(
        self,
        row_key: RowKey | str,
        column_key: ColumnKey | str,
        value: CellType,
        *,
        update_width: bool = False,
    ) -> None:
        """As DataTable's, but only the row's lines are repainted (none if it is off screen)."""
        try:
            self._partial_row = self.get_row_index(row_key)
        except Exception:  # noqa: BLE001 - DataTable raises its own error below
            self._partial_row = None
        try:
            super().update_cell(row_key, column_key, value, update_width=update_width)
        finally:
            self._partial_row = None

    def update_row(self, row_key: str, cells: Sequence[tuple[str, CellType, bool]]) -> None:
        """Several cells of one row at once, each (column key, value, whether its column may
        widen for it): what ``update_cell`` does for each, with the row's lines repainted once
        (a process whose RSS, growth and faults moved is one repaint, not three)."""
        try:
            self._partial_row = self.get_row_index(row_key)
        except Exception:  # noqa: BLE001 - set_row_cells raises its own error below
            self._partial_row = None
        try:
            self.set_row_cells(RowKey(row_key), [(ColumnKey(c), v, w) for c, v, w in cells])
        finally:
            self._partial_row = None

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        if layout and not regions and not recompose and not self._in_scroll_update and self._box_fixed():
            # rows came or went (the virtual size changed): DataTable asks for a layout of the
            # whole screen, which re-renders every widget on it, once a tick whenever a process
            # starts or exits. A table whose box does not depend on its rows needs only what a
            # layout would do for it: its scrollbars (a scrollbar shown or hidden still asks
            # for a layout: the width of its rows changes)
            sizes = (self.virtual_size, self.container_size)
            if sizes != self._scrolled_for:  # else the scrollbars are right (and not repainted)
                self._scrolled_for = sizes
                self._in_scroll_update = True
                try:
                    self.update_scrollbars()
                finally:
                    self._in_scroll_update = False
            layout = False
        row = self._partial_row
        if row is not None and not regions and not layout and not recompose:
            self._partial_row = None
            if not self._single_line_rows:
                return self.refresh_row(row)
            # DataTable finds a row's region by summing the heights of the rows above it, after
            # every update an O(rows) walk; one-line rows need no walk. Whether it is in the
            # window is compared as integers: Region.overlaps and .translate are lru_caches of
            # Textual's, which kept the regions of 1,000 rows repainted once each (~0.15 MiB)
            y = row + (self.header_height if self.show_header else 0)
            scroll_x, scroll_y = self.scroll_offset
            width = max(self.size.width, self.virtual_size.width)
            _, _, window_w, window_h = self.region  # the window_region's size
            if scroll_y <= y < scroll_y + window_h and scroll_x < width and scroll_x + window_w > 0:
                super().refresh(Region(-scroll_x, y - scroll_y, width, 1))
            return self
        if self._quiet and not regions and not recompose:
            # a whole repaint asked while rows are edited: the lines that changed are repainted
            # when the edit ends; a size change is still laid out
            self._quiet_full = self._quiet_full or repaint
            if layout:
                super().refresh(repaint=False, layout=True)
            return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def _box_fixed(self) -> bool:
        """Whether the table's size is its own (a height and width in cells, fractions or
        percentages, not ``auto``) and it has been laid out: then its rows change what it
        scrolls over, not its box."""
        h, w = self.styles.height, self.styles.width
        return (
            self.is_mounted
            and bool(self.container_size)
            and h is not None
            and not h.is_auto
            and (w is None or not w.is_auto)
        )

    @contextmanager
    def quiet_repaint(self) -> Iterator[None]:
        """Rows edited within: instead of the whole table, only the lines on screen that now
        show something else are repainted. DataTable repaints the whole table when a row comes,
        goes or moves, though most such rows are off screen (a process started and gone at the
        bottom of a 500-row table): every line went through Textual's styles again
        (docs/performance.md)."""
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1
            if not self._quiet and self._quiet_full:
                self._quiet_full = False
                self._repaint_changed()

    def _repaint_changed(self) -> None:
        """Repaint the lines on screen whose key differs from what was drawn there (all of
        them when the fast path is off)."""
        height, width = self.size.height, self.size.width
        self._frame = {}
        try:
            changed = (
                [y for y in range(height) if (k := self._line_key(y)) is None or k != self._drawn.get(y)]
                if self._view()[0]
                else None
            )
        except Exception:  # noqa: BLE001 - Textual internals moved: repaint it all
            log.exception("fast table diff failed; repainting the whole table")
            changed = None
        finally:
            self._frame = None
        if changed is None or len(changed) == height:
            super().refresh()
            return
        for y in changed:
            super().refresh(Region(0, y, width, 1))

    def render_lines(self, crop: Region) -> list[Strip]:
        # styles, columns and their widths and the view's attributes are looked up once per
        # frame, not once per line (DataTable rebuilds its ordered column list on every lookup)
        self._frame = {}
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def _per_frame(self, key: Any, compute: Callable[[], T]) -> T:
        frame = self._frame
        if frame is None:
            return compute()
        got: T | None = frame.get(key)
        if got is None:
            got = frame[key] = compute()
        return got

    def notify_style_update(self) -> None:
        # Textual calls this whenever the CSS that applies to the table may have changed (a class
        # of it or of an ancestor, focus, hover, the theme): DataTable clears its own render
        # caches here; the styles kept from frame to frame go with them
        super().notify_style_update()
        self._style_memo.clear()

    def _per_style(self, key: Any, compute: Callable[[], T]) -> T:
        """``compute()``, kept until the table's styles change: walking the DOM for a rich style
        (DOMNode.rich_style, the row and cell component styles) was most of the work of a
        changed row's line, done again every frame for the same answer."""
        memo = self._style_memo
        got: T | None = memo.get(key)
        if got is None:
            if len(memo) >= 64:  # bounded: the keys are few (zebra, cursor, hover, flags)
                memo.clear()
            got = memo[key] = compute()
        return got

    def _cell_styles(
        self, row_index: int, col: int, pre: Style, after: Style, own: str | Style
    ) -> tuple[Style, Style]:
        """(plain, coloured) style of the cell at ``row_index``, ``col``: the row's and the
        cell's own colour (``own``) around the cell's meta (which row and column a click is
        on), as DataTable combines them. Kept while the same combination comes again: a changed
        row's line made ~15 meta styles and ~30 style sums, the same every frame."""
        key = (row_index, col, pre, after, own)
        got: tuple[Style, Style] | None = self._cell_style_memo.get(key)
        if got is None:
            if len(self._cell_style_memo) >= CACHE_CELL_STYLES:
                self._cell_style_memo.clear()
            meta = Style.from_meta({"row": row_index, "column": col})
            plain = pre + after + meta
            coloured = (
                pre + (own if isinstance(own, Style) else Style.parse(own)) + after + meta if own else plain
            )
            got = self._cell_style_memo[key] = (plain, coloured)
        return got

    def _columns_now(self) -> tuple[list[Any], tuple[int, ...]]:
        def compute() -> tuple[list[Any], tuple[int, ...]]:
            cols = self.ordered_columns
            return cols, tuple(c.get_render_width(self) for c in cols)

        return self._per_frame("columns", compute)

    def _styles(self, row_index: int, cursor: bool, hover: bool = False) -> tuple[Style, Style, Style, Style]:
        """(base, row, cursor/hover component, post) styles for a row."""

        def compute() -> tuple[Style, Style, Style, Style]:
            base: Style = self._per_style("base", lambda: self.rich_style)
            row_style = self.row_style(row_index, base)
            component, post = self.body_cell_styles(cursor, hover)
            return base, row_style, component, post

        flags = self._per_frame("flags", self._cell_flags)
        return self._per_style(("row", row_index % 2, cursor, hover, flags), compute)

    def _cell_flags(self) -> tuple[object, ...]:
        """What DataTable's styles of a body cell depend on besides the CSS, the cursor and the
        mouse (the rest of its lru_cache's key)."""
        return (
            self.show_cursor,
            self.hover_cursor_shown,
            self.cursor_foreground_priority,
            self.cursor_background_priority,
        )

    def _view(self) -> tuple[bool, int, int, int, int, int, int, int, int]:
        """(fast path possible, header height, scroll y, scroll x, width, cursor row or -1, cell
        padding, row under the mouse or -1, fixed columns): reactive attributes."""

        def compute() -> tuple[bool, int, int, int, int, int, int, int, int]:
            fast = (
                self._fast_ok
                and self.show_header
                and self.cursor_type == "row"
                and not self.fixed_rows
                and not self.renders_row_labels
            )
            hover = self.hover_coordinate.row if self.hover_cursor_shown else -1
            return (
                bool(fast),
                self.header_height,
                int(self.scroll_offset.y),
                int(self.scroll_offset.x),
                self.size.width,
                self.cursor_row if self.show_cursor else -1,
                self.cell_padding,
                hover,
                int(self.fixed_columns),
            )

        return self._per_frame("view", compute)

    def render_line(self, y: int) -> Strip:
        view = self._view()
        if view[0]:
            try:
                key = self._line_key(y)
                strip = None if key is None else self._line(y, key)
            except Exception:  # noqa: BLE001 - Textual internals moved: use its own renderer
                log.exception("fast table line failed; using DataTable's renderer")
                self._fast_ok = False
                key, strip = None, None
            if strip is not None:
                self._drawn[y] = key
                return strip
        self._drawn[y] = None
        return super().render_line(y)

    def _line_key(self, y: int) -> tuple[Any, ...] | None:
        """What line ``y`` on screen shows, as a key (None: not drawn by the fast path)."""
        view = self._view()
        return self._body_key(y - view[1] + view[2]) if y >= view[1] else self._header_key(y)

    def _line(self, y: int, key: tuple[Any, ...]) -> Strip | None:
        lines = self._fast_lines
        strip = lines.pop(key, None)
        if strip is not None:
            lines[key] = strip  # the most recently drawn last
            return strip
        strip = self._header_strip(y) if key[0] == "header" else self._body_strip(key)
        if strip is not None:
            if len(lines) >= CACHE_LINES:
                del lines[next(iter(lines))]  # the least recently drawn
            lines[key] = strip
        return strip

    def _header_key(self, y: int) -> tuple[Any, ...]:
        """DataTable's own header line is kept while what it shows is the same: DataTable keys it
        on the table-wide update counter, so every changed cell re-rendered the header through Rich
        (in a fault storm, rows come and go every tick: a tenth of memtop's CPU, py-spy)."""
        _, _, _, scroll_x, width, _, pad, _, _ = self._view()
        columns, widths = self._columns_now()
        labels = tuple(
            (c.key, c.label.plain, c.label.justify, c.label.style, tuple(c.label.spans)) for c in columns
        )
        hover = self.hover_coordinate if self.hover_cursor_shown and self.hover_coordinate.row < 0 else None
        header_style = self._per_style(
            "header", lambda: self.get_component_styles("datatable--header").rich_style
        )
        return (
            "header",
            y,
            labels,
            widths,
            scroll_x,
            width,
            pad,
            hover,
            self._per_frame("pseudo", self.get_pseudo_class_state),
            self._per_style("base", lambda: self.rich_style),
            header_style,
        )

    def _header_strip(self, y: int) -> Strip:
        return super().render_line(y)

    def _body_key(self, row_index: int) -> tuple[Any, ...] | None:
        """What the row at ``row_index`` shows, as a key (None: a row the fast path cannot draw)."""
        _, _, _, scroll_x, width, cursor_row, pad, hover_row, fixed = self._view()
        if row_index >= self.row_count:
            return ("blank", width, self._styles(0, False)[0])
        row_key = self.row_key_at(row_index)
        if row_key is None or self.rows[row_key].height != 1:
            return None
        columns, widths = self._columns_now()
        cells = self.row_values(row_key, self._per_frame("column keys", lambda: [c.key for c in columns]))
        texts: list[str] = []
        justify: list[str] = []
        # a cell's own style (a figure past its threshold, memtop/views/levels.py), drawn as
        # DataTable draws it: over the row's style, its padding not; spans are DataTable's to draw
        cell_styles: list[str | Style] = []
        for cell in cells:
            if isinstance(cell, Text):
                if cell.spans:
                    return None
                texts.append(cell.plain)
                justify.append(cell.justify or "left")
                cell_styles.append(cell.style)
            else:
                texts.append(str(cell))
                justify.append("left")
                cell_styles.append("")
        cursor = row_index == cursor_row
        base, row_style, component, post = self._styles(row_index, cursor, row_index == hover_row)
        return (
            "row",
            row_key,
            row_index,
            tuple(texts),
            tuple(justify),
            tuple(cell_styles),
            widths,
            scroll_x,
            width,
            row_style,
            component,
            post,
            base,
            pad,
            fixed,
        )

    def _body_strip(self, key: tuple[Any, ...]) -> Strip:
        """The line a ``_body_key`` describes."""
        if key[0] == "blank":
            return Strip.blank(key[1], key[2])
        (
            _,
            _,
            row_index,
            texts,
            justify,
            cell_styles,
            widths,
            scroll_x,
            width,
            row_style,
            component,
            post,
            base,
            pad,
            fixed,
        ) = key
        _, _, _, _, _, cursor_row, _, hover_row, _ = self._view()
        cursor = row_index == cursor_row
        style = row_style + component
        if fixed:
            hover = row_index == hover_row
            fixed_styles = self._per_style(
                ("fixed", cursor, hover, self._per_frame("flags", self._cell_flags)),
                lambda: self.fixed_cell_styles(cursor, hover),
            )
            fixed_style, fixed_post = fixed_styles[0] + fixed_styles[1], fixed_styles[2]
        segments: list[Segment] = []
        for col, (text, how, w, own) in enumerate(zip(texts, justify, widths, cell_styles, strict=False)):
            inner = max(0, w - 2 * pad)
            if cell_len(text) > inner:
                text = set_cell_size(text, max(0, inner - 1)) + "…" if inner else ""
            fill = " " * (inner - cell_len(text))
            body = fill + text if how == "right" else (text + fill)
            # a fixed column's own colour, as DataTable draws it
            pre, after = (fixed_style, fixed_post) if col < fixed else (style, post)
            plain, coloured = self._cell_styles(row_index, col, pre, after, own)
            if not own:
                segments.append(Segment(" " * pad + body + " " * pad, plain))
                continue
            if coloured == plain or not pad:  # one segment where the styles come out the same
                segments.append(Segment(" " * pad + body + " " * pad, coloured))
            else:
                segments += [Segment(" " * pad, plain), Segment(body, coloured), Segment(" " * pad, plain)]
        filler = scroll_x + width - sum(widths)
        if filler > 0:  # the row's colours (zebra, cursor) run to the right edge, as DataTable's do
            segments.append(Segment(" " * filler, style + post))
        line = Strip(segments)
        if fixed:
            # the fixed cells, then the rest of the line from where the scroll puts it
            fixed_width = sum(widths[:fixed])
            line = Strip.join(
                [line.crop(0, fixed_width), line.crop(scroll_x + fixed_width, scroll_x + width)]
            )
        else:
            line = line.crop(scroll_x, scroll_x + width)
        return line.adjust_cell_length(width, base)
