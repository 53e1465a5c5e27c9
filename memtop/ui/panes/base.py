"""Pane base: a widget that renders one view from state on the app's timer (never per event)."""

from __future__ import annotations

import operator
import sys
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.console import JustifyMethod
from rich.text import Text
from textual import events, on
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Input, Static
from textual.widgets.data_table import ColumnKey, RowKey

from memtop.state import State
from memtop.ui.levels import style as level_style
from memtop.ui.lines import segments_text
from memtop.ui.recplay import RecordReplay
from memtop.ui.table import FastTable
from memtop.views import Column, Options, View, get_view, stale_probes
from memtop.views.layout import Fit, RowWidths, Widest, cut, fit_columns, remeasured, widest_of
from memtop.views.segments import probe_line

#: a computed column's cell: what it shows for a row (fill_table's ``extra``)
Cell = Callable[[Mapping[str, Any]], object]


class DrillIn(Message):
    """Ask the app to open the process drill-in screen for ``pid`` (Enter on any pid row)."""

    def __init__(self, pid: int) -> None:
        super().__init__()
        self.pid = pid


class TraceAllocations(Message):
    """Ask the app to trace ``pid``'s allocations and show the leaks pane (the drill-in's `m`)."""

    def __init__(self, pid: int) -> None:
        super().__init__()
        self.pid = pid


class ChooseTracing(Message):
    """The user's answer to the leaks preflight (the leaks pane's `e`, `S`, `B`, `n`): trace
    ``pids`` with ``sample_bytes`` (0: every allocation), in windows on ``budget`` (a share of a
    core; 0: all the time), or not at all (``sample_bytes`` None)."""

    def __init__(self, pids: tuple[int, ...], sample_bytes: int | None, budget: float = 0.0) -> None:
        super().__init__()
        self.pids = pids
        self.sample_bytes = sample_bytes
        self.budget = budget


class Pane(Vertical):
    """Subclasses set ``view_name``; the view's ``order`` places the pane's tab (and number key)."""

    view_name: ClassVar[str] = ""
    #: its probes run only when asked (the leaks pane says how to ask): not running is no news
    quiet_when_absent: ClassVar[bool] = False
    registry: ClassVar[list[type[Pane]]] = []
    #: what Enter does on a row, for the help ("" when nothing)
    enter_help: ClassVar[str] = ""

    @classmethod
    def help_entries(cls) -> list[tuple[str, str]]:
        """The help's entries for keys the pane's widgets handle (not in its bindings)."""
        out = [("↑ ↓ PgUp PgDn", "move")]
        if cls.enter_help:
            out.append(("Enter", cls.enter_help))
        return out

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.view_name and cls not in Pane.registry:
            Pane.registry.append(cls)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.view: View[Any] = get_view(self.view_name)
        self.opts = self.view.default_options()

    @property
    def title(self) -> str:
        return self.view.title

    @property
    def probes(self) -> tuple[str, ...]:
        """The probes that feed this pane (declared once, on its view); their status shows in the
        pane's status line."""
        return self.view.probes

    def on_show(self, _event: events.Show) -> None:
        self._while_shown(True)

    def on_hide(self, _event: events.Hide) -> None:
        self._while_shown(False)

    def _while_shown(self, on: bool) -> None:
        """The view's while-shown tracers attach when the pane shows and detach when it hides (a
        live source: a replay holds what was traced when it was recorded)."""
        app = self.app
        if not isinstance(app, RecordReplay) or app.replay is not None:
            return  # a widget test's bare app, or a replay
        src = app.runner.source
        for tracer in self.view.while_shown:
            src.trace_kernel(tracer, on)

    def refresh_from(self, state: State) -> None:
        """Redraw from state; called on the app's timer when this pane is visible."""

    def _redraw(self) -> None:
        """Redraw from the last state at once (a key changed how the pane shows it)."""

    def focus_default(self) -> None:
        """Give the keyboard to the pane's main table so its keys work at once."""
        tables = self.query(DataTable)
        if tables:
            tables.first().focus()

    def options(self) -> Options:
        return self.opts

    def status_text(self, state: State) -> Text:
        """One line: what feeds this pane and whether it is attached, erroring, failed (the
        view's sentence, memtop/views/segments.py). Past two ticks without a reading from one of
        its probes the pane's figures grey (class ``stale``): they are that probe's last reading."""
        self.set_class(bool(stale_probes(state, self.probes)), "stale")
        return segments_text(probe_line(self.view, state, quiet_when_absent=self.quiet_when_absent))


