"""The process drill-in view: one process's RSS history, fault stacks, faults by mapping, heap
growth stacks and mappings, as data (the JSON snapshot) and text.

``document`` returns ``{"pane": "process", "pid": int, "section": SECTION, "rows": [...]}`` plus
context (comm, exit time, totals). Fault stack and growth rows carry ``frames`` (innermost first).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, ClassVar, Literal, TypedDict, get_args

from memtop.core import fmt
from memtop.core.errors import MemtopError
from memtop.records.oom import OomKill
from memtop.records.process import HUGETLB_LABEL, MappingRow
from memtop.state import State
from memtop.state.oom import OomState
from memtop.state.process import ProcessState, Target
from memtop.state.processes import ProcessesState
from memtop.views import (
    Column,
    Options,
    ProbeStatusDoc,
    View,
    measuring,
    no_reading_text,
    probe_status,
    render_table,
    status_notes,
    taken_at,
)
from memtop.views.segments import Sentence

#: the drill-in's tabs, each a document of its own (``section``)
Section = Literal["history", "fault_stacks", "fault_files", "growth", "mappings", "working_set"]
SECTIONS: tuple[Section, ...] = get_args(Section)
#: what the drill-in's per-pid fault events cost the process drilled into, per fault, as measured
#: (bench/drill_fault_cost.py: a fault-heavy workload, medians of alternating runs); the fault
#: sections say so, since the events run only while the drill-in is open
FAULT_EVENTS_SLOWDOWN = "≈1.6× (a fault-heavy loop: 2.0 → 3.3 µs a fault)"
SECTION_TITLES = {
    "history": "RSS and faults over time",
    "fault_stacks": "Page faults by user stack",
    "fault_files": "Page faults by mapping",
    "growth": "Heap growth (brk, mmap, munmap) by user stack",
    "mappings": "Mappings (pmap -x)",
    "working_set": "Working set: the memory it touched in each window",
}
#: what a working-set measurement disturbs, said with its figures
WSS_DISTURBS = (
    "clearing the referenced bits makes reclaim see the process's pages as unused until it "
    "touches them again (it may lose pages it would have kept); each clear and each smaps read "
    "walks its page tables"
)
#: what the mappings' table sorts by
MappingSortKey = Literal[
    "start", "size_bytes", "rss_bytes", "pss_bytes", "dirty_bytes", "swap_bytes", "mode", "name"
]
MAPPING_SORT_KEYS: tuple[MappingSortKey, ...] = get_args(MappingSortKey)


class OomKillDoc(TypedDict):
    """What the OOM kill's record says of its victim (``oom_kill``)."""

    ts_ns: int
    anon_rss_bytes: int
    file_rss_bytes: int
    shmem_rss_bytes: int
    total_vm_bytes: int
    trigger_pid: int
    trigger_comm: str
    scope: str
    memcg: str | None


class Lead(TypedDict):
    """The fields every section's document has after its ``section``."""

    comm: str
    source: str
    taken_at_ns: int
    taken_at: str | None
    exited_ns: int | None
    probes: dict[str, ProbeStatusDoc]
    oom_kill: OomKillDoc | None


class SectionHead(Lead):
    """The fields every section's document has (``section`` and ``rows`` are each section's
    type)."""

    pane: str
    pid: int
    measured: bool
    lost: dict[str, int]


class HistoryRow(TypedDict):
    ts_ns: int
    t_s: float
    anon_bytes: int
    file_bytes: int
    shmem_bytes: int
    swap_bytes: int
    rss_bytes: int
    minor_faults_per_s: float
    major_faults_per_s: float


class StackRow(TypedDict):
    """A row of user stacks (fault stacks, growth): what the drill-in's stack tree needs."""

    stack_id: int
    frames: list[str]
    #: the first frame in the program itself (the table's WHERE)
    top: str


class FaultStackRow(StackRow):
    count: int
    minor_faults: int
    major_faults: int


class FaultFileRow(TypedDict):
    path: str
    count: int
    minor_faults: int
    major_faults: int
    file_backed: bool
    hugetlb: bool


class GrowthRow(StackRow):
    grown_bytes: int
    net_bytes: int
    calls: int
    brk_calls: int
    brk_grown_bytes: int
    brk_shrunk_bytes: int
    mmap_calls: int
    mmap_bytes: int
    munmap_calls: int
    munmap_bytes: int
    freed_bytes: int


class MappingDoc(TypedDict):
    """A mapping of /proc/PID/smaps (the mappings section's ``rows[]``)."""

    address: str
    start: int
    end: int
    size_bytes: int
    rss_bytes: int
    pss_bytes: int
    dirty_bytes: int
    swap_bytes: int
    mode: str
    name: str


#: the process's mapping totals; "from" is a keyword, hence the functional form
MappingTotals = TypedDict(
    "MappingTotals",
    {
        "size_bytes": int | None,
        "rss_bytes": int | None,
        "pss_bytes": int | None,
        "dirty_bytes": int | None,
        "swap_bytes": int | None,
        "swap_pss_bytes": int | None,
        "from": str | None,
    },
)


