"""Process and system-wide records (fed by /proc and the procmem probe)."""

from __future__ import annotations

from dataclasses import dataclass

from memtop.records import Record, record


@record("proc")
@dataclass(frozen=True, slots=True)
class ProcSample(Record):
    """One process's memory and fault counters as the kernel keeps them (/proc/PID/status, stat)."""

    pid: int
    comm: str
    user: str
    uid: int
    rss_anon_bytes: int
    rss_file_bytes: int
    rss_shmem_bytes: int
    swap_bytes: int
    minor_faults: int
    major_faults: int
    ppid: int = 0
    vsize_bytes: int = 0
    threads: int = 1
    start_time_ns: int = 0  # CLOCK_MONOTONIC-based (boot time) start, from /proc/PID/stat starttime
    cmdline: str = ""

    @property
    def rss_bytes(self) -> int:
        return self.rss_anon_bytes + self.rss_file_bytes + self.rss_shmem_bytes


@record("proc_event")
@dataclass(frozen=True, slots=True)
class ProcEvent(Record):
    """A process lifecycle event from sched:sched_process_exec/exit. ``lifetime_ns`` is set on exit
    when the fork was seen (0 otherwise)."""

    ts_ns: int
    event: str  # "exec" | "exit"
    pid: int
    comm: str
    lifetime_ns: int = 0


@record("meminfo")
@dataclass(frozen=True, slots=True)
class MemInfo(Record):
    """System-wide memory from /proc/meminfo."""

    total_bytes: int
    free_bytes: int
    available_bytes: int
    buffers_bytes: int
    cached_bytes: int
    swap_total_bytes: int
    swap_free_bytes: int
    shmem_bytes: int = 0
    slab_bytes: int = 0

    @property
    def used_bytes(self) -> int:
        return self.total_bytes - self.free_bytes - self.buffers_bytes - self.cached_bytes


@record("pressure")
@dataclass(frozen=True, slots=True)
class Pressure(Record):
    """PSI for memory (/proc/pressure/memory); totals are cumulative microseconds stalled."""

    some_avg10: float
    full_avg10: float
    some_avg60: float = 0.0
    full_avg60: float = 0.0
    some_total_us: int = 0
    full_total_us: int = 0


@record("vmstat")
@dataclass(frozen=True, slots=True)
class VmStat(Record):
    """Selected cumulative counters from /proc/vmstat, as (name, value) pairs."""

    counters: tuple[tuple[str, int], ...]

    def as_dict(self) -> dict[str, int]:
        return dict(self.counters)
