"""Formatting numbers for people (pure; used by text snapshots and the UI)."""

from __future__ import annotations

import time

SPARK = "▁▂▃▄▅▆▇█"


def bytes_h(n: float | int | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    # the next unit from 1000 on: four digits and a decimal (1012.0K) read as a typo of 101.2K
    for unit in ("B", "K", "M", "G", "T"):
        if abs(n) < 1000 or unit == "T":
            if unit == "B":
                return f"{n:.0f}{unit}"
            if abs(n) < 0.995:  # 1000-1018 of the unit below: 0.98K, 0.99M
                return f"{n:.2f}{unit}"
            return f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}T"


def count(n: int | None) -> str:
    """A cumulative count as it is (36518, not 37k: two counts read side by side, such as events
    seen and received, must show their difference); "-" when not measured."""
    return "-" if n is None else str(n)


def count_h(n: float | int | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    if abs(n) >= 10_000_000:
        return f"{n / 1e6:.0f}M"
    if abs(n) >= 10_000:
        return f"{n / 1e3:.0f}k"
    if n != int(n):
        return f"{n:.1f}"
    return f"{int(n)}"


def age_h(seconds: float | int | None) -> str:
    """How long ago or how old, as people say it: ``5.2s``, ``18m51s``, ``3h05m``, ``2d04h``
    (not ``1131.14s``); "-" when not known."""
    if seconds is None:
        return "-"
    s = max(0.0, float(seconds))
    if s < 60:
        return f"{s:.1f}s"
    whole = int(s)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def clock_h(wall_ns: int | None) -> str:
    """A moment as local wall-clock time to the millisecond (``13:43:12.345``); "-" when not known."""
    if wall_ns is None:
        return "-"
    t = time.localtime(wall_ns // 1_000_000_000)
    return time.strftime("%H:%M:%S", t) + f".{wall_ns // 1_000_000 % 1000:03d}"


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``1 process``, ``2 processes``: the count and the noun that goes with it."""
    return f"{n} {noun if n == 1 else (nouns or noun + 's')}"


def ns_h(ns: float | int | None) -> str:
    if ns is None:
        return "-"
    ns = float(ns)
    if ns >= 1e9:
        return f"{ns / 1e9:.2f}s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f}ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f}µs"
    return f"{ns:.0f}ns"


def ns_total(ns: float | int | None) -> str:
    """A total of time waited: blank for none (a column of zeros hides the few that waited),
    "-" when not measured."""
    if ns is None:
        return "-"
    return "" if not ns else ns_h(ns)


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}%"


def sparkline(values: list[int] | list[float], width: int = 12, min_span_frac: float = 0.0) -> str:
    """Values as bars from their lowest to their highest; ``min_span_frac``: the bars span at least
    that share of the highest value, so a change smaller than it stays low (a flat 12 MiB daemon
    with a page of jitter draws flat, not as a leaker's slope)."""
    vals = list(values)[-width:]
    if not vals:
        return ""
    hi = max(vals)
    lo = min(vals)
    span = max(hi - lo, abs(hi) * min_span_frac)
    if span <= 0:
        return SPARK[0] * len(vals) if hi == 0 else SPARK[3] * len(vals)
    return "".join(SPARK[min(7, int((v - lo) * 7.999 / span))] for v in vals)