class GrowthTotals(TypedDict):
    grown_bytes: int | None
    net_bytes: int | None
    calls: int | None


class CoverageDoc(TypedDict):
    """Which threads the fault probe traces (``coverage``)."""

    threads_total: int
    threads_traced: int
    threads_uncovered: int
    covered: bool
    reason: str


class WssWindowDoc(TypedDict):
    start_ns: int
    end_ns: int
    referenced_bytes: int
    rss_bytes: int
    cold_bytes: int
    anon_referenced_bytes: int
    file_referenced_bytes: int
    cost_cpu_ns: int
    cost_wall_ns: int


class WorkingSetDoc(TypedDict):
    """The latest working-set measurement (``working_set``)."""

    source: str
    disturbs: str
    window_s: float
    started_ns: int
    start_cost_cpu_ns: int
    windows: list[WssWindowDoc]
    latest: WssWindowDoc | None


class WssRow(TypedDict):
    name: str
    size_bytes: int
    rss_bytes: int
    referenced_bytes: int
    cold_bytes: int
    referenced_pct: float


class HistoryDoc(SectionHead):
    section: Literal["history"]
    rows: list[HistoryRow]


class FaultStacksDoc(SectionHead):
    section: Literal["fault_stacks"]
    coverage: CoverageDoc | None
    total_faults: int | None
    rows: list[FaultStackRow]


class FaultFilesDoc(SectionHead):
    section: Literal["fault_files"]
    coverage: CoverageDoc | None
    total_faults: int | None
    hugetlb_faults: int | None
    rows: list[FaultFileRow]


class GrowthDoc(SectionHead):
    section: Literal["growth"]
    totals: GrowthTotals
    rows: list[GrowthRow]


class MappingsDoc(SectionHead):
    section: Literal["mappings"]
    totals: MappingTotals
    complete: bool
    read_at_ns: int
    totals_read_at_ns: int
    rows: list[MappingDoc]


class WorkingSetSectionDoc(SectionHead):
    section: Literal["working_set"]
    working_set: WorkingSetDoc | None
    rows: list[WssRow]


#: the drill-in's document (docs/panes/process.md): one type per section, told apart by ``section``
ProcessDoc = HistoryDoc | FaultStacksDoc | FaultFilesDoc | GrowthDoc | MappingsDoc | WorkingSetSectionDoc
#: each section's document type (tests/unit/test_pane_schemas.py checks the page's tables against them)
SECTION_DOCS: dict[str, type[Any]] = {
    "history": HistoryDoc,
    "fault_stacks": FaultStacksDoc,
    "fault_files": FaultFilesDoc,
    "growth": GrowthDoc,
    "mappings": MappingsDoc,
    "working_set": WorkingSetSectionDoc,
}


def kib(n: int) -> str:
    return f"{int(n) // 1024}"


def caller_frame(frames: Sequence[str]) -> str:
    """The first frame in the program itself rather than libc's wrappers, for the table."""
    for f in frames:
        if "[libc.so" not in f and "[ld-linux" not in f:
            return f
    return frames[0] if frames else "-"


