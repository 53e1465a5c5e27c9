"""Latency histograms drawn to fit a box: one line per log2 bucket when the box is tall enough,
adjacent buckets merged when it is not, and one summary line (percentiles and a column chart)
when only that fits. Lines never wrap: bars and labels take the width they are given."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from memtop.core import fmt

#: a column chart's glyphs, lowest to highest (a bucket with a count is never drawn blank)
COLUMNS = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class Bucket:
    """Waits of ``lo_ns`` to ``hi_ns`` (both 0: waits that never blocked)."""

    lo_ns: int
    hi_ns: int
    count: int

    @property
    def label(self) -> str:
        if self.hi_ns == 0:
            return "no wait"
        if self.lo_ns <= 0:
            return f"≤{fmt.ns_h(self.hi_ns)}"
        return f"{fmt.ns_h(self.lo_ns)}-{fmt.ns_h(self.hi_ns)}"


def from_log2(buckets: list[tuple[int, int]], skip_leading_empty: bool = True) -> list[Bucket]:
    """Buckets from ``(le_ns, count)`` pairs of a log2 histogram (each bucket from half its upper
    bound to it); empty buckets before the first one with a count say nothing and are left out."""
    out = [Bucket((le + 1) // 2, le, n) for le, n in buckets]
    if skip_leading_empty:
        while out and not out[0].count:
            out.pop(0)
    return out


def merge(buckets: list[Bucket], lines: int) -> list[Bucket]:
    """Adjacent buckets merged pairwise until at most ``lines`` remain (the shape is kept)."""
    out = list(buckets)
    while len(out) > max(1, lines):
        out = [
            Bucket(
                out[i].lo_ns,
                out[i + 1].hi_ns if i + 1 < len(out) else out[i].hi_ns,
                out[i].count + (out[i + 1].count if i + 1 < len(out) else 0),
            )
            for i in range(0, len(out), 2)
        ]
    return out


def percentile(buckets: list[Bucket], p: float) -> int | None:
    """The upper bound of the bucket that holds the ``p``-th percentile (None: no counts)."""
    total = sum(b.count for b in buckets)
    if not total:
        return None
    seen = 0
    for b in buckets:
        seen += b.count
        if seen >= total * p / 100:
            return b.hi_ns
    return buckets[-1].hi_ns


def columns(buckets: list[Bucket]) -> str:
    """One glyph per bucket, its height the bucket's share of the largest."""
    most = max((b.count for b in buckets), default=0)
    if not most:
        return ""
    top = len(COLUMNS) - 1
    return "".join(
        " " if not b.count else COLUMNS[max(0, min(top, round(top * b.count / most)))] for b in buckets
    )


def summary(buckets: list[Bucket], width: int) -> Text:
    """One line: p50, p99 and the largest bucket's bound, and the buckets as a column chart."""
    out = Text(no_wrap=True, overflow="ellipsis")
    if not any(b.count for b in buckets):
        out.append("none yet", style="dim")
        return out
    for name, p in (("p50", 50.0), ("p99", 99.0)):
        v = percentile(buckets, p)
        out.append(f"{name} ")
        out.append("0" if not v else f"≤{fmt.ns_h(v)}", style="bold")
        out.append(" ")
    last = next(b for b in reversed(buckets) if b.count)
    out.append("max ")
    out.append(f"≤{fmt.ns_h(last.hi_ns)}", style="bold")
    chart = columns(buckets)
    if out.cell_len + 1 + len(chart) <= width:
        out.append(" ")
        out.append(chart, style="cyan")
    out.truncate(width, overflow="ellipsis")
    return out


def render(buckets: list[Bucket], width: int, lines: int, bar_style: str = "cyan") -> Text:
    """The histogram in at most ``lines`` lines of ``width`` cells: a line per bucket (merged when
    there are more buckets than lines), or, in one line, :func:`summary`."""
    if lines <= 1 or not buckets:
        return summary(buckets, width)
    shown = merge(buckets, lines)
    label_w = max(len(b.label) for b in shown)
    count_w = max(len(fmt.count_h(b.count)) for b in shown)
    bar_w = max(0, width - label_w - count_w - 2)
    most = max(b.count for b in shown) or 1
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, b in enumerate(shown):
        line = Text(f"{b.label:>{label_w}} {fmt.count_h(b.count):>{count_w}} ")
        n = round(bar_w * b.count / most)
        line.append("█" * max(1 if b.count and bar_w else 0, n), style=bar_style)
        line.truncate(width, overflow="ellipsis")  # a box too narrow for the labels: cut, not wrapped
        if i:
            out.append("\n")
        out.append_text(line)
    return out
