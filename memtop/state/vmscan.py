"""Reclaim state: vmscan totals and rates (by origin), slab shrinkers, compaction, and direct/memcg
reclaim latency (kernel histograms, per-process totals, recent events).

The probe sends cumulative totals; rates are derived here from consecutive totals, so a live run
and a replay take the same path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.vmscan import ORIGINS, VmscanTotals
from memtop.state.base import Ring, SubState, rate

if TYPE_CHECKING:
    from memtop.state import State

PROBE = "vmscan"
RING_LEN = 600


@dataclass(slots=True)
class OriginRow:
    origin: str
    pages_scanned: int = 0
    pages_reclaimed: int = 0
    events: int = 0
    scanned_per_s: float = 0.0
    reclaimed_per_s: float = 0.0


@dataclass(slots=True)
class ShrinkerRow:
    shrinker: str
    count: int
    total_ns: int
    objects_freed: int
    count_per_s: float = 0.0


class VmscanState(SubState):
    key = "vmscan"
    takes = (VmscanTotals,)

    def __init__(self) -> None:
        self.totals: VmscanTotals | None = None
        self.ts_ns = 0
        self.origins: dict[str, OriginRow] = {o: OriginRow(o) for o in ORIGINS}
        self.shrinkers: dict[str, ShrinkerRow] = {}
        self.kswapd_wakes_per_s = 0.0
        self.kswapd_sleeps_per_s = 0.0
        #: time series (ts_ns, pages/s) for the charts, per origin
        self.scanned_rate: dict[str, Ring] = {o: Ring(RING_LEN) for o in ORIGINS}
        self.reclaimed_rate: dict[str, Ring] = {o: Ring(RING_LEN) for o in ORIGINS}
        self.kswapd_wake_rate = Ring(RING_LEN)

    def apply(self, batch: Batch, state: State) -> None:
        for rec in batch.records:
            if isinstance(rec, VmscanTotals):
                self._on_totals(rec, batch.ts_ns)

    def _on_totals(self, rec: VmscanTotals, ts: int) -> None:
        prev, dt = self.totals, ts - self.ts_ns
        for origin, scanned, reclaimed, events in rec.origins:
            row = self.origins.setdefault(origin, OriginRow(origin))
            if prev is not None:
                row.scanned_per_s = rate(scanned, row.pages_scanned, dt)
                row.reclaimed_per_s = rate(reclaimed, row.pages_reclaimed, dt)
                self.scanned_rate.setdefault(origin, Ring(RING_LEN)).append((ts, row.scanned_per_s))
                self.reclaimed_rate.setdefault(origin, Ring(RING_LEN)).append((ts, row.reclaimed_per_s))
            row.pages_scanned, row.pages_reclaimed, row.events = scanned, reclaimed, events
        if prev is not None:
            self.kswapd_wakes_per_s = rate(rec.kswapd_wakes, prev.kswapd_wakes, dt)
            self.kswapd_sleeps_per_s = rate(rec.kswapd_sleeps, prev.kswapd_sleeps, dt)
            self.kswapd_wake_rate.append((ts, self.kswapd_wakes_per_s))
        seen = set()
        for name, count, total_ns, freed in rec.slab:
            seen.add(name)
            old = self.shrinkers.get(name)
            per_s = rate(count, old.count, dt) if old is not None and prev is not None else 0.0
            self.shrinkers[name] = ShrinkerRow(name, count, total_ns, freed, per_s)
        for name in [n for n in self.shrinkers if n not in seen]:
            del self.shrinkers[name]  # probe restarted: its maps began again
        self.totals, self.ts_ns = rec, ts

    @property
    def has_data(self) -> bool:
        return self.totals is not None