HistoryKey = Literal[
    "t_s", "anon_bytes", "file_bytes", "shmem_bytes", "swap_bytes", "minor_faults_per_s", "major_faults_per_s"
]
FaultStackKey = Literal["count", "minor_faults", "major_faults", "top"]
FaultFileKey = Literal["count", "minor_faults", "major_faults", "path"]
GrowthKey = Literal[
    "grown_bytes", "net_bytes", "calls", "brk_grown_bytes", "mmap_bytes", "munmap_bytes", "top"
]
MappingKey = Literal[
    "address", "size_bytes", "rss_bytes", "pss_bytes", "dirty_bytes", "swap_bytes", "mode", "name"
]
WssKey = Literal["referenced_bytes", "rss_bytes", "cold_bytes", "referenced_pct", "size_bytes", "name"]
HISTORY_COLUMNS: tuple[Column[HistoryKey], ...] = (
    Column("t_s", "T(s)", lambda v: f"{v:.1f}"),
    Column("anon_bytes", "ANON", fmt.bytes_h),
    Column("file_bytes", "FILE", fmt.bytes_h),
    Column("shmem_bytes", "SHMEM", fmt.bytes_h),
    Column("swap_bytes", "SWAP", fmt.bytes_h),
    Column("minor_faults_per_s", "MINFLT/s", fmt.count_h),
    Column("major_faults_per_s", "MAJFLT/s", fmt.count_h),
)
FAULT_STACK_COLUMNS: tuple[Column[FaultStackKey], ...] = (
    Column("count", "FAULTS", fmt.count_h),
    Column("minor_faults", "MINOR", fmt.count_h),
    Column("major_faults", "MAJOR", fmt.count_h),
    Column("top", "WHERE", numeric=False),
)
FAULT_FILE_COLUMNS: tuple[Column[FaultFileKey], ...] = (
    Column("count", "FAULTS", fmt.count_h),
    Column("minor_faults", "MINOR", fmt.count_h),
    Column("major_faults", "MAJOR", fmt.count_h),
    Column("path", "MAPPING", numeric=False),
)
GROWTH_COLUMNS: tuple[Column[GrowthKey], ...] = (
    Column("grown_bytes", "GROWN", fmt.bytes_h),
    Column("net_bytes", "NET", fmt.bytes_h),
    Column("calls", "CALLS", fmt.count_h),
    Column("brk_grown_bytes", "BRK", fmt.bytes_h),
    Column("mmap_bytes", "MMAP", fmt.bytes_h),
    Column("munmap_bytes", "MUNMAP", fmt.bytes_h),
    Column("top", "WHERE", numeric=False),
)
MAPPING_COLUMNS: tuple[Column[MappingKey], ...] = (
    Column("address", "Address", numeric=False),
    Column("size_bytes", "Kbytes", kib),
    Column("rss_bytes", "RSS", kib),
    Column("pss_bytes", "PSS", kib),
    Column("dirty_bytes", "Dirty", kib),
    Column("swap_bytes", "Swap", kib),
    Column("mode", "Mode", numeric=False),
    Column("name", "Mapping", numeric=False),
)
WSS_COLUMNS: tuple[Column[WssKey], ...] = (
    Column("referenced_bytes", "TOUCHED", fmt.bytes_h),
    Column("rss_bytes", "RSS", fmt.bytes_h),
    Column("cold_bytes", "COLD", fmt.bytes_h),
    Column("referenced_pct", "HOT %", lambda v: f"{v:.0f}%"),
    Column("size_bytes", "SIZE", fmt.bytes_h),
    Column("name", "MAPPING", numeric=False),
)
#: each section's table (tests/unit/test_pane_schemas.py checks the keys against its rows' type)
SECTION_COLUMNS: dict[str, tuple[Column[str], ...]] = {
    "history": HISTORY_COLUMNS,
    "fault_stacks": FAULT_STACK_COLUMNS,
    "fault_files": FAULT_FILE_COLUMNS,
    "growth": GROWTH_COLUMNS,
    "mappings": MAPPING_COLUMNS,
    "working_set": WSS_COLUMNS,
}


def history_rows(state: State, pid: int) -> list[HistoryRow]:
    row = _row(state, pid)
    if row is None:
        return []
    t0 = state.first_ts_ns or row.history.first_ts_ns()
    return [
        {
            "ts_ns": h.ts_ns,
            "t_s": round((h.ts_ns - t0) / 1e9, 3),
            "anon_bytes": h.anon_bytes,
            "file_bytes": h.file_bytes,
            "shmem_bytes": h.shmem_bytes,
            "swap_bytes": h.swap_bytes,
            "rss_bytes": h.anon_bytes + h.file_bytes + h.shmem_bytes,
            "minor_faults_per_s": round(h.minflt_per_s, 3),
            "major_faults_per_s": round(h.majflt_per_s, 3),
        }
        for h in row.history
    ]


def _row(state: State, pid: int) -> Any:
    t = state.get(ProcessState).target(pid)
    if t is not None and t.row is not None:
        return t.row
    return state.get(ProcessesState).row(pid)


def fault_stack_rows(state: State, pid: int) -> list[FaultStackRow]:
    t = state.get(ProcessState).target(pid)
    if t is None:
        return []
    rows: list[FaultStackRow] = [
        {
            "stack_id": s.stack_id,
            "count": s.minor_faults + s.major_faults,
            "minor_faults": s.minor_faults,
            "major_faults": s.major_faults,
            "frames": list(s.frames),
            "top": caller_frame(s.frames),
        }
        for s in t.fault_stacks.values()
    ]
    rows.sort(key=lambda r: (-r["count"], r["stack_id"]))
    return rows


def fault_file_rows(state: State, pid: int) -> list[FaultFileRow]:
    t = state.get(ProcessState).target(pid)
    if t is None:
        return []
    rows: list[FaultFileRow] = [
        {
            "path": f.path,
            "count": f.minor_faults + f.major_faults,
            "minor_faults": f.minor_faults,
            "major_faults": f.major_faults,
            "file_backed": f.path.startswith("/") and not f.path.startswith("/anon_hugepage"),
            # each fault here is a huge page fault (a hugetlb page, 2 MiB or 1 GiB)
            "hugetlb": f.path == HUGETLB_LABEL,
        }
        for f in t.fault_files.values()
    ]
    rows.sort(key=lambda r: (-r["major_faults"], -r["count"], r["path"]))
    return rows


