"""Line charts that read at a glance (issue 22, item 2): the legend outside the plot (a line of
coloured names above it, so no legend box covers the data), y ticks in units (145k, 1.2G: SI, or
bytes), and colours chosen here so the legend and the lines agree."""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rich.text import Text
from textual.geometry import Size


class Chart(Protocol):
    """What ``draw`` needs of a chart: memtop.ui.plot.Chart (not imported here: plotext is slow
    to import, and loads only where a chart is shown)."""

    #: seconds of CPU its last build took
    build_s: float

    @property
    def plt(self) -> Any: ...

    @property
    def size(self) -> Size: ...

    def data_changed(self) -> None: ...


#: (plotext colour, Rich colour) per series, in order: the same hue in the plot and its legend.
#: True colours (Okabe and Ito's palette, told apart with every kind of colour vision), not the
#: terminal's named ones: Textual's theme maps ANSI red and magenta to one crimson, so a cgroup's
#: anon and swap lines were drawn, and named in the legend, in one colour.
PALETTE_RGB = (
    (0x56, 0xB4, 0xE9),  # sky blue
    (0xD5, 0x5E, 0x00),  # vermilion
    (0x00, 0x9E, 0x73),  # bluish green
    (0xCC, 0x79, 0xA7),  # reddish purple
    (0xF0, 0xE4, 0x42),  # yellow
    (0xE6, 0x9F, 0x00),  # orange
    (0x00, 0x72, 0xB2),  # blue
)
PALETTE = tuple((rgb, "#{:02x}{:02x}{:02x}".format(*rgb)) for rgb in PALETTE_RGB)

Series = tuple[str, Sequence[float], Sequence[float]]

#: how often a chart whose line only grew longer (same values) is redrawn, in seconds
STEADY_REDRAW_S = 5.0
#: the share of a core the redraws of the charts on screen may take together: one chart that
#: takes 12 ms to build (160x45, a swap storm changing it every tick) is redrawn every 3rd tick at
#: a 1 s interval; two such charts side by side (vmscan) each every 5th
CHART_CPU_BUDGET = 0.005
#: a chart asked to draw within this many seconds is on screen (shares the budget)
SHOWN_S = 3.0
#: chart -> when it was last asked to draw
_asked: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


@dataclass
class ChartMemo:
    """What ``draw`` last drew on a chart, kept beside it rather than on the widget."""

    #: everything the chart showed (redraw when it differs)
    key: tuple[Any, ...] | None = None
    #: when it was last drawn (time.monotonic)
    drawn_at: float | None = None
    #: its shape (range, newest value, peak of each series) and when that was drawn
    shape: tuple[Any, ...] | None = None
    shape_at: float = 0.0
    #: the last call's arguments after the plot: a chart first drawn before it was laid out
    #: (0x0) draws them again at its size (``redraw``)
    call: tuple[Any, ...] = ()


#: chart -> its memo
_memos: weakref.WeakKeyDictionary[Any, ChartMemo] = weakref.WeakKeyDictionary()


def y_tick_count(height: int) -> int:
    """How many steps of y ticks a chart ``height`` rows tall shows: one every three rows or more
    (plotext drops a label that does not fit its rows, and which one it drops is not stable from
    one render to the next), at least one (the bottom and a round top, at 80x24), at most four."""
    return max(1, min(4, (height - 4) // 3))


def _shape(label: str, xs: Sequence[float], ys: Sequence[float]) -> tuple[Any, ...]:
    """What a series looks like beyond its length: its range, its newest value and where its
    peak is (a peak sliding left in a "seconds ago" chart is a change; a flat line is not)."""
    if not ys:
        return (label,)
    lo, hi = min(ys), max(ys)
    peak = round(xs[max(range(len(ys)), key=ys.__getitem__)], 1) if hi > lo else None
    return (label, lo, hi, ys[-1], peak)


def nice_ticks(hi: float, n: int = 4, binary: bool = False) -> list[float]:
    """About ``n`` round tick values from 0 to at least ``hi``: 1, 2 or 5 times a power of ten,
    of the binary unit (KiB, MiB, GiB…) the values are in when ``binary`` (so 100M, not 95.4M)."""
    if hi <= 0 or not math.isfinite(hi):
        return [0.0, 1.0]
    if binary:
        scale = 1024 ** max(0, int(math.log(hi, 1024)))
        return [t * scale for t in nice_ticks(hi / scale, n)]
    raw = hi / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(math.ceil(hi / step)) + 1)]


