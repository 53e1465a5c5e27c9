"""Shared memory and huge pages: System V segments and the calls on them, tmpfs and memfd objects,
hugetlb pools, per-process huge page use, madvise calls for huge pages, migrations and
khugepaged. Rates of the cumulative counters are derived here."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.shared import (
    HugePools,
    KhugepagedTotals,
    MigrateTotals,
    SharedCall,
    SharedProc,
    SharedScan,
    ShmSegment,
    ShmTable,
    TmpfsMount,
)
from memtop.state.base import SubState

if TYPE_CHECKING:
    from memtop.state import State

LOG_LEN = 1000
#: processes whose call counts are kept (the least recently seen go first)
MAX_CALLERS = 2048
#: madvise ranges kept per process
RANGES_PER_PID = 16


@dataclass
class Caller:
    """One process's traced calls: counts by call, failures, its latest madvise ranges."""

    pid: int
    comm: str
    calls: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    advice: Counter[str] = field(default_factory=Counter)
    advised_bytes: int = 0
    ranges: deque[SharedCall] = field(default_factory=lambda: deque(maxlen=RANGES_PER_PID))
    last_ns: int = 0


class SharedState(SubState):
    key = "shared"
    takes = (
        ShmSegment,
        ShmTable,
        SharedCall,
        HugePools,
        SharedProc,
        TmpfsMount,
        SharedScan,
        MigrateTotals,
        KhugepagedTotals,
    )

    def __init__(self) -> None:
        self.segments: dict[int, ShmSegment] = {}
        self.sysv_readable: bool | None = None
        self.sysv_why = ""
        #: shmids of segments seen removed (an IPC_RMID traced, or gone from the table)
        self.removed = 0
        self.events: deque[SharedCall] = deque(maxlen=LOG_LEN)
        self.calls_total = 0
        self.callers: dict[int, Caller] = {}
        self.pools: HugePools | None = None
        self.procs: dict[int, SharedProc] = {}
        self.mounts: dict[str, TmpfsMount] = {}
        self.scan: SharedScan | None = None
        self._scan_procs: dict[int, SharedProc] = {}
        self._scan_mounts: dict[str, TmpfsMount] = {}
        self.migrate: MigrateTotals | None = None
        self.migrate_prev: MigrateTotals | None = None
        self.migrate_ts_ns = 0
        self.migrate_prev_ts_ns = 0
        self.khuge: KhugepagedTotals | None = None
        self.khuge_prev: KhugepagedTotals | None = None
        self.khuge_ts_ns = 0
        self.khuge_prev_ts_ns = 0

    def apply(self, batch: Batch, state: State) -> None:
        for rec in batch.records:
            if isinstance(rec, ShmSegment):
                self.segments[rec.shmid] = rec
            elif isinstance(rec, ShmTable):
                self.sysv_readable, self.sysv_why = rec.readable, rec.why
                keep = set(rec.shmids)
                gone = [s for s in self.segments if s not in keep]
                self.removed += len(gone)
                for s in gone:
                    del self.segments[s]
            elif isinstance(rec, SharedCall):
                self._call(rec)
            elif isinstance(rec, HugePools):
                self.pools = rec
            elif isinstance(rec, SharedProc):
                self._scan_procs[rec.pid] = rec
            elif isinstance(rec, TmpfsMount):
                self._scan_mounts[rec.mount] = rec
            elif isinstance(rec, SharedScan):
                self.procs = {p: self._scan_procs[p] for p in rec.pids if p in self._scan_procs}
                self.mounts = {m: self._scan_mounts[m] for m in rec.mounts if m in self._scan_mounts}
                self._scan_procs, self._scan_mounts = {}, {}
                self.scan = rec
            elif isinstance(rec, MigrateTotals):
                # the first totals are the baseline (rates from the second on)
                self.migrate_prev, self.migrate_prev_ts_ns = self.migrate, self.migrate_ts_ns
                self.migrate, self.migrate_ts_ns = rec, batch.ts_ns
            elif isinstance(rec, KhugepagedTotals):
                self.khuge_prev, self.khuge_prev_ts_ns = self.khuge, self.khuge_ts_ns
                self.khuge, self.khuge_ts_ns = rec, batch.ts_ns

    def _call(self, rec: SharedCall) -> None:
        self.events.appendleft(rec)
        self.calls_total += 1
        c = self.callers.pop(rec.pid, None)  # re-inserted last: the dict's order is recency
        if c is None:
            c = Caller(rec.pid, rec.comm)
            while len(self.callers) >= MAX_CALLERS:
                del self.callers[next(iter(self.callers))]
        c.comm = rec.comm
        c.calls[rec.call] += 1
        c.last_ns = rec.ts_ns
        if rec.error:
            c.errors += 1
        if rec.call == "madvise":
            c.advice[rec.advice] += 1
            c.ranges.appendleft(rec)
            if not rec.error:
                c.advised_bytes += rec.size_bytes or 0
        self.callers[rec.pid] = c

    def migrate_rates(self) -> dict[str, tuple[float, float]]:
        """Per reason: (pages migrated/s, pages failed/s) between the last two totals; reasons
        with no call since the previous totals are absent."""
        cur, prev = self.migrate, self.migrate_prev
        dt = self.migrate_ts_ns - self.migrate_prev_ts_ns
        if cur is None or prev is None or dt <= 0:
            return {}
        before = {r[0]: r for r in prev.reasons}
        out = {}
        for r in cur.reasons:
            p = before.get(r[0], (r[0], 0, 0, 0, 0, 0, 0))
            out[r[0]] = ((r[2] - p[2]) * 1e9 / dt, (r[3] - p[3]) * 1e9 / dt)
        return out