def growth_rows(state: State, pid: int) -> list[GrowthRow]:
    t = state.get(ProcessState).target(pid)
    if t is None:
        return []
    rows: list[GrowthRow] = []
    for g in t.growth.values():
        r: GrowthRow = {
            "stack_id": g.stack_id,
            "grown_bytes": g.grown_bytes,
            "net_bytes": g.net_bytes,
            "calls": g.calls,
            "brk_calls": g.brk_calls,
            "brk_grown_bytes": g.brk_grown_bytes,
            "brk_shrunk_bytes": g.brk_shrunk_bytes,
            "mmap_calls": g.mmap_calls,
            "mmap_bytes": g.mmap_bytes,
            "munmap_calls": g.munmap_calls,
            "munmap_bytes": g.munmap_bytes,
            "freed_bytes": g.freed_bytes,
            "frames": list(g.frames),
            "top": caller_frame(g.frames),
        }
        rows.append(r)
    rows.sort(key=lambda r: (-r["grown_bytes"], -r["net_bytes"], -r["calls"], r["stack_id"]))
    return rows


#: where each sortable mapping field sits in a MappingRow
MAPPING_INDEX = {
    "start": 0,
    "size_bytes": 2,
    "rss_bytes": 3,
    "pss_bytes": 4,
    "dirty_bytes": 5,
    "swap_bytes": 6,
    "mode": 7,
    "name": 8,
}


def mapping_dict(m: MappingRow) -> MappingDoc:
    return {
        "address": f"{m[0]:016x}",
        "start": m[0],
        "end": m[1],
        "size_bytes": m[2],
        "rss_bytes": m[3],
        "pss_bytes": m[4],
        "dirty_bytes": m[5],
        "swap_bytes": m[6],
        "mode": m[7],
        "name": m[8],
    }


def shown_mappings(t: Target | None) -> tuple[Sequence[MappingRow], bool]:
    """The mappings to show and whether they are a complete read: the last complete table, else
    the first read as far as it has come."""
    if t is None:
        return (), False
    if t.mappings or t.mappings_reading is None:
        return t.mappings, t.mappings_ts_ns > 0
    return t.mappings_reading, False


def sorted_mappings(
    rows: Sequence[MappingRow], sort: str = "", reverse: bool = False, limit: int | None = None
) -> list[MappingRow]:
    """``rows`` in the order asked (address order, as pmap, by default), the first ``limit`` of
    them when given. A full sort by a C key beats a Python key or a partial heap sort of the first
    rows (docs/performance.md)."""
    if sort not in MAPPING_INDEX:  # no order asked for: pmap's
        sort, reverse = "start", False
    i = MAPPING_INDEX[sort]
    if i == 0:  # smaps lists mappings in address order already
        ordered = list(reversed(rows)) if reverse else list(rows)
    else:
        ordered = sorted(rows, key=itemgetter(i, 0), reverse=reverse)
    return ordered[:limit] if limit is not None else ordered


def mapping_totals(t: Target | None) -> MappingTotals:
    """The process's totals: the kernel's own sums from smaps_rollup as soon as they are read
    (before any row), the sum of the rows where there is no rollup (recordings made before it);
    ``size_bytes`` (not in the rollup) once a complete table is in. None where unknown."""
    rows, complete = shown_mappings(t)
    out: MappingTotals = {
        "size_bytes": None,
        "rss_bytes": None,
        "pss_bytes": None,
        "dirty_bytes": None,
        "swap_bytes": None,
        "swap_pss_bytes": None,
        "from": None,
    }
    if complete and t is not None:
        out["size_bytes"] = t.mappings_size_bytes
    roll = t.mapping_totals if t is not None else None
    if roll is not None:
        out["rss_bytes"] = roll.rss_bytes
        out["pss_bytes"] = roll.pss_bytes
        out["dirty_bytes"] = roll.dirty_bytes
        out["swap_bytes"] = roll.swap_bytes
        out["swap_pss_bytes"] = roll.swap_pss_bytes
        out["from"] = "smaps_rollup"
    elif complete:
        out["rss_bytes"] = sum(m[3] for m in rows)
        out["pss_bytes"] = sum(m[4] for m in rows)
        out["dirty_bytes"] = sum(m[5] for m in rows)
        out["swap_bytes"] = sum(m[6] for m in rows)
        out["from"] = "smaps"
    return out


def working_set(t: Target | None) -> WorkingSetDoc | None:
    """The latest working-set measurement: which source, what it disturbs, its window, and each
    window's figures (the curve) with what reading it cost; None when none was taken."""
    if t is None or t.wss_start is None:
        return None
    s = t.wss_start
    windows: list[WssWindowDoc] = [
        {
            "start_ns": w.start_ns,
            "end_ns": w.end_ns,
            "referenced_bytes": w.referenced_bytes,
            "rss_bytes": w.rss_bytes,
            "cold_bytes": max(0, w.rss_bytes - w.referenced_bytes),
            "anon_referenced_bytes": w.anon_referenced_bytes,
            "file_referenced_bytes": w.file_referenced_bytes,
            "cost_cpu_ns": w.cost_cpu_ns,
            "cost_wall_ns": w.cost_wall_ns,
        }
        for w in t.wss
    ]
    return {
        "source": s.source,
        "disturbs": WSS_DISTURBS,
        "window_s": s.window_ns / 1e9,
        "started_ns": s.ts_ns,
        "start_cost_cpu_ns": s.cost_cpu_ns,
        "windows": windows,
        "latest": windows[-1] if windows else None,
    }


