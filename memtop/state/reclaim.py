"""Reclaim state: direct and memcg reclaim latency (kernel histograms, per-process totals, recent
events), from the vmscan probe's reclaim records.

The probe sends cumulative totals; rates are derived here from consecutive totals, so a live run
and a replay take the same path.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.reclaim import RECLAIM_KINDS, ReclaimEvent, ReclaimTotals
from memtop.state.base import SubState, rate

if TYPE_CHECKING:
    from memtop.state import State

PROBE = "vmscan"
EVENTS_LEN = 1000


@dataclass(slots=True)
class PidRow:
    pid: int
    comm: str
    events: int = 0
    total_ns: int = 0
    max_ns: int = 0
    pages_reclaimed: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    #: the same figures for one kind alone: kind -> (events, total_ns, max_ns, pages_reclaimed),
    #: so a table restricted to one kind (the pane's K) shows that kind's stalls, not all of them
    per_kind: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)


class ReclaimState(SubState):
    key = "reclaim"
    takes = (
        ReclaimEvent,
        ReclaimTotals,
    )

    def __init__(self) -> None:
        self.totals: ReclaimTotals | None = None
        #: log2 latency histogram per kind: bucket index -> count (kernel-side, nothing lost)
        self.histogram: dict[str, dict[int, int]] = {k: {} for k in RECLAIM_KINDS}
        self.pids: dict[int, PidRow] = {}
        self.events: deque[ReclaimEvent] = deque(maxlen=EVENTS_LEN)
        #: events that reached user space (all of them, not only the ones still in ``events``)
        self.events_received = 0
        self.lost_events = 0
        #: episodes the kernel did not log (its rate limit): counted by every figure, not listed
        self.unlisted_events = 0
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
            e0, t0, m0, p0 = row.per_kind.get(kind, (0, 0, 0, 0))
            row.per_kind[kind] = (e0 + events, t0 + total_ns, max(m0, max_ns), p0 + reclaimed)
        self.pids = pids
        self.unpaired = rec.unpaired
        self.unlisted_events = rec.unlisted
        self.totals, self.ts_ns = rec, ts

    def histogram_total(self, kind: str | None = None) -> int:
        kinds = [kind] if kind else list(self.histogram)
        return sum(sum(self.histogram.get(k, {}).values()) for k in kinds)