@dataclass
class TableMemo:
    """What fill_table last put in a table: each row's cells as plain strings, the row dict they
    came from, and the order of the keys (fill_table is a table's only writer)."""

    shown: dict[str, list[str]] = field(default_factory=dict)
    rows: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    #: the columns shown and the widths names are cut to: when they change, the table is rebuilt
    layout: tuple[tuple[str, ...], tuple[tuple[str, int], ...]] | None = None
    #: the rows last given, the keys made of them, and the fit of the columns for them (with
    #: what else it depends on): the same row objects again need neither measured nor keyed
    given: list[Mapping[str, Any]] = field(default_factory=list)
    given_ids: set[int] = field(default_factory=set)
    given_keys: list[str] = field(default_factory=list)
    fit: tuple[tuple[Any, ...], Fit] | None = None
    #: each row's measured cell widths (memtop.views.layout.measured_widths), and the widest of
    #: them by column, which the last fit was made for
    widths: RowWidths = field(default_factory=dict)
    widest: Widest | None = None
    #: the cells of a FastTable by (text, justify, style), one Text shared by every cell that
    #: shows the same: with 1,000 processes most cells repeat ("0", "sleep", "root", the same
    #: RSS), and a Text of its own per cell was ~3 KiB a row (bench/self_memory.py). Nothing
    #: edits a cell's Text in place (a change is a new cell), so sharing one cannot change what
    #: another shows. Those written by this fill and by the one before: a cache of every value
    #: ever shown cost as much as the sharing saved once the figures had moved for a minute.
    texts: dict[tuple[str, JustifyMethod, str], Text] = field(default_factory=dict)
    texts_before: dict[tuple[str, JustifyMethod, str], Text] = field(default_factory=dict)
    #: per column, what mark_sort last checked its label for and the label it left there
    marked: dict[str, tuple[tuple[Any, ...], Text]] = field(default_factory=dict)


_MEMOS: weakref.WeakKeyDictionary[DataTable[Any], TableMemo] = weakref.WeakKeyDictionary()


def cursor_key(table: DataTable[Any]) -> str | None:
    """The key of the row under the table's cursor (None for an empty table or no row there)."""
    if not table.row_count or table.cursor_row >= table.row_count:
        return None
    try:
        return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
    except Exception:  # noqa: BLE001 - no row under the cursor
        return None