def working_set_rows(t: Target | None) -> list[WssRow]:
    """The latest window by mapping (grouped by name), the most touched first."""
    if t is None or not t.wss:
        return []
    return [
        {
            "name": name,
            "size_bytes": size,
            "rss_bytes": rss,
            "referenced_bytes": ref,
            "cold_bytes": max(0, rss - ref),
            "referenced_pct": round(100.0 * ref / rss, 1) if rss else 0.0,
        }
        for name, size, rss, ref in t.wss[-1].mappings
    ]


def working_set_text(wss: WorkingSetDoc | None) -> str:
    """The measurement in lines: the latest window's split, the curve, the source and its cost."""
    if wss is None:
        return "not measured: press w in the drill-in to measure (it clears the referenced bits)\n"
    last = wss["latest"]
    out = f"source: {wss['source']}, {wss['window_s']:g} s windows; disturbs: {wss['disturbs']}\n"
    if last is None:
        return out + "measuring: the first window is not over\n"
    out += (
        f"touched {fmt.bytes_h(last['referenced_bytes'])} of {fmt.bytes_h(last['rss_bytes'])} resident "
        f"(cold {fmt.bytes_h(last['cold_bytes'])}; anon {fmt.bytes_h(last['anon_referenced_bytes'])}, "
        f"file {fmt.bytes_h(last['file_referenced_bytes'])}); a window cost "
        f"{fmt.ns_h(last['cost_cpu_ns'])} CPU\n"
    )
    out += "windows: " + " ".join(fmt.bytes_h(w["referenced_bytes"]) for w in wss["windows"][-20:]) + "\n"
    return out


def totals_text(tot: MappingTotals) -> str:
    return (
        f"total kB {_kib_or_dash(tot['size_bytes'])}  RSS {_kib_or_dash(tot['rss_bytes'])}"
        f"  PSS {_kib_or_dash(tot['pss_bytes'])}  Dirty {_kib_or_dash(tot['dirty_bytes'])}"
        f"  Swap {_kib_or_dash(tot['swap_bytes'])}"
        + (f"  SwapPss {kib(tot['swap_pss_bytes'])}" if tot["swap_pss_bytes"] is not None else "")
    )


def _kib_or_dash(n: int | None) -> str:
    return "-" if n is None else kib(n)


def fault_coverage(state: State, pid: int) -> CoverageDoc | None:
    """Which threads the fault probe traces: None before it said (or in a recording made before
    it did)."""
    t = state.get(ProcessState).target(pid)
    cov = t.fault_coverage if t is not None else None
    if cov is None:
        return None
    return {
        "threads_total": cov.threads_total,
        "threads_traced": cov.threads_traced,
        "threads_uncovered": cov.threads_uncovered,
        "covered": cov.threads_uncovered == 0,
        "reason": cov.reason,
    }


def coverage_text(cov: CoverageDoc | None) -> str:
    if cov is None or cov["covered"]:
        return ""
    return (
        f"threads: {cov['threads_traced']} of {cov['threads_total']} traced; "
        f"{cov['threads_uncovered']} not traced ({cov['reason']}): their faults are in no count\n"
    )


def _lead(head: SectionHead) -> Lead:
    return {
        "comm": head["comm"],
        "source": head["source"],
        "taken_at_ns": head["taken_at_ns"],
        "taken_at": head["taken_at"],
        "exited_ns": head["exited_ns"],
        "probes": head["probes"],
        "oom_kill": head["oom_kill"],
    }


def _faults_measured(probe_measuring: bool, cov: CoverageDoc | None, counted: bool) -> bool:
    """A probe that failed, never ran or traces no thread measured nothing: its 0 would read as
    "no faults" (counts it did take before stand)."""
    return counted or (probe_measuring and (cov is None or cov["threads_traced"] > 0))


def oom_kill_of(state: State, pid: int) -> OomKill | None:
    """The OOM kill whose victim ``pid`` was (the newest), or None."""
    return next((k for k in state.get(OomState).kills if k.victim_pid == pid), None)


