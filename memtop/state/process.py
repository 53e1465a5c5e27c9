"""Drill-in state: per target pid, the latest fault stacks, faults by mapping, growth stacks and
mappings (all cumulative since the probes attached), plus the process's row kept past its exit."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.process import (
    FaultCoverage,
    FaultFile,
    FaultStack,
    Focus,
    GrowthStack,
    MappingRow,
    Mappings,
    MappingTotals,
    TargetGone,
    WorkingSetStart,
    WorkingSetWindow,
)
from memtop.state.base import SubState
from memtop.state.processes import ProcessesState, ProcRow

if TYPE_CHECKING:
    from memtop.state import State

MAX_TARGETS = 16
#: working-set windows kept per target (the curve: 10 minutes of 10 s windows)
WSS_WINDOWS = 60


@dataclass(slots=True)
class Target:
    pid: int
    fault_stacks: dict[int, FaultStack] = field(default_factory=dict)
    fault_files: dict[str, FaultFile] = field(default_factory=dict)
    growth: dict[int, GrowthStack] = field(default_factory=dict)
    fault_coverage: FaultCoverage | None = None  # which threads the fault probe traces
    mappings: tuple[MappingRow, ...] = ()  # the last complete read of smaps
    mappings_ts_ns: int = 0
    mappings_size_bytes: int = 0  # the sum of their sizes (not in smaps_rollup)
    #: the first read of smaps while it comes in parts (None once complete)
    mappings_reading: list[MappingRow] | None = None
    #: bumped whenever what the mappings table shows changes (a screen redraws it only then)
    mappings_gen: int = 0
    mapping_totals: MappingTotals | None = None
    mapping_totals_ts_ns: int = 0
    #: the latest working-set measurement: its start, and its windows, oldest first
    wss_start: WorkingSetStart | None = None
    wss: deque[WorkingSetWindow] = field(default_factory=lambda: deque(maxlen=WSS_WINDOWS))
    row: ProcRow | None = None  # the processes pane's row, kept here after it drops it
    gone_ns: int = 0  # when a drill-in probe noticed the exit (0 = not seen)


def _size_sum(rows: tuple[MappingRow, ...]) -> int:
    try:
        return sum(int(m[2]) for m in rows)
    except (TypeError, ValueError, IndexError):  # a recording's rows not shaped as MappingRow
        return 0


class ProcessState(SubState):
    key = "process"
    takes = (
        Focus,
        FaultStack,
        FaultFile,
        GrowthStack,
        FaultCoverage,
        Mappings,
        MappingTotals,
        WorkingSetStart,
        WorkingSetWindow,
        TargetGone,
    )

    def __init__(self) -> None:
        self.targets: dict[int, Target] = {}
        #: the pids in focus now (Focus records), in the order focused
        self.focused: list[int] = []

    def watch(self, pid: int) -> Target:
        """Keep data for ``pid`` (in focus, or a drill-in probe reports on it)."""
        t = self.targets.get(pid)
        if t is None:
            if len(self.targets) >= MAX_TARGETS:
                del self.targets[next(iter(self.targets))]
            t = Target(pid)
            self.targets[pid] = t
        return t

    def target(self, pid: int) -> Target | None:
        return self.targets.get(pid)

    def apply(self, batch: Batch, state: State) -> None:
        for rec in batch.records:
            if isinstance(rec, Focus):
                if rec.pid in self.focused:
                    self.focused.remove(rec.pid)
                if rec.on:
                    self.focused.append(rec.pid)
                    self.watch(rec.pid)
            elif isinstance(rec, FaultStack):
                self.watch(rec.pid).fault_stacks[rec.stack_id] = rec
            elif isinstance(rec, FaultFile):
                self.watch(rec.pid).fault_files[rec.path] = rec
            elif isinstance(rec, GrowthStack):
                self.watch(rec.pid).growth[rec.stack_id] = rec
            elif isinstance(rec, FaultCoverage):
                self.watch(rec.pid).fault_coverage = rec
            elif isinstance(rec, Mappings):
                self._on_mappings(rec, batch.ts_ns)
            elif isinstance(rec, MappingTotals):
                t = self.watch(rec.pid)
                t.mapping_totals, t.mapping_totals_ts_ns = rec, batch.ts_ns
            elif isinstance(rec, WorkingSetStart | WorkingSetWindow):
                self._on_wss(rec)
            elif isinstance(rec, TargetGone):
                t = self.watch(rec.pid)
                if not t.gone_ns:
                    t.gone_ns = rec.ts_ns
        if self.targets:
            procs = state.get(ProcessesState)
            for pid, t in self.targets.items():
                row = procs.row(pid)
                if row is not None:
                    t.row = row

    def _on_mappings(self, rec: Mappings, ts_ns: int) -> None:
        t = self.watch(rec.pid)
        if rec.complete and not rec.append:  # a whole table at once
            t.mappings, t.mappings_ts_ns, t.mappings_reading = rec.rows, ts_ns, None
        else:
            if rec.append and t.mappings_reading is not None:
                t.mappings_reading.extend(rec.rows)
            else:
                t.mappings_reading = list(rec.rows)
            if rec.complete:
                t.mappings, t.mappings_ts_ns = tuple(t.mappings_reading), ts_ns
                t.mappings_reading = None
        if rec.complete:
            t.mappings_size_bytes = _size_sum(t.mappings)
        t.mappings_gen += 1

    def _on_wss(self, rec: WorkingSetStart | WorkingSetWindow) -> None:
        t = self.watch(rec.pid)
        if isinstance(rec, WorkingSetStart):
            t.wss_start = rec
            t.wss.clear()  # a new measurement: its own curve
        else:
            t.wss.append(rec)

    def exited_ns(self, pid: int, state: State) -> int:
        """CLOCK_MONOTONIC ns of the target's exit (the exit event's time where procmem saw it),
        0 while it runs."""
        procs = state.get(ProcessesState)
        t = self.targets.get(pid)
        gone = t.gone_ns if t is not None else 0
        if pid in procs.rows and not gone:
            return 0
        for e in procs.exited:  # newest first
            if e.pid == pid:
                return e.exited_ns
        row = t.row if t is not None and t.row is not None else procs.row(pid)
        if row is not None and row.exited_ns:
            return row.exited_ns
        return gone
