"""Swap-in waiters: per-process swap-ins / file major faults with wait totals, rates, the log2
wait histogram, swap devices and zswap. Probes send cumulative counters; rates are derived here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.swapin import SwapInfo, SwapinHistogram, SwapinProc
from memtop.state.base import SubState, rate

if TYPE_CHECKING:
    from memtop.state import State

#: rows of processes not updated for this long are dropped (their counters stay in totals)
MAX_ROWS = 4096


@dataclass(slots=True)
class SwapinRow:
    rec: SwapinProc
    ts_ns: int
    swapins_per_s: float = 0.0
    file_per_s: float = 0.0


class SwapinState(SubState):
    key = "swapin"
    takes = (
        SwapinProc,
        SwapinHistogram,
        SwapInfo,
    )

    def __init__(self) -> None:
        self.rows: dict[int, SwapinRow] = {}
        self.hist: SwapinHistogram | None = None
        self.swapinfo: SwapInfo | None = None
        self.hist_ts_ns = 0

    def apply(self, batch: Batch, state: State) -> None:
        ts = batch.ts_ns
        seen: set[int] = set()
        polled = False  # this batch holds the swapin probe's poll (not only other records)
        for rec in batch.records:
            if isinstance(rec, SwapinProc):
                seen.add(rec.pid)
                row = self.rows.get(rec.pid)
                if (
                    row is None
                    or rec.swapins < row.rec.swapins
                    or rec.file_major_faults < row.rec.file_major_faults
                ):
                    self.rows[rec.pid] = SwapinRow(rec, ts)
                else:
                    dt = ts - row.ts_ns
                    row.swapins_per_s = rate(rec.swapins, row.rec.swapins, dt)
                    row.file_per_s = rate(rec.file_major_faults, row.rec.file_major_faults, dt)
                    row.rec, row.ts_ns = rec, ts
            elif isinstance(rec, SwapinHistogram):
                self.hist, self.hist_ts_ns, polled = rec, ts, True
            elif isinstance(rec, SwapInfo):
                self.swapinfo = rec
        if polled:
            # the probe sends only rows that changed: a row not sent this poll stood still
            for pid, row in self.rows.items():
                if pid not in seen:
                    row.swapins_per_s = row.file_per_s = 0.0
        if len(self.rows) > MAX_ROWS:
            for pid, _ in sorted(self.rows.items(), key=lambda kv: kv[1].ts_ns)[: len(self.rows) - MAX_ROWS]:
                del self.rows[pid]

    def totals(self) -> tuple[int, int, int]:
        """(swap-ins, file major faults, swap-in wait ns) over every row."""
        return (
            sum(r.rec.swapins for r in self.rows.values()),
            sum(r.rec.file_major_faults for r in self.rows.values()),
            sum(r.rec.swapin_wait_ns for r in self.rows.values()),
        )
