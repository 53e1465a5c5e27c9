"""Reclaim state: vmscan totals and rates (by origin), slab shrinkers, compaction, and direct/memcg
reclaim latency (kernel histograms, per-process totals, recent events).

The probe sends cumulative totals; rates are derived here from consecutive totals, so a live run
and a replay take the same path.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.vmscan import ORIGINS, RECLAIM_KINDS, ReclaimEvent, ReclaimTotals, VmscanTotals
from memtop.state.base import Ring, SubState, rate

if TYPE_CHECKING:
    from memtop.state import State

PROBE = "vmscan"
EVENTS_LEN = 1000
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


@dataclass(slots=True)
class PidRow:
    pid: int
    comm: str
    events: int = 0
    total_ns: int = 0
    max_ns: int = 0
    pages_reclaimed: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class ReclaimState(SubState):
    key = "reclaim"

    def __init__(self) -> None:
        self.totals: ReclaimTotals | None = None
        #: log2 latency histogram per kind: bucket index -> count (kernel-side, nothing lost)
        self.histogram: dict[str, dict[int, int]] = {k: {} for k in RECLAIM_KINDS}
        self.pids: dict[int, PidRow] = {}
        self.events: deque[ReclaimEvent] = deque(maxlen=EVENTS_LEN)
        #: events that reached user space (all of them, not only the ones still in ``events``)
        self.events_received = 0
        self.lost_events = 0
        self.unpaired = 0
        #: episodes per second, per kind
        self.events_per_s: dict[str, float] = {}
        self.ts_ns = 0

    def apply(self, batch: Batch, state: State) -> None:
        for rec in batch.records:
            if isinstance(rec, ReclaimEvent):
                self.events.append(rec)
                self.events_received += 1
            elif isinstance(rec, ReclaimTotals):
                self._on_totals(rec, batch.ts_ns)
        self.lost_events = state.lost.get((PROBE, "events"), 0)

    def _on_totals(self, rec: ReclaimTotals, ts: int) -> None:
        hist: dict[str, dict[int, int]] = {k: {} for k in RECLAIM_KINDS}
        for kind, bucket, count in rec.histogram:
            hist.setdefault(kind, {})[bucket] = count
        if self.totals is not None:
            dt = ts - self.ts_ns
            for kind in hist:
                self.events_per_s[kind] = rate(
                    sum(hist[kind].values()), sum(self.histogram.get(kind, {}).values()), dt
                )
        self.histogram = hist
        pids: dict[int, PidRow] = {}
        for pid, comm, kind, events, total_ns, max_ns, reclaimed in rec.pids:
            row = pids.get(pid)
            if row is None:
                row = pids[pid] = PidRow(pid, comm)
            row.events += events
            row.total_ns += total_ns
            row.max_ns = max(row.max_ns, max_ns)
            row.pages_reclaimed += reclaimed
            row.by_kind[kind] = row.by_kind.get(kind, 0) + events
        self.pids = pids
        self.unpaired = rec.unpaired
        self.totals, self.ts_ns = rec, ts

    def histogram_total(self, kind: str | None = None) -> int:
        kinds = [kind] if kind else list(self.histogram)
        return sum(sum(self.histogram.get(k, {}).values()) for k in kinds)
