"""The process drill-in view: one process's RSS history, fault stacks, faults by mapping, heap
growth stacks and mappings, as data (the JSON snapshot) and text.

``document`` returns ``{"pane": "process", "pid": int, "section": SECTION, "rows": [...]}`` plus
context (comm, exit time, totals). Fault stack and growth rows carry ``frames`` (innermost first).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, ClassVar

from memtop.core import fmt
from memtop.core.errors import MemtopError
from memtop.records.oom import OomKill
from memtop.records.process import HUGETLB_LABEL, MappingRow
from memtop.state import State
from memtop.state.oom import OomState
from memtop.state.process import ProcessState, Target
from memtop.state.processes import ProcessesState
from memtop.views import Column, Options, View, measuring, probe_status, render_table, status_notes, taken_at

SECTIONS = ("history", "fault_stacks", "fault_files", "growth", "mappings")
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
}
MAPPING_SORT_KEYS = (
    "start",
    "size_bytes",
    "rss_bytes",
    "pss_bytes",
    "dirty_bytes",
    "swap_bytes",
    "mode",
    "name",
)


def kib(n: Any) -> str:
    return f"{int(n) // 1024}"


def caller_frame(row: dict[str, Any]) -> str:
    """The first frame in the program itself rather than libc's wrappers, for the table."""
    frames = [str(f) for f in row.get("frames") or []]
    for f in frames:
        if "[libc.so" not in f and "[ld-linux" not in f:
            return f
    return frames[0] if frames else "-"


SECTION_COLUMNS: dict[str, tuple[Column, ...]] = {
    "history": (
        Column("t_s", "T(s)", lambda v: f"{v:.1f}"),
        Column("anon_bytes", "ANON", fmt.bytes_h),
        Column("file_bytes", "FILE", fmt.bytes_h),
        Column("shmem_bytes", "SHMEM", fmt.bytes_h),
        Column("swap_bytes", "SWAP", fmt.bytes_h),
        Column("minor_faults_per_s", "MINFLT/s", fmt.count_h),
        Column("major_faults_per_s", "MAJFLT/s", fmt.count_h),
    ),
    "fault_stacks": (
        Column("count", "FAULTS", fmt.count_h),
        Column("minor_faults", "MINOR", fmt.count_h),
        Column("major_faults", "MAJOR", fmt.count_h),
        Column("top", "WHERE", numeric=False),
    ),
    "fault_files": (
        Column("count", "FAULTS", fmt.count_h),
        Column("minor_faults", "MINOR", fmt.count_h),
        Column("major_faults", "MAJOR", fmt.count_h),
        Column("path", "MAPPING", numeric=False),
    ),
    "growth": (
        Column("grown_bytes", "GROWN", fmt.bytes_h),
        Column("net_bytes", "NET", fmt.bytes_h),
        Column("calls", "CALLS", fmt.count_h),
        Column("brk_grown_bytes", "BRK", fmt.bytes_h),
        Column("mmap_bytes", "MMAP", fmt.bytes_h),
        Column("munmap_bytes", "MUNMAP", fmt.bytes_h),
        Column("top", "WHERE", numeric=False),
    ),
    "mappings": (
        Column("address", "Address", numeric=False),
        Column("size_bytes", "Kbytes", kib),
        Column("rss_bytes", "RSS", kib),
        Column("pss_bytes", "PSS", kib),
        Column("dirty_bytes", "Dirty", kib),
        Column("swap_bytes", "Swap", kib),
        Column("mode", "Mode", numeric=False),
        Column("name", "Mapping", numeric=False),
    ),
}


def history_rows(state: State, pid: int) -> list[dict[str, Any]]:
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


def fault_stack_rows(state: State, pid: int) -> list[dict[str, Any]]:
    t = state.get(ProcessState).target(pid)
    if t is None:
        return []
    rows: list[dict[str, Any]] = [
        {
            "stack_id": s.stack_id,
            "count": s.minor_faults + s.major_faults,
            "minor_faults": s.minor_faults,
            "major_faults": s.major_faults,
            "frames": list(s.frames),
        }
        for s in t.fault_stacks.values()
    ]
    for r in rows:
        r["top"] = caller_frame(r)
    rows.sort(key=lambda r: (-r["count"], r["stack_id"]))
    return rows