class ProcessView(View[ProcessDoc]):
    name = "process"
    title = "Process"
    order = 15
    columns: ClassVar[tuple[Column[FaultStackKey], ...]] = FAULT_STACK_COLUMNS
    #: the probe each section's figures come from: the declaration of what feeds this pane
    section_probes: ClassVar[dict[str, str]] = {
        "history": "procfs",
        "fault_stacks": "faultstack",
        "fault_files": "faultstack",
        "growth": "growth",
        "mappings": "smaps",
        "working_set": "wss",
    }
    #: the working-set probe runs only when the user asks (``w``, or a flag): "off" until then
    on_request = ("wss",)
    probes = tuple(dict.fromkeys(section_probes.values()))
    sections = SECTIONS

    def default_options(self) -> Options:
        return Options(section=SECTIONS[0], reverse=False)

    def ready(self, state: State, opts: Options) -> bool:
        """The mappings' totals and a whole first table are in, or smaps is not measuring (failed,
        or the recording has none): a large table comes in parts over several ticks."""
        if opts.pid is not None and opts.section == "working_set":
            # a window is in, or the measurement failed (never asked for: nothing to wait for)
            tw = state.get(ProcessState).target(opts.pid)
            st = state.probe_state("wss")
            return (tw is not None and bool(tw.wss)) or st is None or st.state in ("failed", "detached")
        if opts.pid is None or not measuring(state, "smaps"):
            return True
        t = state.get(ProcessState).target(opts.pid)
        if t is not None and t.gone_ns:
            return True  # it exited: what was read is all there will be
        return t is not None and t.mapping_totals is not None and bool(t.mappings_ts_ns)

    def document(self, state: State, opts: Options) -> ProcessDoc:
        if opts.pid is None:
            raise MemtopError("the process view needs a pid", "--pid PID")
        section = opts.section or "history"
        if section not in SECTIONS:
            raise MemtopError(f"unknown section {section!r}", "sections: " + ", ".join(SECTIONS))
        pid = opts.pid
        head = self.section_head(state, pid, self.section_probes[section])
        if section == "history":
            return self.history_doc(state, pid, head)
        if section == "fault_stacks":
            return self.fault_stacks_doc(state, pid, head)
        if section == "fault_files":
            return self.fault_files_doc(state, pid, head)
        if section == "growth":
            return self.growth_doc(state, pid, head)
        if section == "working_set":
            return self.working_set_doc(state, pid, head)
        return self.mappings_doc(state, pid, opts, head)

    def section_head(self, state: State, pid: int, probe: str) -> SectionHead:
        """The fields every section has: which process, when, its probe's status, its OOM kill;
        ``measured`` as the probe says (a section may know better) and what the probes lost."""
        row = _row(state, pid)
        kill = oom_kill_of(state, pid)
        return {
            "pane": self.name,
            "pid": pid,
            "comm": row.sample.comm if row is not None else (kill.victim_comm if kill is not None else ""),
            "source": state.mode,
            "taken_at_ns": state.ts_ns,
            "taken_at": taken_at(state),
            "exited_ns": state.get(ProcessState).exited_ns(pid, state) or None,
            "probes": {probe: probe_status(state, probe)},
            # an OOM victim: what the kill's record says of it (all there is for one that lived
            # less than a tick)
            "oom_kill": (
                {
                    "ts_ns": kill.ts_ns,
                    "anon_rss_bytes": kill.anon_rss_bytes,
                    "file_rss_bytes": kill.file_rss_bytes,
                    "shmem_rss_bytes": kill.shmem_rss_bytes,
                    "total_vm_bytes": kill.total_vm_bytes,
                    "trigger_pid": kill.trigger_pid,
                    "trigger_comm": kill.trigger_comm,
                    "scope": kill.scope,
                    "memcg": kill.memcg or None,
                }
                if kill is not None
                else None
            ),
            "measured": measuring(state, probe),
            "lost": {f"{p}:{w}": n for (p, w), n in state.lost.items() if p in self.probes and n},
        }

    # each section's document: the head's fields in the head's order, the section's own, then
    # ``measured``, ``lost`` and ``rows`` (the JSON's order, pinned)
    def history_doc(self, state: State, pid: int, head: SectionHead) -> HistoryDoc:
        return {
            "pane": head["pane"],
            "pid": head["pid"],
            "section": "history",
            **_lead(head),
            "measured": head["measured"],
            "lost": head["lost"],
            "rows": history_rows(state, pid),
        }

    def fault_stacks_doc(self, state: State, pid: int, head: SectionHead) -> FaultStacksDoc:
        cov = fault_coverage(state, pid)
        rows = fault_stack_rows(state, pid)
        measured = _faults_measured(head["measured"], cov, bool(rows))
        return {
            "pane": head["pane"],
            "pid": head["pid"],
            "section": "fault_stacks",
            **_lead(head),
            "coverage": cov,
            "total_faults": sum(r["count"] for r in rows) if measured else None,
            "measured": measured,
            "lost": head["lost"],
            "rows": rows,
        }

    def fault_files_doc(self, state: State, pid: int, head: SectionHead) -> FaultFilesDoc:
        cov = fault_coverage(state, pid)
        rows = fault_file_rows(state, pid)
        measured = _faults_measured(head["measured"], cov, bool(rows))
        return {
            "pane": head["pane"],
            "pid": head["pid"],
            "section": "fault_files",
            **_lead(head),
            "coverage": cov,
            "total_faults": sum(r["count"] for r in rows) if measured else None,
            # hfaults without kprobes: huge page faults of this process, in hugetlb mappings
            "hugetlb_faults": sum(r["count"] for r in rows if r["hugetlb"]) if measured else None,
            "measured": measured,
            "lost": head["lost"],
            "rows": rows,
        }

    def growth_doc(self, state: State, pid: int, head: SectionHead) -> GrowthDoc:
        rows = growth_rows(state, pid)
        measured = head["measured"] or bool(rows)
        return {
            "pane": head["pane"],
            "pid": head["pid"],
            "section": "growth",
            **_lead(head),
            "totals": {
                "grown_bytes": sum(r["grown_bytes"] for r in rows) if measured else None,
                "net_bytes": sum(r["net_bytes"] for r in rows) if measured else None,
                "calls": sum(r["calls"] for r in rows) if measured else None,
            },
            "measured": measured,
            "lost": head["lost"],
            "rows": rows,
        }

    def working_set_doc(self, state: State, pid: int, head: SectionHead) -> WorkingSetSectionDoc:
        t = state.get(ProcessState).target(pid)
        wss = working_set(t)
        measured = head["measured"] or wss is not None
        return {
            "pane": head["pane"],
            "pid": head["pid"],
            "section": "working_set",
            **_lead(head),
            "working_set": wss,
            "measured": measured,
            "lost": head["lost"],
            "rows": working_set_rows(t) if measured else [],
        }

    def mappings_doc(self, state: State, pid: int, opts: Options, head: SectionHead) -> MappingsDoc:
        t = state.get(ProcessState).target(pid)
        shown, complete = shown_mappings(t)
        have = bool(shown) or (t is not None and t.mapping_totals is not None)
        measured = head["measured"] or have  # a recording's table stands without the probe's status
        return {
            "pane": head["pane"],
            "pid": head["pid"],
            "section": "mappings",
            **_lead(head),
            "totals": mapping_totals(t if measured else None),
            "complete": complete and measured,
            "read_at_ns": t.mappings_ts_ns if t is not None else 0,
            "totals_read_at_ns": t.mapping_totals_ts_ns if t is not None else 0,
            "measured": measured,
            "lost": head["lost"],
            "rows": (
                [mapping_dict(m) for m in sorted_mappings(shown, opts.sort, opts.reverse)] if measured else []
            ),
        }

    def text(self, state: State, opts: Options) -> str:
        doc = self.document(state, opts)
        section = doc["section"]
        head = f"Process {doc['pid']} ({doc['comm']})"
        if doc["exited_ns"]:
            head += " — exited"
        cov = doc["coverage"] if doc["section"] in ("fault_stacks", "fault_files") else None
        out = head + "\n" + status_notes(doc["probes"]) + coverage_text(cov)
        if not doc["measured"]:
            if section == "working_set":
                return out + f"{SECTION_TITLES[section]}: " + working_set_text(None)
            return out + f"{SECTION_TITLES[section]}: not measured\n"
        out += render_table(SECTION_TITLES[section], SECTION_COLUMNS[section], doc["rows"])
        if doc["section"] == "fault_stacks":
            out += "\nStacks (innermost first)\n"
            for fr in doc["rows"][:20]:
                out += f"  {fmt.count_h(fr['count'])} faults\n" + "".join(
                    f"      {f}\n" for f in fr["frames"]
                )
        elif doc["section"] == "growth":
            out += "\nStacks (innermost first)\n"
            for g in doc["rows"][:20]:
                label = f"{fmt.bytes_h(g['grown_bytes'])} grown, net {fmt.bytes_h(g['net_bytes'])}, {g['calls']} calls"
                out += f"  {label}\n" + "".join(f"      {f}\n" for f in g["frames"])
        elif doc["section"] == "mappings":
            if not doc["complete"]:
                out += f"(still reading: {len(doc['rows'])} mappings so far)\n"
            out += totals_text(doc["totals"]) + "\n"
        elif doc["section"] == "working_set":
            out += working_set_text(doc["working_set"])
        return out