def fill_table(
    table: DataTable[Any],
    columns: tuple[Column[str], ...],
    rows: Sequence[Mapping[str, Any]],
    key: str,
    extra: dict[str, Cell] | None = None,
    extra_same: Callable[[Mapping[str, Any]], bool] | None = None,
    sort: tuple[str, bool] | None = None,
    edits: int | None = None,
    extra_priority: int = 0,
) -> None:
    """Update ``table`` in place by stable row key (``row[key]``): cells change where values
    changed; rows are rebuilt only when the set or order of keys changed. The cursor stays on the
    same key. Every cell is a ``Text`` so traced-system strings are never parsed as markup.
    ``extra`` adds computed columns (of ``extra_priority``); ``extra_same(row)`` may tell that
    they cannot have changed for a row object shown last time (then they are not computed).
    ``edits``: how many rows may come and go before the table is rebuilt rather than edited
    (default: a quarter of its rows, at least 32). The columns shown are those that fit the
    table's width (memtop/views/layout.py): a change of width or sort may rebuild them."""
    memo = _MEMOS.get(table)
    if memo is None:
        memo = _MEMOS[table] = TableMemo()
    if _unchanged(table, columns, rows, extra, extra_same, sort, extra_priority, memo):
        return
    selected = cursor_key(table)
    # the positions whose row object is not the one given there last time (views hand unchanged
    # rows on): None when as many rows did not come; none at all, the keys and widths are what
    # they were, so only a new width, sort or set of columns fits the columns again
    given = memo.given
    moved = (
        list(compress(range(len(rows)), map(operator.is_not, rows, given)))
        if len(rows) == len(given)
        else None
    )
    same = moved is not None and not moved
    # the rows given now that were not given last time and the ids of those given then and not
    # now (None: a row object listed twice, which identity cannot tell apart): rows that only
    # moved (a re-sort) or stayed are neither measured nor compared again
    change: tuple[list[Mapping[str, Any]], list[int]] | None = ([], [])
    if not same:
        ids = set(map(id, rows))
        if len(ids) == len(rows) and len(memo.given_ids) == len(given):
            came = ids - memo.given_ids
            change = ([r for r in rows if id(r) in came] if came else [], list(memo.given_ids - ids))
        else:
            change = None
        memo.given_ids = ids
    fit = _fit(table, columns, rows, extra or {}, extra_priority, sort, memo, change)
    layout = (fit.keys, tuple(sorted(fit.cut_to.items())))
    if memo.layout != layout:
        if table.columns:  # another width or sort: the columns anew, then every row
            table.clear(columns=True)
            memo.shown.clear()
            memo.rows.clear()
            memo.keys = []
        memo.layout = layout
    shown = tuple(c for c in fit.columns if c.key not in (extra or {}))
    shown_extra = {k: fn for k, fn in (extra or {}).items() if k in fit.keys}
    if not table.columns:
        for c in shown:
            table.add_column(Text(c.label, justify="right" if c.numeric else "left"), key=c.key)
        for name in shown_extra:
            table.add_column(Text(name), key=name)
    if sort is not None:
        mark_sort(table, shown, *sort, memo=memo)
    filler = _Filler(table, shown, shown_extra, extra_same, memo, fit.cut_to)

    # a row replaced by one of the same key in its place (a process whose figures moved) leaves
    # the keys as they were: with 1,000 rows, keying them all again was a tenth of a fill
    given_keys = memo.given_keys
    keep = same or (moved is not None and all(str(rows[i][key]) == given_keys[i] for i in moved))
    new_keys = given_keys if keep else _unique_keys(rows, key)
    memo.given, memo.given_keys = list(rows), new_keys
    # the order this function left the table in (it is the table's only writer); read it back
    # from the table only when something else changed it (building 1,000 keys costs a tick)
    old_keys = memo.keys
    if len(old_keys) != table.row_count:
        old_keys = [str(r.key.value) for r in table.ordered_rows]
    if new_keys is old_keys:  # the same keys in the same order: none came, went or moved
        new_set: Collection[str] = new_keys
        gone: list[str] = []
        added: list[str] = []
    else:
        new_set = set(new_keys)
        old_set = set(old_keys)
        gone = [k for k in old_keys if k not in new_set]
        added = [k for k in new_keys if k not in old_set]
    if not old_keys and not new_keys:
        # empty and still empty (no exited process, no reclaim episode): rebuilding cleared the
        # table, which repainted every line of it every tick (the Processes pane's "Recently
        # exited", 9 of the ~11 lines an idle tick drew)
        pass
    elif old_keys and len(gone) + len(added) <= (max(32, len(new_keys) // 4) if edits is None else edits):
        # a few rows came or went, or the order moved: edit in place (a full rebuild re-measures
        # every row, which with 1,000 processes costs more than everything else in a tick)
        filler.edit(rows, new_keys, gone)
        # removed rows left a gap, added rows went to the end: re-sort only if that is not the order
        now = [k for k in old_keys if k in new_set] + added if gone or added else old_keys
        if now != new_keys:
            _reorder(table, new_keys)
    else:
        filler.rebuild(rows, new_keys)
    memo.keys = new_keys
    if selected is not None and selected in new_set:
        index = new_keys.index(selected)
        if index != table.cursor_row:
            table.move_cursor(row=index, animate=False)


def _unchanged(
    table: DataTable[Any],
    columns: tuple[Column[str], ...],
    rows: Sequence[Mapping[str, Any]],
    extra: dict[str, Cell] | None,
    extra_same: Callable[[Mapping[str, Any]], bool] | None,
    sort: tuple[str, bool] | None,
    extra_priority: int,
    memo: TableMemo,
) -> bool:
    """Whether a fill would find nothing to do: the very row objects given last time, in the
    same order (their keys, cells and widths are what the table shows), their computed cells
    unchanged, the same width, sort and columns, and the table as the last fill left it. Only the
    sort mark is checked again (a column widened since may now have room for its arrow). On an
    idle tick that is the "Recently exited" table every tick, and the process table whenever no
    process moved: keying, fitting and comparing them found what this finds at once."""
    last = memo.fit
    given = memo.given
    if (
        last is None
        or len(rows) != len(given)
        or not table.columns
        or len(memo.keys) != table.row_count
        or last[0] != _fit_key(table, columns, extra or {}, extra_priority, sort)
        or not all(map(operator.is_, rows, given))
    ):
        return False
    if extra and (extra_same is None or not all(map(extra_same, rows))):
        return False
    if sort is not None:
        mark_sort(table, tuple(c for c in last[1].columns if c.key not in (extra or {})), *sort, memo=memo)
    if isinstance(table, FastTable):
        # the cells kept for sharing are those of the last two fills, as a filler keeps them
        memo.texts_before, memo.texts = memo.texts, {}
    return True


def _fit_key(
    table: DataTable[Any],
    columns: tuple[Column[str], ...],
    extra: dict[str, Cell],
    extra_priority: int,
    sort: tuple[str, bool] | None,
) -> tuple[Any, ...]:
    """What a fit of the columns depends on besides the rows: the table's width (before the
    first layout: the terminal's), its vertical scrollbar's room kept whether shown or not, the
    sort column, the columns and the computed columns."""
    width = (table.size.width or table.app.size.width) - table.styles.scrollbar_size_vertical
    return (width, sort[0] if sort else "", columns, tuple(extra), extra_priority)


def _fit(
    table: DataTable[Any],
    columns: tuple[Column[str], ...],
    rows: Sequence[Mapping[str, Any]],
    extra: dict[str, Cell],
    extra_priority: int,
    sort: tuple[str, bool] | None,
    memo: TableMemo,
    change: tuple[list[Mapping[str, Any]], list[int]] | None,
) -> Fit:
    """The columns of ``columns`` and ``extra`` that fit the table's width (before the first
    layout: the terminal's), its vertical scrollbar's room kept whether shown or not (the columns
    do not change as rows come and go). ``change``: the row objects given now and not by the
    last call, and the ids of those given then and not now (None: not known). With none, the
    last fit holds unless the width, the sort or the columns changed; else only the rows that
    came are measured, and the fit is made again only when the widest cell of a column changed."""
    key = _fit_key(table, columns, extra, extra_priority, sort)
    width = key[0]
    last = memo.fit
    if last is not None and last[0] == key and change is not None and not change[0] and not change[1]:
        return last[1]
    every = columns + tuple(
        Column(name, name, numeric=False, width=cell_len(name) + 1, priority=extra_priority) for name in extra
    )
    if width <= 0:
        fit = Fit(every, {})
        memo.widest = None
    else:
        before, widest = memo.widest, None
        if last is not None and last[0] == key and change is not None and before is not None:
            widest = remeasured(columns, *change, memo.widths, before)
        if widest is None:
            widest = widest_of(columns, rows, memo.widths)
        memo.widest = widest
        if last is not None and last[0] == key and before is not None and widest.widths == before.widths:
            return last[1]  # no column's widest cell changed: neither does the fit
        fit = fit_columns(every, widest.widths, width, sort[0] if sort else "")
    memo.fit = (key, fit)
    return fit


def _unique_keys(rows: Sequence[Mapping[str, Any]], key: str) -> list[str]:
    """Each row's key as a string; keys must be unique in a DataTable, so a repeated key gets a
    suffix (``k#1``, ``k#2`` …)."""
    out = [str(r[key]) for r in rows]
    if len(set(out)) == len(out):  # the usual case (pids): nothing to count, in C
        return out
    seen: dict[str, int] = {}
    for i, k in enumerate(out):
        n = seen.get(k, 0)
        seen[k] = n + 1
        if n:
            out[i] = f"{k}#{n}"
    return out


class _Filler:
    """One fill of a table: the cells each row shows, as plain strings compared with what the
    memo says is shown, and the writes to the table where they differ."""

    def __init__(
        self,
        table: DataTable[Any],
        columns: tuple[Column[str], ...],
        extra: dict[str, Cell],
        extra_same: Callable[[Mapping[str, Any]], bool] | None,
        memo: TableMemo,
        cut_to: dict[str, int],
    ) -> None:
        self.table = table
        self.columns = columns
        self.extra = extra
        self.extra_same = extra_same
        self.memo = memo
        self.justify: list[JustifyMethod] = ["right" if c.numeric else "left" for c in columns]
        self.justify += ["left"] * len(extra)
        self.graded = {i for i, c in enumerate(columns) if c.level}
        self.col_keys = [c.key for c in columns] + list(extra)
        #: the name columns cut to a width, by position
        self.cut_to = [(i, cut_to[c.key]) for i, c in enumerate(columns) if c.key in cut_to]
        #: equal cells share one Text (FastTable only: a DataTable's rows are reordered by the
        #: identity of their first cell, _reorder)
        self.shared: dict[tuple[str, JustifyMethod, str], Text] | None = None
        if isinstance(table, FastTable):
            memo.texts_before, memo.texts = memo.texts, {}
            self.shared, self.before = memo.texts, memo.texts_before

    def cells_for(self, row: Mapping[str, Any], k: str) -> list[str]:
        """What row ``k`` shows now, as plain strings: cells that did not change are not touched
        (with 1,000 idle processes nearly nothing changes, and update_cell is what costs); a row
        dict that is the very object shown last time (views reuse unchanged rows) is not even
        re-formatted."""
        old = self.memo.shown.get(k)
        if old is not None and self.memo.rows.get(k) is row:
            if self.extra_same is not None and self.extra_same(row):
                return old
            ex = [str(fn(row)) for fn in self.extra.values()]
            if old[len(self.columns) :] == ex:
                return old
        else:
            ex = [str(fn(row)) for fn in self.extra.values()]
        self.memo.rows[k] = row
        # interned: the memo keeps every row's cells, most of which repeat across rows
        cells = [sys.intern(c.cell(row)) for c in self.columns]
        for i, w in self.cut_to:
            cells[i] = cut(cells[i], w)
        return cells + ex

    def as_text(self, i: int, value: str, row: Mapping[str, Any]) -> Text:
        style = ""
        if i in self.graded:
            # a figure past its threshold (memtop/views/levels.py) is coloured
            lvl = self.columns[i].level_of(row)
            if lvl:
                style = level_style(lvl)
        justify = self.justify[i]
        shared = self.shared
        if shared is None:
            return Text(value, justify=justify, style=style)
        key = (value, justify, style)
        text = shared.get(key)
        if text is None:
            text = self.before.get(key)
            if text is None:
                text = Text(value, justify=justify, style=style)
            shared[key] = text
        return text

    def texts(self, plain: list[str], row: Mapping[str, Any]) -> list[Text]:
        return [self.as_text(i, v, row) for i, v in enumerate(plain)]

    def edit(self, rows: Sequence[Mapping[str, Any]], keys: list[str], gone: list[str]) -> None:
        """Remove the rows ``gone``, update the cells that changed, add the new rows at the end."""
        table, shown = self.table, self.memo.shown
        if isinstance(table, FastTable):  # all at once
            table.remove_rows([RowKey(k) for k in gone])
        else:
            for k in gone:
                table.remove_row(k)
        for k in gone:
            shown.pop(k, None)
            self.memo.rows.pop(k, None)
        new_rows: list[tuple[str, list[Text]]] = []
        drawn_from, extra, extra_same = self.memo.rows, self.extra, self.extra_same
        for r, k in zip(rows, keys, strict=True):
            if (
                drawn_from.get(k) is r
                and k in shown
                and (not extra or (extra_same is not None and extra_same(r)))
            ):
                # the very row drawn there, its computed cells unchanged: what cells_for would
                # say without the call (with 1,000 idle rows most of a fill)
                continue
            plain = self.cells_for(r, k)
            old = shown.get(k)
            if old == plain:
                continue
            if old is None:
                new_rows.append((k, self.texts(plain, r)))
            else:
                self.update_cells(k, old, plain, r)
            shown[k] = plain
        self.add_rows(new_rows)

    def update_cells(self, k: str, old: list[str], plain: list[str], row: Mapping[str, Any]) -> None:
        changed: list[tuple[str, Text, bool]] = []
        for i, ck in enumerate(self.col_keys):
            if old[i] != plain[i]:
                # a wider value widens its column (measuring only when it must: DataTable
                # re-measures the whole column when a value gets narrower)
                col = self.table.columns.get(ColumnKey(ck))
                grow = col is not None and cell_len(plain[i]) > col.content_width
                changed.append((ck, self.as_text(i, plain[i], row), grow))
        if isinstance(self.table, FastTable):  # the row repainted once for all its cells
            self.table.update_row(k, changed)
            return
        for ck, text, grow in changed:
            self.table.update_cell(k, ck, text, update_width=grow)

    def rebuild(self, rows: Sequence[Mapping[str, Any]], keys: list[str]) -> None:
        """Every row anew, in order."""
        self.table.clear()
        self.memo.shown.clear()
        self.memo.rows.clear()
        items = []
        for r, k in zip(rows, keys, strict=True):
            plain = self.cells_for(r, k)
            items.append((k, self.texts(plain, r)))
            self.memo.shown[k] = plain
        self.add_rows(items)

    def add_rows(self, items: list[tuple[str, list[Text]]]) -> None:
        if isinstance(self.table, FastTable):  # all at once
            self.table.add_keyed_rows(items)
        else:
            for k, cells in items:
                self.table.add_row(*cells, key=k)


def mark_sort(
    table: DataTable[Any],
    columns: tuple[Column[str], ...],
    key: str,
    reverse: bool,
    memo: TableMemo | None = None,
) -> None:
    """Mark the sort column in the header, as htop does: its label underlined, with ▼ (largest
    first) or ▲ when the column is wide enough for it (a column is never widened for the mark).
    ``memo``: a column whose label is the one checked last time for the same mark and width is
    not checked again (every tick built each column's label to find it the same)."""
    marked = memo.marked if memo is not None else {}
    for c in columns:
        col = table.columns.get(ColumnKey(c.key))
        if col is None:
            continue
        sig = (c.label, c.numeric, c.key == key, reverse, col.content_width)
        last = marked.get(c.key)
        if last is not None and last[0] == sig and last[1] is col.label:
            continue
        want = Text(c.label, justify="right" if c.numeric else "left")
        if c.key == key:
            arrow = " ▼" if reverse else " ▲"
            if col.content_width >= cell_len(c.label + arrow):
                want = Text(c.label + arrow, justify=want.justify)
            want.stylize("underline")
        if col.label.plain != want.plain or col.label.spans != want.spans:
            col.label = want
            table.refresh()
        marked[c.key] = (sig, col.label)


def _reorder(table: DataTable[Any], keys: list[str]) -> None:
    """Put the rows of ``table`` in the order of ``keys``: FastTable sets the order directly; a
    DataTable sorts, its key function seeing only a row's cells, so rows are told apart by the
    identity of their first cell."""
    if isinstance(table, FastTable):
        table.order_rows(keys)
        return
    where = {id(table.get_row(k)[0]): i for i, k in enumerate(keys)}
    table.sort(key=lambda cells: where.get(id(cells[0]), len(where)))


class StatusLine(Static):
    pass


class FilterablePane(Pane):
    """A pane with a filter box under its status line: `/` opens it (typing filters at once, Enter
    keeps the filter, Esc clears it). The box is built the first time `/` is pressed: a hidden
    Input in the pane from the start cost CPU before the first frame. Subclasses set
    ``filter_hint`` and have a StatusLine."""

    filter_hint: ClassVar[str] = ""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter", tooltip="filter the rows (Enter keeps it)"),
        Binding(
            "f3", "filter", "Filter", show=False, tooltip="filter the rows (Enter keeps it)"
        ),  # htop's search key
        Binding("escape", "clear_filter", "Clear filter", show=False, tooltip="clear the filter"),
    ]

    @property
    def filter_id(self) -> str:
        return f"{self.view_name}-filter"

    def _filter_boxes(self) -> list[Input]:
        return list(self.query(f"#{self.filter_id}").results(Input))

    async def action_filter(self) -> None:
        boxes = self._filter_boxes()
        if boxes:
            box = boxes[0]
        else:
            box = Input(placeholder=self.filter_hint, id=self.filter_id)
            await self.mount(box, after=self.query_one(StatusLine))
        box.remove_class("hidden")
        box.value = self.opts.filter
        box.focus()

    def action_clear_filter(self) -> None:
        for box in self._filter_boxes():
            box.value = ""
            box.add_class("hidden")
        self.opts.filter = ""
        self.focus_default()
        self._redraw()

    @on(Input.Submitted)
    def _filter_done(self, event: Input.Submitted) -> None:
        if event.input.id != self.filter_id:
            return
        self.opts.filter = event.value.strip()
        # the box gives its rows back (the status line shows the filter; `/` opens it again)
        event.input.add_class("hidden")
        self.focus_default()
        self._redraw()
        # the first match takes the cursor
        for table in self.query(DataTable):
            if table.row_count:
                table.move_cursor(row=0, animate=False)
            break

    @on(Input.Changed)
    def _filter_live(self, event: Input.Changed) -> None:
        if event.input.id != self.filter_id:
            return
        self.opts.filter = event.value.strip()
        self._redraw()


class SortableTablePane(Pane):
    """A pane whose main DataTable sorts by column: `<`/`>` step through ``sort_keys``, a header
    click or a letter binding sorts by that column (again: reverse), `r` reverses, `j`/`k` move.
    Subclasses set ``table_id``, ``sort_keys`` and ``default_sort``, and add their own bindings;
    ``refresh_from`` must store the state in ``self._state`` so a key redraws at once."""

    table_id: ClassVar[str] = ""
    sort_keys: ClassVar[tuple[str, ...]] = ()
    default_sort: ClassVar[str] = ""
    #: columns that sort ascending on first press (names, pids); numbers sort largest first
    ascending: ClassVar[tuple[str, ...]] = ("pid", "user", "comm")

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("less_than_sign", "sort(-1)", "Sort ←", show=False, tooltip="sort by the previous column"),
        Binding("greater_than_sign", "sort(1)", "Sort →", tooltip="sort by the next column"),
        Binding("r", "reverse", "Reverse", tooltip="reverse the sort"),
        Binding("j", "cursor(1)", "Down", show=False, tooltip="move"),
        Binding("k", "cursor(-1)", "Up", show=False, tooltip="move"),
        # htop's habits: I inverts the sort, F6 moves it, Home / End go to the first / last row
        Binding("I", "reverse", "Reverse", show=False, tooltip="reverse the sort"),
        Binding("f6", "sort(1)", "Sort →", show=False, tooltip="sort by the next column"),
        Binding("home", "cursor_end(0)", "First", show=False, priority=True, tooltip="first row"),
        Binding("end", "cursor_end(1)", "Last", show=False, priority=True, tooltip="last row"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.opts.sort = self.default_sort
        self._state: State | None = None

    def table(self) -> DataTable[Any]:
        return self.query_one(f"#{self.table_id}", DataTable)

    def focus_default(self) -> None:
        self.table().focus()

    def _redraw(self) -> None:
        if self._state is not None:
            self.refresh_from(self._state)

    def _resorted(self) -> None:
        """Redraw in the new order and show its top: the cursor on the first row, the table
        scrolled home (a cursor kept on its row could leave the new top off screen)."""
        self._redraw()
        table = self.table()
        if table.row_count:
            table.move_cursor(row=0, column=0, animate=False)
        table.scroll_home(animate=False, immediate=True)

    def action_sort(self, step: int) -> None:
        keys = list(self.sort_keys)
        cur = keys.index(self.opts.sort) if self.opts.sort in keys else keys.index(self.default_sort)
        self.opts.sort = keys[(cur + step) % len(keys)]
        self._resorted()

    def action_sort_by(self, key: str) -> None:
        if self.opts.sort == key:
            self.opts.reverse = not self.opts.reverse
        else:
            self.opts.sort, self.opts.reverse = key, key not in self.ascending
        self._resorted()

    def action_reverse(self) -> None:
        self.opts.reverse = not self.opts.reverse
        self._resorted()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Home / End move the text cursor while a text field (the filter) has the keyboard
        return not (action == "cursor_end" and isinstance(self.app.focused, Input))

    def action_cursor_end(self, last: int) -> None:
        table = self.table()
        if table.row_count:
            table.move_cursor(row=table.row_count - 1 if last else 0, animate=False)

    def action_cursor(self, step: int) -> None:
        table = self.table()
        table.move_cursor(row=max(0, table.cursor_row + step))

    @on(DataTable.HeaderSelected)
    def _header_sort(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        if event.data_table.id == self.table_id and key in self.sort_keys:
            self.action_sort_by(key)
