"""How bad a figure is, as data: "" (nothing to see), "warn" or "bad". Views attach levels to the
cells that deserve a glance (a row dict's ``"levels": {column key: level}``); the UI colours them
(memtop/ui/levels.py), text snapshots and JSON carry the level as it is. One table of thresholds,
so every pane calls the same figure trouble at the same point.

Thresholds follow what htop/btop/atop users read as trouble; each says why in a comment. Add a
metric here rather than a number in a view.
"""

from __future__ import annotations

from typing import Literal

Level = Literal["", "warn", "bad"]

#: metric -> (warn at, bad at); a value at or above a bound takes its level
THRESHOLDS: dict[str, tuple[float, float]] = {
    # PSI avg10, percent of time stalled: some tasks / all tasks (atop colours PSI from ~10 %)
    "psi_some_avg10": (10.0, 40.0),
    "psi_full_avg10": (5.0, 20.0),
    # a cgroup's usage as a percent of its limit: reclaim starts to bite near the top
    "limit_used_pct": (80.0, 95.0),
    # major faults per second of one process: each is a disk read or a swap-in
    "major_faults_per_s": (100.0, 1000.0),
    # time a process spent waiting on swap-ins or in reclaim, ns per second of wall time
    "swapin_wait_ns_per_s": (50e6, 250e6),
    "reclaim_stall_ns_per_s": (50e6, 250e6),
    # one reclaim episode's latency
    "reclaim_latency_ns": (10e6, 100e6),
    # resident memory growth of one process (RGROW), bytes per second
    "rss_growth_bytes_per_s": (1 << 20, 16 << 20),
}


def level(metric: str, value: float | int | None) -> Level:
    """The level of ``value`` for ``metric`` ("" for None: a figure not measured is not trouble)."""
    if value is None:
        return ""
    warn, bad = THRESHOLDS[metric]
    if value >= bad:
        return "bad"
    if value >= warn:
        return "warn"
    return ""
