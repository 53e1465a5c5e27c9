"""Processes records: per-process samples and lifecycle events (fed by /proc and the procmem probe)."""

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
