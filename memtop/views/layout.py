"""How a table fits a terminal: which columns a pane shows at a given width, and how far a name
column is cut. Pure Python (no Textual): the TUI's tables ask it on every redraw.

Each :class:`~memtop.views.Column` has a ``priority`` (0: always shown; higher: dropped sooner)
and, for a name, a ``min_width`` it may be cut to (an ellipsis marks the cut). A column is shown
whole or not at all: a figure never loses its unit at the screen's edge (``+384K``, never
``+384``), and the column the table is sorted by is always on screen.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memtop.core import fmt
from memtop.views import Column

#: a table cell's padding, one column either side (DataTable's cell_padding)
PAD = 2
#: the sort mark after a column's label (" ▼")
SORT_MARK = 2
#: columns of at least this priority drop before a name is cut: a name cut to keep the least
#: useful figures is a bad trade
CUT_NAMES_FROM = 3

#: the widest cell each formatter writes for the figures memtop sees (bytes below 1000 T,
#: counts below 10 M, times below 1000 s): a column's width is known before its rows are
_FORMAT_WIDTHS = {
    fmt.bytes_h: 6,
    fmt.count_h: 6,
    fmt.count: 7,
    fmt.ns_h: 8,
    fmt.ns_total: 8,
    fmt.pct: 6,
}


@dataclass(frozen=True, slots=True)
class Fit:
    """The columns shown, in the view's order, and the width a name column is cut to (those
    not named are shown whole)."""

    columns: tuple[Column[str], ...]
    cut_to: dict[str, int]

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.columns)


def natural_width(col: Column[str], names: dict[str, int], sort_key: str) -> int:
    """The cells' width of ``col`` without cutting: its label (with the sort mark when it is the
    sort column), its declared width, what its formatter writes, the widest name measured."""
    label = cell_len(col.label) + (SORT_MARK if col.key == sort_key else 0)
    return max(label, col.width, _FORMAT_WIDTHS.get(col.fmt, 0), names.get(col.key, 0))


#: per row object (by id, the row kept alive beside it so the id is not reused): the widths of
#: its measured cells, as :func:`measured_widths` last computed them
RowWidths = dict[int, tuple[Mapping[str, Any], tuple[int, ...]]]


def measured_widths(
    columns: tuple[Column[str], ...], rows: Sequence[Mapping[str, Any]], known: RowWidths | None = None
) -> dict[str, int]:
    """The widest cell in ``rows`` of each column whose width is not known beforehand: names, and
    figures with no declared width nor a formatter of known width (pids). ``known``: the widths
    of the rows measured last time, reused for the very same row objects (views hand unchanged
    rows on as they were: with 1,000 idle processes, formatting each cell of each row every tick
    to measure it was most of a table's redraw), and replaced by this call's."""
    measured = [c for c in columns if not (c.numeric and (c.width or c.fmt in _FORMAT_WIDTHS))]
    if known is None:
        return {c.key: max((cell_len(c.cell(r)) for r in rows), default=0) for c in measured}
    fresh: RowWidths = {}
    for r in rows:
        hit = known.get(id(r))
        if hit is None or hit[0] is not r:
            hit = (r, tuple(cell_len(c.cell(r)) for c in measured))
        fresh[id(r)] = hit
    known.clear()
    known.update(fresh)
    widest = [max(col) for col in zip(*(w for _, w in fresh.values()), strict=True)] if fresh else []
    return {c.key: widest[i] if widest else 0 for i, c in enumerate(measured)}


@dataclass(slots=True)
class Widest:
    """The widest measured cell of each column (:func:`measured_widths`) and how many rows have
    it (at least: a row object listed twice counts once): a row replaced that was not the only
    one that wide leaves the column as wide."""

    widths: dict[str, int]
    count: list[int]


def widest_of(
    columns: tuple[Column[str], ...], rows: Sequence[Mapping[str, Any]], known: RowWidths
) -> Widest:
    """:func:`measured_widths` of ``rows`` (``known`` updated), with how many rows are that wide."""
    widths = measured_widths(columns, rows, known)
    top = list(widths.values())
    cols = list(zip(*(w for _, w in known.values()), strict=True)) if known else []
    count = [col.count(t) for t, col in zip(top, cols, strict=True)] if cols else [0] * len(top)
    return Widest(widths, count)


def remeasured(
    columns: tuple[Column[str], ...],
    came: Sequence[Mapping[str, Any]],
    went: Sequence[int],
    known: RowWidths,
    widest: Widest,
) -> Widest | None:
    """What :func:`widest_of` gives for the rows measured last time (their widths ``known``, their
    widest cells ``widest``) less those whose ids are ``went``, with the rows ``came``: only the
    rows that came are measured, and ``known`` is kept as widest_of keeps it. None when that
    cannot tell (every row that was the widest of a column went and none as wide came, or a row
    is not known): then measure them all (``known`` stays a good cache). With 1,000 idle
    processes, measuring every row for the one whose figures moved was a fifth of a table's fill."""
    measured = [c for c in columns if not (c.numeric and (c.width or c.fmt in _FORMAT_WIDTHS))]
    if [c.key for c in measured] != list(widest.widths):
        return None
    top, count = list(widest.widths.values()), list(widest.count)
    if any(rid not in known for rid in went) or any(id(r) in known for r in came):
        return None
    # the rows that came first: a row replaced by one as wide (the widest process, memtop
    # itself often, whose figures moved) leaves its column as wide, which taking the row that
    # went first could not tell (every row was measured again nearly every idle tick)
    for r in came:
        widths = tuple(cell_len(c.cell(r)) for c in measured)
        known[id(r)] = (r, widths)
        for c, w in enumerate(widths):
            if w > top[c]:
                top[c], count[c] = w, 1
            elif w == top[c]:
                count[c] += 1
    for rid in went:
        for c, w in enumerate(known.pop(rid)[1]):
            if w == top[c]:
                count[c] -= 1
                if not count[c]:  # the widest gone: the next widest is among the rows kept
                    return None
    return Widest(dict(zip(widest.widths, top, strict=True)), count)


def fit_columns(
    columns: tuple[Column[str], ...], names: dict[str, int], width: int, sort_key: str = ""
) -> Fit:
    """The columns that fit ``width`` cells: the lowest priority (the rightmost of equals) drops
    first, never the sort column nor one of priority 0; before a column of priority below
    :data:`CUT_NAMES_FROM` drops, the name columns are cut toward their ``min_width``. When even
    the columns that must stay do not fit, they are all shown (the table scrolls)."""
    natural = {c.key: natural_width(c, names, sort_key) for c in columns}
    shown = list(columns)
    while True:
        need = sum(natural[c.key] + PAD for c in shown)
        if need <= width:
            return Fit(tuple(shown), {})
        droppable = [(c.priority, i) for i, c in enumerate(shown) if c.priority > 0 and c.key != sort_key]
        slack = {
            c.key: natural[c.key] - max(c.min_width, cell_len(c.label))
            for c in shown
            if c.min_width and not c.numeric and natural[c.key] > max(c.min_width, cell_len(c.label))
        }
        worst = shown[max(droppable)[1]] if droppable else None
        if (worst is None or worst.priority < CUT_NAMES_FROM) and need - sum(slack.values()) <= width:
            return Fit(tuple(shown), _cut(slack, natural, need - width))
        if worst is None:
            return Fit(tuple(shown), {})
        shown.remove(worst)


def _cut(slack: dict[str, int], natural: dict[str, int], excess: int) -> dict[str, int]:
    """Take ``excess`` cells from the name columns, the one with the most to spare first."""
    out: dict[str, int] = {}
    for key in sorted(slack, key=lambda k: -slack[k]):
        if excess <= 0:
            break
        take = min(slack[key], excess)
        out[key] = natural[key] - take
        excess -= take
    return out


def cell_len(text: str) -> int:
    """The terminal cells ``text`` takes: wide (CJK) characters two, combining marks none (as
    the terminal and Rich count them; views do not import Rich)."""
    if text.isascii():
        return len(text)
    return _wide_cell_len(text)


@functools.lru_cache(maxsize=4096)
def _wide_cell_len(text: str) -> int:
    """cell_len of a text that is not ASCII, remembered: the same few recur every tick (the
    sparklines' block characters, ▼, names with an ellipsis), ~3.4 µs each by the character."""
    n = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def cut(text: str, width: int) -> str:
    """``text`` in ``width`` cells at most, an ellipsis marking where it was cut."""
    if cell_len(text) <= width:
        return text
    out = ""
    for ch in text:
        if cell_len(out + ch) > width - 1:
            break
        out += ch
    return out + "…"


#: the longest name a cgroup's row shows (a 64-hex container id is cut in the middle)
NAME_CELLS = 24


def cut_middle(name: str, cells: int = NAME_CELLS) -> str:
    """``name`` at most ``cells`` long: its two ends around an ellipsis (an id's ends tell ids
    apart). Here, not in the cgroups view, so the Processes view's CGROUP column does not import
    that view (and the page cache's) into every TUI."""
    if len(name) <= cells:
        return name
    half = (cells - 1) // 2
    return name[:half] + "…" + name[-(cells - 1 - half) :]
