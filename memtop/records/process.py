"""Drill-in records for one process: fault stacks, faults by mapping, heap growth stacks, mappings.

All counters are cumulative since the probe attached (rates and deltas are derived in state).
Frames are already symbolized strings (``function+0xoff [module] file:line``), innermost first, so
records stay plain values and a recording replays without the process.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtop.records import Record, record


@record("fault_stack")
@dataclass(frozen=True, slots=True)
class FaultStack(Record):
    """Page faults of ``pid`` with one user stack (perf events PAGE_FAULTS_MIN/MAJ on its threads).
    ``stack_id`` < 0 means the stack could not be taken (-errno); the faults still count."""

    pid: int
    stack_id: int
    frames: tuple[str, ...]
    minor_faults: int
    major_faults: int


#: how faults in anonymous hugetlb memory (MAP_HUGETLB; maps names it /anon_hugepage) are grouped:
#: each is a huge page fault (hfaults without kprobes, on the drill-in's per-pid fault events)
HUGETLB_LABEL = "[anon hugetlb]"


@record("fault_file")
@dataclass(frozen=True, slots=True)
class FaultFile(Record):
    """Page faults of ``pid`` on addresses inside mappings of ``path`` (or ``[heap]``, ``[anon]``…)."""

    pid: int
    path: str
    minor_faults: int
    major_faults: int


@record("fault_coverage")
@dataclass(frozen=True, slots=True)
class FaultCoverage(Record):
    """Which threads of ``pid`` the fault-stack probe traces (per-thread perf events: two fds a
    thread). ``threads_total`` is what /proc/PID/task listed at the last rescan; the others are
    not traced, for ``reason`` (e.g. the open-file limit); their faults are not in any count."""

    pid: int
    threads_total: int
    threads_traced: int
    reason: str = ""

    @property
    def threads_uncovered(self) -> int:
        return max(0, self.threads_total - self.threads_traced)


@record("growth_stack")
@dataclass(frozen=True, slots=True)
class GrowthStack(Record):
    """brk/mmap/munmap calls of ``pid`` from one user stack. ``freed_bytes``: bytes of mappings this
    stack made that were unmapped later (by any stack)."""

    pid: int
    stack_id: int
    frames: tuple[str, ...]
    brk_calls: int
    brk_grown_bytes: int
    brk_shrunk_bytes: int
    mmap_calls: int
    mmap_bytes: int
    munmap_calls: int
    munmap_bytes: int
    freed_bytes: int

    @property
    def grown_bytes(self) -> int:
        return self.brk_grown_bytes + self.mmap_bytes

    @property
    def net_bytes(self) -> int:
        return self.brk_grown_bytes - self.brk_shrunk_bytes + self.mmap_bytes - self.freed_bytes

    @property
    def calls(self) -> int:
        return self.brk_calls + self.mmap_calls + self.munmap_calls


# (start, end, size_bytes, rss_bytes, pss_bytes, dirty_bytes, swap_bytes, mode, name)
MappingRow = tuple[int, int, int, int, int, int, int, str, str]


@record("mappings")
@dataclass(frozen=True, slots=True)
class Mappings(Record):
    """Mappings of ``pid`` from one read of /proc/PID/smaps (what ``pmap -x`` shows), in address
    order. A read may come in parts: a record with ``append`` False starts a table, the next ones
    add to it, and ``complete`` says the read is over (one record with both defaults is a whole
    table, as recordings made before parts hold)."""

    pid: int
    rows: tuple[MappingRow, ...]
    append: bool = False
    complete: bool = True


@record("mapping_totals")
@dataclass(frozen=True, slots=True)
class MappingTotals(Record):
    """The whole of ``pid``'s mappings from one read of /proc/PID/smaps_rollup: the kernel's own
    sums (its Pss is summed before rounding, so it may exceed the rows' Pss by under 1 KiB a
    mapping)."""

    pid: int
    rss_bytes: int
    pss_bytes: int
    dirty_bytes: int  # Shared_Dirty + Private_Dirty
    swap_bytes: int
    #: SwapPss: swap shared with other processes (after fork) divided among them; None when the
    #: kernel does not print it (or a recording predates it)
    swap_pss_bytes: int | None = None


@record("target_gone")
@dataclass(frozen=True, slots=True)
class TargetGone(Record):
    """A drill-in probe found its target gone (CLOCK_MONOTONIC ns when it noticed)."""

    pid: int
    ts_ns: int


@record("focus")
@dataclass(frozen=True, slots=True)
class Focus(Record):
    """The user began (``on``) or stopped looking at ``pid`` closely (the drill-in): the state keeps
    that process's data from then on, and a replay shows where the user looked."""

    pid: int
    on: bool = True


@record("wss_start")
@dataclass(frozen=True, slots=True)
class WorkingSetStart(Record):
    """A working-set measurement of ``pid`` began (the user's ``w``): its referenced bits were
    cleared at ``ts_ns`` (CLOCK_MONOTONIC); a window is read every ``window_ns``. ``source``
    names the kernel facility ("referenced bits": /proc/PID/clear_refs and smaps Referenced)."""

    pid: int
    ts_ns: int
    window_ns: int
    source: str = "referenced bits"
    #: the first clear's cost: CPU time of memtop's thread, and wall time
    cost_cpu_ns: int = 0
    cost_wall_ns: int = 0


# (name, size_bytes, rss_bytes, referenced_bytes): one group of mappings by name ("[anon]" for
# unnamed anonymous mappings, "[other]" for the rest past the largest)
WorkingSetMapping = tuple[str, int, int, int]


@record("wss_window")
@dataclass(frozen=True, slots=True)
class WorkingSetWindow(Record):
    """One window of a working-set measurement of ``pid``: the bytes it touched between
    ``start_ns`` and ``end_ns`` (smaps ``Referenced`` after clearing the bits at the start), of
    its resident bytes then, by mapping. ``cost_*``: reading smaps and clearing the bits for the
    next window."""

    pid: int
    start_ns: int
    end_ns: int
    referenced_bytes: int
    rss_bytes: int
    anon_referenced_bytes: int
    file_referenced_bytes: int
    mappings: tuple[WorkingSetMapping, ...]
    cost_cpu_ns: int
    cost_wall_ns: int
    source: str = "referenced bits"