def draw(
    plot: Chart,
    legend: Any,
    title: str,
    series: Sequence[Series],
    unit: Callable[[float], str],
    *,
    xlabel: str = "seconds",
    xlim: tuple[float, float] | None = None,
    binary: bool = False,
    force: bool = False,
) -> None:
    """Redraw ``plot`` (a PlotextPlot) with ``series`` (label, xs, ys) and write ``title`` and the
    coloured names into ``legend`` (a Static above it). ``binary``: the values are bytes.
    ``force``: draw now even if the budget or a steady line would wait (a resize)."""
    from memtop.ui.lines import show_text

    # a chart redraws only when what it shows changed (plotext re-renders the whole canvas)
    size = (plot.size.width, plot.size.height)
    # x rounded to 0.1 s: "seconds ago" on a steady tick is the same list every tick, so an idle
    # chart (all ys unchanged) is not redrawn just because time moved on
    key = (
        title,
        xlim,
        binary,
        size,
        tuple((label, tuple(round(x, 1) for x in xs), tuple(ys)) for label, xs, ys in series),
    )
    memo = _memos.get(plot)
    if memo is None:
        memo = _memos[plot] = ChartMemo()
    memo.call = (legend, title, series, unit, xlabel, xlim, binary)
    if memo.key == key:
        return
    now = time.monotonic()
    _asked[plot] = now
    # a chart whose every redraw is costly (a large one, its data changing every tick in a swap
    # storm) is redrawn no more often than its share of the budget allows; what it missed is
    # drawn next time
    shown = sum(1 for t in list(_asked.values()) if 0 <= now - t < SHOWN_S)
    last = memo.drawn_at
    if not force and last is not None and now - last < plot.build_s * shown / CHART_CPU_BUDGET:
        return
    # only time moved on (a steady process's history, an idle machine's rates): what the chart
    # shows is the same line a little longer; redraw it every STEADY_REDRAW_S, not every tick
    shape = (title, binary, size, tuple(_shape(label, xs, ys) for label, xs, ys in series))
    if not force and memo.shape == shape and now - memo.shape_at < STEADY_REDRAW_S:
        return
    memo.shape, memo.shape_at, memo.key, memo.drawn_at = shape, now, key, now
    plt = plot.plt
    plt.clear_data()
    plt.clear_figure()
    text = Text(title, style="bold", no_wrap=True, overflow="ellipsis")
    top = 0.0
    count = 0
    for i, (label, xs, ys) in enumerate(series):
        if not xs:
            continue
        pcolour, rcolour = PALETTE[i % len(PALETTE)]
        plt.plot(list(xs), list(ys), color=pcolour, marker="braille")
        top = max(top, max(ys, default=0.0))
        text.append("  ")
        text.append("━", style=rcolour)
        text.append(label)
        count += 1
    if not count:
        plt.plot([0.0], [0.0])
    ticks = nice_ticks(top, n=y_tick_count(size[1] if len(size) > 1 else 0), binary=binary)
    plt.yticks(ticks, [unit(t) for t in ticks])
    plt.ylim(0, ticks[-1])
    if xlim is not None:
        plt.xlim(*xlim)
    plt.xlabel(xlabel)
    # a memtop.ui.plot.Chart keeps its built canvas until this changes
    plot.data_changed()
    show_text(legend, text)


def redraw(plot: Chart) -> None:
    """Draw what ``plot`` was last asked to show again, at its size now (a resize, or the first
    layout of a chart drawn while it was still 0x0): its y ticks follow its height."""
    memo = _memos.get(plot)
    if memo is not None and memo.call:
        legend, title, series, unit, xlabel, xlim, binary = memo.call
        draw(plot, legend, title, series, unit, xlabel=xlabel, xlim=xlim, binary=binary, force=True)