# -- the drill-in's sentences (the TUI draws them: memtop/ui/screens/process.py) -------------------
def header_segments(state: State, pid: int, clock: Callable[[int], str]) -> Sentence:
    """The drill-in's header: the process's figures now, or what its OOM kill's record says of
    one that lived less than a tick; killed or exited, when (``clock``: HH:MM:SS of a
    CLOCK_MONOTONIC instant, the screen's)."""
    pstate = state.get(ProcessState)
    t = pstate.target(pid)
    row = t.row if t is not None else None
    h = Sentence()
    h.add(f" PID {pid} ", style="bold reverse")
    if row is not None:
        s = row.sample
        h.add(" ")
        h.add(s.comm, style="bold")
        h.add(
            f"  user {s.user}  RSS {fmt.bytes_h(s.rss_bytes)} (anon {fmt.bytes_h(s.rss_anon_bytes)}"
            f" file {fmt.bytes_h(s.rss_file_bytes)} shmem {fmt.bytes_h(s.rss_shmem_bytes)})"
            f"  swap {fmt.bytes_h(s.swap_bytes)}  faults {fmt.count_h(s.minor_faults)} minor"
            f" / {fmt.count_h(s.major_faults)} major  threads {s.threads}"
        )
    kill = oom_kill_of(state, pid)
    if row is None and kill is not None:
        # it lived less than a tick: what the kernel said of it at the kill is all there is
        h.add(" ")
        h.add(kill.victim_comm, style="bold")
        h.add(
            f"  at the kill: anon {fmt.bytes_h(kill.anon_rss_bytes)} file {fmt.bytes_h(kill.file_rss_bytes)}"
            f" shmem {fmt.bytes_h(kill.shmem_rss_bytes)}  total_vm {fmt.bytes_h(kill.total_vm_bytes)}"
            f"  triggered by {kill.trigger_comm} [{kill.trigger_pid}]"
            + (f"  limit of {kill.memcg} fired" if kill.memcg else "")
        )
    if kill is not None:
        h.add(f"   OOM-KILLED at {clock(kill.ts_ns)} ", style="bold reverse red")
    exited = pstate.exited_ns(pid, state)
    if exited and kill is None:
        ago = max(0.0, (state.ts_ns - exited) / 1e9) if state.ts_ns >= exited else 0.0
        h.add(
            f"   EXITED at {clock(exited)} ({ago:.0f}s ago) — showing its last data ",
            style="bold reverse red",
        )
    return h


