"""Vmscan records (fed by the vmscan probe): cumulative kernel-map totals of the reclaim scanner.

Every total is cumulative since the probe attached; rates are derived in ``memtop.state.vmscan``.
Pages are the kernel's pages (the tracepoints count pages, as /proc/vmstat does).
"""

from __future__ import annotations

from dataclasses import dataclass

from memtop.records import Record, record

ORIGINS = ("kswapd", "direct", "memcg")


@record("vmscan_totals")
@dataclass(frozen=True, slots=True)
class VmscanTotals(Record):
    """What the vmscan program aggregated in kernel maps, cumulative since it attached.

    ``origins``: (origin, pages_scanned, pages_reclaimed, events) per origin, from
    ``vmscan:mm_vmscan_lru_shrink_inactive`` (events = calls of that tracepoint).
    ``compaction_hist``: (log2 bucket index, count) of compaction durations in ns.
    ``slab``: (shrinker, calls, total_ns, objects_freed) per shrinker function.
    """

    origins: tuple[tuple[str, int, int, int], ...]
    kswapd_wakes: int
    kswapd_sleeps: int
    kcompactd_wakes: int
    compaction_count: int
    compaction_total_ns: int
    compaction_hist: tuple[tuple[int, int], ...] = ()
    slab: tuple[tuple[str, int, int, int], ...] = ()
    slab_dropped: int = 0
