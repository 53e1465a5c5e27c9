"""Host state: the machine's own memory accounting (meminfo, PSI, vmstat), shown in the header
and by the panes that set their figures against it, and the facts of the machine (host name,
kernel, headers, whether BPF can run) the data comes from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.host import HostFacts, MemInfo, Pressure, VmStat
from memtop.state.base import SubState, rate

if TYPE_CHECKING:
    from memtop.state import State


class HostState(SubState):
    """Host-wide memory accounting: /proc/meminfo, /proc/pressure/memory, /proc/vmstat."""

    key = "host"
    takes = (
        MemInfo,
        Pressure,
        HostFacts,
        VmStat,
    )

    def __init__(self) -> None:
        self.meminfo: MemInfo | None = None
        self.pressure: Pressure | None = None
        self.vmstat: dict[str, int] = {}
        self.vmstat_prev: dict[str, int] = {}
        self.vmstat_first: dict[str, int] = {}
        self.vmstat_ts_ns = 0
        self.vmstat_prev_ts_ns = 0
        self.vmstat_first_ts_ns = 0
        #: the latest facts of the machine the data comes from (a replay: the recorded one)
        self.facts: HostFacts | None = None

    def apply(self, batch: Batch, state: State) -> None:
        for rec in batch.records:
            if isinstance(rec, MemInfo):
                self.meminfo = rec
            elif isinstance(rec, Pressure):
                self.pressure = rec
            elif isinstance(rec, HostFacts):
                self.facts = rec
            elif isinstance(rec, VmStat):
                self.vmstat_prev, self.vmstat_prev_ts_ns = self.vmstat, self.vmstat_ts_ns
                self.vmstat, self.vmstat_ts_ns = rec.as_dict(), batch.ts_ns
                if not self.vmstat_first:
                    self.vmstat_first, self.vmstat_first_ts_ns = self.vmstat, batch.ts_ns

    def vmstat_rate(self, name: str) -> float:
        return rate(
            self.vmstat.get(name, 0),
            self.vmstat_prev.get(name, 0),
            self.vmstat_ts_ns - self.vmstat_prev_ts_ns,
        )

    def vmstat_since_start(self, name: str) -> int:
        return self.vmstat.get(name, 0) - self.vmstat_first.get(name, 0)
