"""Leak stacks: outstanding bytes per (pid, stack), their age and growth over the last minute.

The leaks probe sends cumulative per-stack figures (allocated and freed bytes and counts since
it attached); growth is derived here from the history of outstanding bytes, so live and replay
agree. A stack the probe stops sending (nothing outstanding and unchanged) keeps its last figures.
When a target exits its figures freeze at the exit time: ages and growth are computed up to then.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.leaks import (
    LeakBudget,
    LeakCalls,
    LeakPreflight,
    LeakStack,
    LeakTarget,
    LeakVerdict,
)
from memtop.state.base import SubState

if TYPE_CHECKING:
    from memtop.state import State

GROWTH_WINDOW_NS = 60 * 1_000_000_000
HISTORY_LEN = 256
MAX_STACKS = 20000


@dataclass(slots=True)
class StackRow:
    rec: LeakStack
    last_ts_ns: int
    #: (batch ts, outstanding bytes) at each update
    history: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=HISTORY_LEN))


class LeaksState(SubState):
    key = "leaks"
    takes = (
        LeakStack,
        LeakTarget,
        LeakPreflight,
        LeakBudget,
        LeakVerdict,
        LeakCalls,
    )

    def __init__(self) -> None:
        self.targets: dict[int, LeakTarget] = {}
        self.stacks: dict[tuple[int, int], StackRow] = {}
        self.ts_ns = 0
        self.calls: LeakCalls | None = None
        self.calls_ts_ns = 0
        #: allocation calls per second over the last interval (None before two readings)
        self.calls_per_s: float | None = None
        #: the last preflight (the calls counted before tracing) and its decision
        self.preflight: LeakPreflight | None = None
        #: tracing on a budget: the windows' figures, and each stack's verdict
        self.budget: LeakBudget | None = None
        self.verdicts: dict[tuple[int, int], LeakVerdict] = {}

    def apply(self, batch: Batch, state: State) -> None:
        ts = batch.ts_ns
        seen = False
        for rec in batch.records:
            if isinstance(rec, LeakStack):
                seen = True
                key = (rec.pid, rec.stack_id)
                row = self.stacks.get(key)
                if row is None:
                    if len(self.stacks) >= MAX_STACKS:
                        continue
                    row = self.stacks[key] = StackRow(rec, ts)
                row.rec = rec
                row.last_ts_ns = ts
                row.history.append((ts, rec.outstanding_bytes))
            elif isinstance(rec, LeakTarget):
                seen = True
                before = self.targets.get(rec.pid)
                if before is not None and rec.execs > before.execs:
                    # it exec'd: the old image's allocations went with its address space
                    for key in [k for k in self.stacks if k[0] == rec.pid]:
                        del self.stacks[key]
                    for key in [k for k in self.verdicts if k[0] == rec.pid]:
                        del self.verdicts[key]
                self.targets[rec.pid] = rec
            elif isinstance(rec, LeakPreflight):
                self.preflight = rec
            elif isinstance(rec, LeakBudget):
                self.budget = rec
            elif isinstance(rec, LeakVerdict):
                if (rec.pid, rec.stack_id) in self.verdicts or len(self.verdicts) < MAX_STACKS:
                    self.verdicts[(rec.pid, rec.stack_id)] = rec
            elif isinstance(rec, LeakCalls):
                if self.calls is not None and ts > self.calls_ts_ns and rec.calls >= self.calls.calls:
                    self.calls_per_s = (rec.calls - self.calls.calls) * 1e9 / (ts - self.calls_ts_ns)
                self.calls, self.calls_ts_ns = rec, ts
        if seen or self.targets:
            self.ts_ns = ts

    # -- derived ----------------------------------------------------------------------------------
    def now_for(self, pid: int) -> int:
        """The time figures for ``pid`` are valid at: now, or its exit time."""
        t = self.targets.get(pid)
        if t is not None and t.state == "exited" and t.exited_ts_ns:
            return min(self.ts_ns, t.exited_ts_ns) if self.ts_ns else t.exited_ts_ns
        return self.ts_ns

    def growth_bytes_per_s(self, row: StackRow) -> float:
        """Change of outstanding bytes per second over the last minute (or since first seen).
        Between updates the value is taken as unchanged (the probe omits unchanged stacks)."""
        hist = row.history
        if not hist:
            return 0.0
        end = self.now_for(row.rec.pid)
        start = max(hist[0][0], end - GROWTH_WINDOW_NS)
        if end - start < 500_000_000:
            return 0.0
        v0 = hist[0][1]
        for ts, value in hist:
            if ts > start:
                break
            v0 = value
        cur = hist[-1][1]
        return (cur - v0) * 1e9 / (end - start)

    def oldest_age_s(self, row: StackRow) -> float:
        if not row.rec.oldest_ts_ns or row.rec.outstanding_count == 0:
            return 0.0
        return max(0.0, (self.now_for(row.rec.pid) - row.rec.oldest_ts_ns) / 1e9)

    def exited(self) -> list[LeakTarget]:
        return [t for t in self.targets.values() if t.state == "exited"]