def fault_file_rows(state: State, pid: int) -> list[dict[str, Any]]:
    t = state.get(ProcessState).target(pid)
    if t is None:
        return []
    rows: list[dict[str, Any]] = [
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


def growth_rows(state: State, pid: int) -> list[dict[str, Any]]:
    t = state.get(ProcessState).target(pid)
    if t is None:
        return []
    rows = []
    for g in t.growth.values():
        r: dict[str, Any] = {
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
        }
        r["top"] = caller_frame(r)
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


def mapping_dict(m: MappingRow) -> dict[str, Any]:
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


def mapping_totals(t: Target | None) -> dict[str, Any]:
    """The process's totals: the kernel's own sums from smaps_rollup as soon as they are read
    (before any row), the sum of the rows where there is no rollup (recordings made before it);
    ``size_bytes`` (not in the rollup) once a complete table is in. None where unknown."""
    rows, complete = shown_mappings(t)
    out: dict[str, Any] = {
        k: None for k in ("size_bytes", "rss_bytes", "pss_bytes", "dirty_bytes", "swap_bytes")
    }
    out["from"] = None
    if complete and t is not None:
        out["size_bytes"] = t.mappings_size_bytes
    roll = t.mapping_totals if t is not None else None
    if roll is not None:
        out.update(
            rss_bytes=roll.rss_bytes,
            pss_bytes=roll.pss_bytes,
            dirty_bytes=roll.dirty_bytes,
            swap_bytes=roll.swap_bytes,
        )
        out["from"] = "smaps_rollup"
    elif complete:
        for k, i in (("rss_bytes", 3), ("pss_bytes", 4), ("dirty_bytes", 5), ("swap_bytes", 6)):
            out[k] = sum(m[i] for m in rows)
        out["from"] = "smaps"
    return out


def totals_text(tot: dict[str, Any]) -> str:
    return (
        f"total kB {_kib_or_dash(tot['size_bytes'])}  RSS {_kib_or_dash(tot['rss_bytes'])}"
        f"  PSS {_kib_or_dash(tot['pss_bytes'])}  Dirty {_kib_or_dash(tot['dirty_bytes'])}"
        f"  Swap {_kib_or_dash(tot['swap_bytes'])}"
    )


def _kib_or_dash(n: Any) -> str:
    return "-" if n is None else kib(n)


def fault_coverage(state: State, pid: int) -> dict[str, Any] | None:
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


def coverage_text(cov: dict[str, Any] | None) -> str:
    if cov is None or cov["covered"]:
        return ""
    return (
        f"threads: {cov['threads_traced']} of {cov['threads_total']} traced; "
        f"{cov['threads_uncovered']} not traced ({cov['reason']}): their faults are in no count\n"
    )


def oom_kill_of(state: State, pid: int) -> OomKill | None:
    """The OOM kill whose victim ``pid`` was (the newest), or None."""
    return next((k for k in state.get(OomState).kills if k.victim_pid == pid), None)


class ProcessView(View):
    name = "process"
    title = "Process"
    order = 15
    columns = SECTION_COLUMNS["fault_stacks"]
    #: the probe each section's figures come from: the declaration of what feeds this pane
    section_probes: ClassVar[dict[str, str]] = {
        "history": "procfs",
        "fault_stacks": "faultstack",
        "fault_files": "faultstack",
        "growth": "growth",
        "mappings": "smaps",
    }
    probes = tuple(dict.fromkeys(section_probes.values()))
    sections = SECTIONS

    def default_options(self) -> Options:
        return Options(section=SECTIONS[0], reverse=False)

    def ready(self, state: State, opts: Options) -> bool:
        """The mappings' totals and a whole first table are in, or smaps is not measuring (failed,
        or the recording has none): a large table comes in parts over several ticks."""
        if opts.pid is None or not measuring(state, "smaps"):
            return True
        t = state.get(ProcessState).target(opts.pid)
        if t is not None and t.gone_ns:
            return True  # it exited: what was read is all there will be
        return t is not None and t.mapping_totals is not None and bool(t.mappings_ts_ns)

    def document(self, state: State, opts: Options) -> dict[str, Any]:
        if opts.pid is None:
            raise MemtopError("the process view needs a pid", "--pid PID")
        section = opts.section or "history"
        if section not in SECTIONS:
            raise MemtopError(f"unknown section {section!r}", "sections: " + ", ".join(SECTIONS))
        pid = opts.pid
        pstate = state.get(ProcessState)
        row = _row(state, pid)
        kill = oom_kill_of(state, pid)
        probe = self.section_probes[section]
        measured = measuring(state, probe)
        doc: dict[str, Any] = {
            "pane": self.name,
            "pid": pid,
            "section": section,
            "comm": row.sample.comm if row is not None else (kill.victim_comm if kill is not None else ""),
            "source": state.mode,
            "taken_at_ns": state.ts_ns,
            "taken_at": taken_at(state),
            "exited_ns": pstate.exited_ns(pid, state) or None,
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
        }
        if section == "history":
            rows = history_rows(state, pid)
        elif section in ("fault_stacks", "fault_files"):
            cov = fault_coverage(state, pid)
            doc["coverage"] = cov
            rows = fault_stack_rows(state, pid) if section == "fault_stacks" else fault_file_rows(state, pid)
            # a probe that failed, never ran or traces no thread measured nothing: its 0 would
            # read as "no faults" (counts it did take before stand)
            measured = bool(rows) or (measured and (cov is None or cov["threads_traced"] > 0))
            doc["total_faults"] = sum(r["count"] for r in rows) if measured else None
            if section == "fault_files":
                # hfaults without kprobes: huge page faults of this process, in hugetlb mappings
                doc["hugetlb_faults"] = sum(r["count"] for r in rows if r["hugetlb"]) if measured else None
        elif section == "growth":
            rows = growth_rows(state, pid)
            measured = measured or bool(rows)
            doc["totals"] = {
                k: sum(r[k] for r in rows) if measured else None
                for k in ("grown_bytes", "net_bytes", "calls")
            }
        else:
            t = pstate.target(pid)
            shown, complete = shown_mappings(t)
            have = bool(shown) or (t is not None and t.mapping_totals is not None)
            measured = measured or have  # a recording's table stands without the probe's status
            rows = (
                [mapping_dict(m) for m in sorted_mappings(shown, opts.sort, opts.reverse)] if measured else []
            )
            doc["totals"] = mapping_totals(t if measured else None)
            doc["complete"] = complete and measured
            doc["read_at_ns"] = t.mappings_ts_ns if t is not None else 0
            doc["totals_read_at_ns"] = t.mapping_totals_ts_ns if t is not None else 0
        doc["measured"] = measured
        doc["lost"] = {f"{p}:{w}": n for (p, w), n in state.lost.items() if p in self.probes and n}
        doc["rows"] = rows
        return doc

    def text(self, state: State, opts: Options) -> str:
        doc = self.document(state, opts)
        section = doc["section"]
        head = f"Process {doc['pid']} ({doc['comm']})"
        if doc.get("exited_ns"):
            head += " — exited"
        out = head + "\n" + status_notes(doc["probes"]) + coverage_text(doc.get("coverage"))
        if not doc["measured"]:
            return out + f"{SECTION_TITLES[section]}: not measured\n"
        out += render_table(SECTION_TITLES[section], SECTION_COLUMNS[section], doc["rows"])
        if section in ("fault_stacks", "growth"):
            out += "\nStacks (innermost first)\n"
            for r in doc["rows"][:20]:
                label = (
                    fmt.count_h(r["count"]) + " faults"
                    if section == "fault_stacks"
                    else (
                        f"{fmt.bytes_h(r['grown_bytes'])} grown, net {fmt.bytes_h(r['net_bytes'])}, {r['calls']} calls"
                    )
                )
                out += f"  {label}\n" + "".join(f"      {f}\n" for f in r["frames"])
        if section == "mappings":
            if not doc["complete"]:
                out += f"(still reading: {len(doc['rows'])} mappings so far)\n"
            out += totals_text(doc["totals"]) + "\n"
        return out