def status_segments(view: View[Any], state: State) -> Sentence:
    """The drill-in's own probes (those that feed no pane): attached (and what they said),
    failed (why, what to do), erroring, what they lost; detached or absent ones are left out."""
    parts = Sentence()
    for name in view.own_probes:
        st = state.probe_state(name)
        if st is None or st.state == "detached":
            continue
        if parts:
            parts.add("  ")
        style = {"attached": "green", "failed": "red", "attaching": "yellow"}.get(st.state, "dim")
        parts.add(f"{name}: {st.state}", style=style)
        if st.state == "attached" and st.message:
            parts.add(f" ({st.message})", style="dim")
        if st.state == "failed":
            parts.add(f" — {st.message}", style="red")
            if st.hint:
                parts.add(f" ({st.hint})", style="italic")
        if st.state == "erroring":
            parts.add(f" — {no_reading_text(state, name) or st.message}", style="red")
        lost = state.lost_total(name)
        if lost:
            parts.add(f"  lost {lost}", style="bold red")
    return parts


def section_title(section: str, extra: str) -> Sentence:
    """A section's title line: its name, then what it shows now (dimmed)."""
    t = Sentence()
    t.add(SECTION_TITLES[section], style="bold")
    t.add(f"  {extra}", style="bold dim")
    return t


def fault_stack_label(r: FaultStackRow, total: int) -> Sentence:
    """A fault stack's line in the tree: its faults, its share of ``total``, its major faults,
    where in the program."""
    t = Sentence()
    t.add(f"{fmt.count_h(r['count']):>7} ", style="bold")
    share = 100.0 * r["count"] / total if total else 0.0
    t.add(f"{share:5.1f}%  ", style="bold")
    if r["major_faults"]:
        t.add(f"(major {fmt.count_h(r['major_faults'])}) ", style="bold red")
    t.add(str(r["top"]), style="bold")
    return t


def growth_label(r: GrowthRow) -> Sentence:
    """A growth stack's line in the tree: grown, net, calls, by which calls, where."""
    t = Sentence()
    t.add(f"{fmt.bytes_h(r['grown_bytes']):>8} ", style="bold")
    t.add(f"net {fmt.bytes_h(r['net_bytes']):>8}  {r['calls']:>6} calls  ", style="bold")
    kinds = [
        k for k, c in (("brk", r["brk_calls"]), ("mmap", r["mmap_calls"]), ("munmap", r["munmap_calls"])) if c
    ]
    t.add("/".join(kinds) + "  ", style="bold cyan")
    t.add(str(r["top"]), style="bold")
    return t


def mapping_totals_segments(tot: MappingTotals) -> Sentence:
    """The mappings' totals line, and where they come from when it is the kernel's rollup."""
    t = Sentence()
    t.add(totals_text(tot), style="bold")
    if tot["from"] == "smaps_rollup":
        t.add("  (smaps_rollup)", style="bold dim")
    return t


def working_set_segments(wss: WorkingSetDoc | None) -> Sentence:
    """The working set's totals: not measured, the first window not over, or what the last
    window touched of what was resident, the curve, and what a window cost."""
    t = Sentence()
    if wss is None:
        t.add("not measured", style="dim")
        return t
    last = wss["latest"]
    if last is None:
        t.add("the first window is not over yet", style="dim")
        return t
    t.add(f"touched {fmt.bytes_h(last['referenced_bytes'])}", style="bold")
    t.add(
        f" of {fmt.bytes_h(last['rss_bytes'])} resident (cold {fmt.bytes_h(last['cold_bytes'])})"
        f"  windows: {' '.join(fmt.bytes_h(w['referenced_bytes']) for w in wss['windows'][-12:])}"
    )
    t.add(f"\na window cost {fmt.ns_h(last['cost_cpu_ns'])} CPU; {wss['disturbs']}", style="dim")
    return t
