"""The leaks pane: outstanding allocations by stack, with age and growth; folded-stack export.

Rows are (pid, stack) pairs. ``frames`` run innermost first and end with a synthetic root frame
naming the process (``comm [pid N]``), so several pids share one tree and one flame graph.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import ClassVar, Literal, TypedDict, get_args

from memtop.core import fmt, leakcost, pprof
from memtop.core.errors import MemtopError
from memtop.records.leaks import AGE_BUCKETS_S, LEAK_CONFIDENCE, LeakPreflight
from memtop.state import State
from memtop.state.leaks import LeaksState
from memtop.views import Column, Head, Options, View, render_table, status_notes, wall_offset_ns
from memtop.views.segments import Sentence

#: what the pane sorts by (its b, c and g)
SortKey = Literal["outstanding_bytes", "allocations", "growth_bytes_per_s"]
SORT_KEYS: tuple[SortKey, ...] = get_args(SortKey)
#: the text table's columns: fields of the table's rows (LeakTableRow)
ColumnKey = Literal[
    "outstanding_bytes", "allocations", "oldest_age_s", "growth_bytes_per_s", "site", "process"
]


class LeakRow(TypedDict):
    """A (process, stack) row of the document (``rows[]``)."""

    frames: list[str]
    outstanding_bytes: int
    allocations: int
    oldest_age_s: float
    growth_bytes_per_s: float
    estimate_error_pct: float | None


class LeakTableRow(LeakRow):
    """A row as the pane, the text and the exports use it: the document's fields and the
    internals the tree, the folded stacks and pprof need."""

    pid: int
    stack_id: int
    comm: str
    age_hist_bytes: list[int]
    alloc_count: int
    alloc_bytes: int
    #: the allocating frame (the table's ALLOCATED AT)
    site: str
    #: the synthetic root frame, ``comm [pid N]``
    process: str


class LeakTargetDoc(TypedDict):
    """A process asked for (``targets[]``)."""

    pid: int
    comm: str
    state: str
    message: str
    allocator: str | None
    symbols: list[str]
    failed_symbols: list[str]
    execs: int


class PreflightDoc(TypedDict):
    """The calls counted before tracing and what was decided (``preflight``)."""

    pids: list[int]
    state: str
    message: str
    allocator: str | None
    window_s: float | None
    allocation_calls_per_s: float | None
    free_calls_per_s: float | None
    calls_per_s: dict[str, float] | None
    trap_ns: float | None
    trap_measured: bool | None
    program_ns: float | None
    own_cost_cpu_s: float | None
    exact_cost_cpu: float | None
    sampled_cost_cpu: float | None
    sample_bytes: int | None
    proposal: str | None
    decision: str | None
    decided_by: str | None


class FoundLeak(TypedDict):
    """A stack reported as a leak on a budget (``budget.leaks[]``)."""

    frames: list[str]
    confidence: float
    unresolved: int
    unresolved_bytes: int
    candidates: int
    resolved: int
    growing_since_s: float | None


class BudgetDoc(TypedDict):
    """Tracing in windows on a CPU budget (``budget``)."""

    budget_pct: float
    windows: int
    slice_s: float
    period_s: float
    duty_pct: float | None
    calls_per_s: float
    cost_pct_of_core: float | None
    own_cpu_s: float
    target_cpu_s: float
    elapsed_s: float
    resolve_rate: float | None
    candidates: int
    aged_out: int
    stacks_dropped: int
    cost_scale: float
    measured_windows: int
    leaks: list[FoundLeak]


class RateDoc(TypedDict):
    """The traced programs' allocation rate and what tracing them costs (the document's
    ``sample_bytes``, ``allocation_calls_per_s``, ``cost_pct_of_core``, ``proposal``)."""

    sample_bytes: int | None
    allocation_calls_per_s: float | None
    cost_pct_of_core: float | None
    proposal: str | None


class LeaksDoc(Head, RateDoc):
    """The Leaks pane's document (docs/panes/leaks.md)."""

    pids: list[int]
    targets: list[LeakTargetDoc]
    estimates: bool
    preflight: PreflightDoc | None
    budget: BudgetDoc | None
    lost: dict[str, int]
    rows: list[LeakRow]


def preflight_doc(pf: LeakPreflight | None) -> PreflightDoc | None:
    """The preflight as the document shows it: the rates counted, what tracing would cost at
    them (memtop.core.leakcost), the proposal and the decision; None when there was none."""
    if pf is None:
        return None
    measured = pf.state in ("measured", "exited") and pf.window_ns > 0
    est = leakcost.estimate(pf.allocs_per_s, pf.frees_per_s, pf.trap_ns) if measured else None
    window_s = pf.window_ns / 1e9
    return {
        "pids": list(pf.pids),
        "state": pf.state,
        "message": pf.message,
        "allocator": pf.allocator or None,
        "window_s": round(window_s, 3) if measured else None,
        "allocation_calls_per_s": round(pf.allocs_per_s, 1) if measured else None,
        "free_calls_per_s": round(pf.frees_per_s, 1) if measured else None,
        "calls_per_s": (
            {f: round(n / window_s, 1) for f, n in zip(pf.functions, pf.calls, strict=False) if n}
            if measured
            else None
        ),
        "trap_ns": est.trap_ns if est else None,
        "trap_measured": est.trap_measured if est else None,
        "program_ns": pf.program_ns or None,
        # a trap measured on the spot includes the count program's run; the bench's does not
        "own_cost_cpu_s": (
            round(
                (pf.alloc_calls + pf.free_calls)
                * (est.trap_ns + (0 if est.trap_measured else pf.program_ns))
                / 1e9,
                3,
            )
            if est
            else None
        ),
        "exact_cost_cpu": round(est.exact_cpu, 3) if est else None,
        "sampled_cost_cpu": round(est.sampled_cpu, 3) if est else None,
        "sample_bytes": pf.sample_bytes or None,
        "proposal": ("sampled" if est.propose_sampling else "exact") if est else None,
        "decision": pf.decision or None,
        "decided_by": pf.decided_by or None,
    }


def preflight_text(pf: PreflightDoc) -> str:
    """The preflight in words: "pid 42 (glibc): malloc+free 1.2M/s counted for 1.00 s; exact
    tracing would cost ~3.4 CPU s/s; byte sampling (--sample-bytes 524288) ~0.9 CPU s/s …"."""
    pids = ", ".join(map(str, pf["pids"]))
    who = f"pid {pids}" + (f" ({pf['allocator']})" if pf["allocator"] else "")
    if pf["state"] == "measuring":
        return f"preflight: {who}: {pf['message']}…"
    if pf["exact_cost_cpu"] is None:
        line = f"preflight: {who}: {pf['state']} — {pf['message']}"
    else:
        sample = pf["sample_bytes"] or leakcost.PROPOSED_SAMPLE_BYTES
        trap = (
            f"a counted call cost {pf['trap_ns']:.0f} ns, measured here"
            if pf["trap_measured"]
            else f"{pf['trap_ns']:.0f} ns a trap, the bench's"
        )
        line = (
            f"preflight: {who}: allocations {fmt.count_h(pf['allocation_calls_per_s'])}/s, frees "
            f"{fmt.count_h(pf['free_calls_per_s'])}/s, counted for {pf['window_s']:.2f} s "
            f"(costing the target ~{pf['own_cost_cpu_s']:.2f} CPU s, then detached). Exact tracing "
            f"would cost ~{pf['exact_cost_cpu']:.2f} CPU s/s; byte sampling (--sample-bytes {sample}) "
            f"~{pf['sampled_cost_cpu']:.2f} CPU s/s ({trap})."
        )
        if pf["proposal"] == "sampled":
            line += (
                f" Proposed: byte sampling (exact would take over {leakcost.PROPOSE_AT_CPU:.0%} of a core)."
            )
        else:
            line += " Proposed: exact."
        if pf["state"] == "exited":
            line += f" {pf['message']}."
    if pf["decision"]:
        line += f" Decided: {pf['decision']} ({pf['decided_by']})."
    return line


def budget_doc(state: State) -> BudgetDoc | None:
    """Tracing in windows on a CPU budget: the duty cycle, what it costs (memtop's CPU measured,
    the targets' estimated from the calls counted) and the stacks reported as leaks, the most
    confident first; None when not tracing on a budget."""
    leaks = state.get(LeaksState)
    b = leaks.budget
    if b is None:
        return None
    elapsed_s = b.elapsed_ns / 1e9
    cost = (b.own_cpu_ns + b.target_cpu_ns) / b.elapsed_ns if b.elapsed_ns else None
    found: list[FoundLeak] = []
    for key, v in leaks.verdicts.items():
        if v.confidence < LEAK_CONFIDENCE:
            continue
        row = leaks.stacks.get(key)
        t = leaks.targets.get(v.pid)
        frames = list(row.rec.frames) if row is not None else []
        found.append(
            {
                "frames": frames + [root_frame(t.comm if t else "?", v.pid)],
                "confidence": round(v.confidence, 4),
                "unresolved": v.unresolved,
                "unresolved_bytes": v.unresolved_bytes,
                "candidates": v.born,
                "resolved": v.resolved,
                "growing_since_s": (
                    round(max(0.0, (leaks.ts_ns - v.growing_since_ns) / 1e9), 1)
                    if v.growing_since_ns
                    else None
                ),
            }
        )
    found.sort(key=lambda f: (-f["confidence"], -f["unresolved_bytes"], f["frames"]))
    return {
        "budget_pct": round(100 * b.budget, 3),
        "windows": b.windows,
        "slice_s": round(b.on_ns / 1e9, 3),
        "period_s": round(b.period_ns / 1e9, 3),
        "duty_pct": round(100 * b.on_ns / b.period_ns, 3) if b.period_ns else None,
        "calls_per_s": b.calls_per_s,
        "cost_pct_of_core": round(100 * cost, 3) if cost is not None else None,
        "own_cpu_s": round(b.own_cpu_ns / 1e9, 3),
        "target_cpu_s": round(b.target_cpu_ns / 1e9, 3),
        "elapsed_s": round(elapsed_s, 1),
        "resolve_rate": b.p_resolve if b.p_resolve >= 0 else None,
        "candidates": b.candidates,
        "aged_out": b.aged_out,
        "stacks_dropped": b.stacks_dropped,
        "cost_scale": b.cost_scale,
        "measured_windows": b.measured_windows,
        "leaks": found,
    }


def budget_text(doc: BudgetDoc) -> str:
    """The budget in words, then each leak found with its confidence."""
    duty = f"{doc['duty_pct']:.1f} %" if doc["duty_pct"] is not None else "?"
    cost = f"{doc['cost_pct_of_core']:.2f} %" if doc["cost_pct_of_core"] is not None else "?"
    text = (
        f"budget {doc['budget_pct']:g} % of a core: tracing {doc['slice_s']:.2f} s of every "
        f"{doc['period_s']:.1f} s (duty {duty}), {doc['windows']} windows; cost {cost} of a core "
        f"(memtop {doc['own_cpu_s']:.2f} CPU s, targets {doc['target_cpu_s']:.2f} CPU s added, measured "
        f"in {doc['measured_windows']} windows, over {doc['elapsed_s']:.0f} s); {doc['candidates']} candidates followed\n"
    )
    if not doc["leaks"]:
        text += (
            "no leak found (yet)\n"
            if doc["resolve_rate"] is not None
            else ("no leak can be told yet: no stack has freed a candidate\n")
        )
    for f in doc["leaks"]:
        text += (
            f"leak ({100 * f['confidence']:.1f} % confident): {fmt.bytes_h(f['unresolved_bytes'])} in "
            f"{f['unresolved']} blocks never freed, of {f['candidates']} followed; at {f['frames'][0]}\n"
        )
    return text


def doc_row(row: LeakTableRow) -> LeakRow:
    """The document's fields of a table row."""
    return {
        "frames": row["frames"],
        "outstanding_bytes": row["outstanding_bytes"],
        "allocations": row["allocations"],
        "oldest_age_s": row["oldest_age_s"],
        "growth_bytes_per_s": row["growth_bytes_per_s"],
        "estimate_error_pct": row["estimate_error_pct"],
    }


def root_frame(comm: str, pid: int) -> str:
    return f"{comm} [pid {pid}]"


def age_label(i: int) -> str:
    lo = 0 if i == 0 else AGE_BUCKETS_S[i - 1]
    return f"≥{lo:g}s" if i >= len(AGE_BUCKETS_S) else f"{lo:g}-{AGE_BUCKETS_S[i]:g}s"


def growth_h(v: float) -> str:
    return ("+" if v > 0 else "-" if v < 0 else "") + fmt.bytes_h(abs(v)) + "/s"


def matches(row: LeakTableRow, opts: Options) -> bool:
    min_age = float(opts.extra.get("min_age_s", 0) or 0)
    min_bytes = int(opts.extra.get("min_bytes", 0) or 0)
    if min_age and row["oldest_age_s"] < min_age:
        return False
    if min_bytes and row["outstanding_bytes"] < min_bytes:
        return False
    if opts.filter:
        needle = opts.filter.lower()
        return any(needle in f.lower() for f in row["frames"])
    return True


def sampling(state: State) -> bool:
    """Whether the figures are byte sampling's: bytes are estimates (shown ``~``), counts are
    samples, not allocations."""
    calls = state.get(LeaksState).calls
    return calls is not None and calls.sample_bytes > 0


def estimate_h(v: float) -> str:
    """Bytes estimated from samples, as the pane shows them: ``~9.5M``."""
    return "~" + fmt.bytes_h(v)


#: the columns with byte sampling: bytes marked as estimates, counts named as samples
SAMPLED_COLUMNS: dict[str, Column[ColumnKey]] = {
    "outstanding_bytes": Column("outstanding_bytes", "~OUTSTANDING", estimate_h),
    "allocations": Column("allocations", "SAMPLES", fmt.count_h),
}


def leaks_asked(state: State) -> bool:
    """Whether the leaks pane was asked for at all (with no target, the pane says how to ask)."""
    return bool(state.get(LeaksState).targets) or "leaks" in state.statuses


class LeaksView(View[LeaksDoc]):
    name = "leaks"
    title = "Leaks"
    order = 60
    probes = ("leaks", "leakrate")
    extra_formats = ("folded",)
    binary_formats = ("pprof",)
    columns: ClassVar[tuple[Column[ColumnKey], ...]] = (
        Column("outstanding_bytes", "OUTSTANDING", fmt.bytes_h),
        Column("allocations", "ALLOCS", fmt.count_h),
        Column("oldest_age_s", "OLDEST", fmt.age_h),
        Column("growth_bytes_per_s", "GROWTH", growth_h),
        Column("site", "ALLOCATED AT", numeric=False),
        Column("process", "PROCESS", numeric=False),
    )

    def default_options(self) -> Options:
        # every outstanding allocation, the largest first; stacks with nothing outstanding hidden
        return Options(sort="outstanding_bytes", extra={"min_age_s": 0.0, "min_bytes": 1})

    def rows(self, state: State, opts: Options) -> list[LeakTableRow]:
        """Every (pid, stack) row with its internals (pid, stack id, age histogram), filtered and
        sorted; ``document`` keeps only the schema's keys."""
        leaks = state.get(LeaksState)
        sampled = sampling(state)
        out: list[LeakTableRow] = []
        for (pid, sid), r in leaks.stacks.items():
            t = leaks.targets.get(pid)
            comm = t.comm if t else "?"
            rec = r.rec
            row: LeakTableRow = {
                "frames": list(rec.frames) + [root_frame(comm, pid)],
                "outstanding_bytes": rec.outstanding_bytes,
                "allocations": rec.outstanding_count,
                "oldest_age_s": round(leaks.oldest_age_s(r), 3),
                "growth_bytes_per_s": round(leaks.growth_bytes_per_s(r), 1),
                "pid": pid,
                "stack_id": sid,
                "comm": comm,
                "age_hist_bytes": list(rec.age_hist_bytes),
                "alloc_count": rec.alloc_count,
                "alloc_bytes": rec.alloc_bytes,
                "site": rec.frames[0] if rec.frames else "",
                # byte sampling: the relative standard error of an estimate from n samples
                "estimate_error_pct": (
                    round(100 / math.sqrt(max(1, rec.outstanding_count)), 1) if sampled else None
                ),
                "process": root_frame(comm, pid),
            }
            if matches(row, opts):
                out.append(row)
        key: SortKey = next((k for k in SORT_KEYS if k == opts.sort), "outstanding_bytes")
        out.sort(
            key=lambda row: (row[key], row["outstanding_bytes"], -row["pid"], -row["stack_id"]),
            reverse=opts.reverse,
        )
        return out

    def document(self, state: State, opts: Options) -> LeaksDoc:
        leaks = state.get(LeaksState)
        head = self.head(state)
        rate = self.rate(state)
        return {
            "pane": head["pane"],
            "source": head["source"],
            "taken_at_ns": head["taken_at_ns"],
            "taken_at": head["taken_at"],
            "probes": head["probes"],
            "pids": sorted(leaks.targets),
            # every pid asked for, traced or not, and why not: a static binary or a Go program is
            # named with its reason, never an empty list
            "targets": [
                {
                    "pid": t.pid,
                    "comm": t.comm,
                    "state": t.state,
                    "message": t.message,
                    "allocator": t.allocator or None,
                    "symbols": list(t.symbols),
                    "failed_symbols": list(t.failed_symbols),
                    "execs": t.execs,
                }
                for _, t in sorted(leaks.targets.items())
            ],
            "sample_bytes": rate["sample_bytes"],
            "allocation_calls_per_s": rate["allocation_calls_per_s"],
            "cost_pct_of_core": rate["cost_pct_of_core"],
            "proposal": rate["proposal"],
            # byte sampling: outstanding bytes are estimates and allocations count samples
            "estimates": sampling(state),
            # the calls counted before tracing, the expected cost, and what was decided
            "preflight": preflight_doc(leaks.preflight),
            # tracing on a CPU budget (--budget): the windows, their cost, the leaks found
            "budget": budget_doc(state),
            # what the figures leave out: allocations not counted (full maps, failed stack walks)
            "lost": {what: n for (probe, what), n in sorted(state.lost.items()) if probe == "leaks"},
            "rows": [doc_row(row) for row in self.rows(state, opts)],
        }

    def text(self, state: State, opts: Options) -> str:
        rows = self.rows(state, opts)
        sampled = sampling(state)
        text = status_notes(self.statuses(state)) if leaks_asked(state) else ""
        columns = tuple(SAMPLED_COLUMNS.get(c.key, c) for c in self.columns) if sampled else self.columns
        text += render_table(self.title, columns, rows)
        pf = preflight_doc(state.get(LeaksState).preflight)
        if pf is not None:
            text += "\n" + preflight_text(pf) + "\n"
        text += "\n" + self.targets_text(state)
        text += "".join(f"lost: {n} {what}: not counted\n" for what, n in self.losses(state).items())
        r = self.rate(state)
        if r["allocation_calls_per_s"] is not None:
            text += (
                f"allocations: {fmt.count_h(r['allocation_calls_per_s'])}/s traced, "
                f"costing ≈{r['cost_pct_of_core']:.1f} % of a core"
            )
            if r["sample_bytes"]:
                text += f"; byte sampling every ~{fmt.bytes_h(r['sample_bytes'])}: bytes are estimates"
            text += "\n"
        if r["proposal"]:
            text += f"proposal: {r['proposal']}\n"
        bd = budget_doc(state)
        if bd is not None:
            text += budget_text(bd)
        for row in rows[:10]:
            if not row["outstanding_bytes"]:
                continue
            amount = (
                f"{estimate_h(row['outstanding_bytes'])} (estimated) in {row['allocations']} samples"
                if sampled
                else f"{fmt.bytes_h(row['outstanding_bytes'])} in {row['allocations']} allocations"
            )
            text += (
                f"\n{amount}, "
                f"oldest {fmt.age_h(row['oldest_age_s'])}, {growth_h(row['growth_bytes_per_s'])}:\n"
            )
            text += "".join(f"    {f}\n" for f in row["frames"])
            hist = row["age_hist_bytes"]
            if any(hist):
                text += (
                    "    ages: "
                    + ", ".join(f"{age_label(i)} {fmt.bytes_h(b)}" for i, b in enumerate(hist) if b)
                    + "\n"
                )
        return text

    def targets_text(self, state: State) -> str:
        leaks = state.get(LeaksState)
        if not leaks.targets:
            return "No target: memtop --leaks PID[,PID…] (or `m` in a process drill-in)\n"
        lines = []
        for t in leaks.targets.values():
            line = f"pid {t.pid} {t.comm}: {t.state}"
            if t.message:
                line += f" — {t.message}"
            if t.failed_symbols:
                line += f"; not attached: {'; '.join(t.failed_symbols)}"
            lines.append(line)
        return "\n".join(lines) + "\n"

    @staticmethod
    def rate(state: State) -> RateDoc:
        """The traced programs' allocation rate, what tracing them costs at that rate in the mode
        they are traced in (memtop.core.leakcost's measured costs, each allocation taken with its
        free: bench/leaks_cost.py), and byte sampling proposed past a tenth of a core
        (memtop.core.leakcost.PROPOSE_AT_CPU), as the preflight proposes it."""
        leaks = state.get(LeaksState)
        sample = leaks.calls.sample_bytes if leaks.calls is not None else 0
        per_s = leaks.calls_per_s
        est = None if per_s is None else leakcost.estimate(per_s, per_s)
        cost = None if est is None else round(100 * (est.sampled_cpu if sample else est.exact_cpu), 2)
        proposal = None
        if per_s is not None and est is not None and not sample and est.propose_sampling:
            proposal = (
                f"{fmt.count_h(per_s)} allocations/s: byte sampling (--sample-bytes "
                f"{leakcost.PROPOSED_SAMPLE_BYTES}) keeps a stack only for sampled allocations, with "
                "estimated bytes"
            )
        return {
            "sample_bytes": sample or None,
            "allocation_calls_per_s": None if per_s is None else round(per_s, 1),
            "cost_pct_of_core": cost,
            "proposal": proposal,
        }

    @staticmethod
    def losses(state: State) -> dict[str, int]:
        return {what: n for (probe, what), n in sorted(state.lost.items()) if probe == "leaks" and n}

    def export_binary(self, state: State, opts: Options, fmt_name: str) -> bytes:
        if fmt_name != "pprof":
            raise MemtopError(f"pane {self.name!r} has no {fmt_name!r} export")
        return pprof.gzipped(self.profile(state, opts))

    def export(self, state: State, opts: Options, fmt_name: str) -> str:
        if fmt_name != "folded":
            raise MemtopError(f"pane {self.name!r} has no {fmt_name!r} export")
        # what was not counted, as lines flamegraph.pl and inferno skip (no trailing count)
        lines = [f"# memtop: {n} {what} lost, not counted" for what, n in self.losses(state).items()]
        for row in self.rows(state, opts):
            if row["outstanding_bytes"] <= 0:
                continue
            stack = ";".join(f.replace(";", ":").replace("\n", " ") for f in reversed(row["frames"]))
            lines.append(f"{stack} {row['outstanding_bytes']}")
        return "\n".join(lines) + ("\n" if lines else "")

    def profile(self, state: State, opts: Options) -> pprof.Profile:
        """The pane as a pprof heap profile, as Go's own: inuse_space/inuse_objects for what is
        outstanding, alloc_space/alloc_objects for everything allocated since tracing began
        (every stack, those with nothing outstanding too), one sample per (pid, stack) with the
        pid and process name as labels. With byte sampling the bytes are the kernel's unbiased
        estimates, the objects count samples, and the period is the sampling interval, as a
        comment in the profile says."""
        leaks = state.get(LeaksState)
        sample = leaks.calls.sample_bytes if leaks.calls is not None else 0
        prof = pprof.Profile(
            sample_types=(
                ("alloc_objects", "count"),
                ("alloc_space", "bytes"),
                ("inuse_objects", "count"),
                ("inuse_space", "bytes"),
            ),
            period_type=("space", "bytes"),
            period=sample or 1,
            default_sample_type="inuse_space",
        )
        offset = wall_offset_ns(state)
        if offset is not None and state.ts_ns:
            prof.time_ns = state.ts_ns + offset
        prof.comments.append(f"memtop leaks: pids {', '.join(map(str, sorted(leaks.targets))) or 'none'}")
        if sample:
            prof.comments.append(
                f"memtop: byte sampling every ~{sample} bytes: space values are estimates, "
                "object values count samples"
            )
        bd = budget_doc(state)
        if bd is not None:  # what the windows saw, not everything the program did
            prof.comments.append(
                f"memtop: traced in windows on a {bd['budget_pct']:g} % CPU budget (duty "
                f"{bd['duty_pct'] or 0:g} %, {bd['windows']} windows): values count what the windows saw"
            )
        prof.comments += [f"memtop: {n} {what} lost, not counted" for what, n in self.losses(state).items()]
        paths: dict[tuple[int, str], str] = {}
        for pid, t in sorted(leaks.targets.items()):
            for path, build_id, lo, hi, off in t.mappings:
                prof.mappings.append(pprof.Mapping(path, build_id, lo, hi, off))
                paths.setdefault((pid, path.rsplit("/", 1)[-1]), path)
        every = dataclasses.replace(opts, extra={**opts.extra, "min_bytes": 0})
        for row in self.rows(state, every):
            frames = tuple(profile_frame(f, row["pid"], paths) for f in row["frames"][:-1])
            prof.add(
                frames,
                (row["alloc_count"], row["alloc_bytes"], row["allocations"], row["outstanding_bytes"]),
                labels=(("comm", row["comm"]),),
                num_labels=(("pid", row["pid"], ""),),
            )
        return prof


#: a frame as memtop.probes.symbols writes it: "name+0xoff [module] file:line", "0xaddr [module]"
_FRAME = re.compile(r"(?P<head>.*?)(?: \[(?P<module>[^\]]*)\])?(?: (?P<file>\S+):(?P<line>\d+))?", re.S)
_OFFSET = re.compile(r"\+0x[0-9a-f]+$")


def profile_frame(frame: str, pid: int, paths: dict[tuple[int, str], str]) -> pprof.Frame:
    """A shown frame as a profile's: the function without its offset, file:line when known, and
    the mapped file it is in (its full path, as the pid's mappings name it)."""
    m = _FRAME.fullmatch(frame)
    if m is None:  # cannot happen (everything matches the head): kept whole
        return pprof.Frame(frame)
    module = m.group("module") or ""
    return pprof.Frame(
        function=_OFFSET.sub("", m.group("head")) or frame,
        file=m.group("file") or "",
        line=int(m.group("line") or 0),
        module=paths.get((pid, module), ""),
    )


# -- the pane's tree and its sentences (the TUI draws them: memtop/ui/panes/leaks.py) ----------
#: the sort's name in the status line
SORTS = {"outstanding_bytes": "bytes", "allocations": "count", "growth_bytes_per_s": "growth"}


@dataclass
class Agg:
    name: str
    outstanding_bytes: int = 0
    allocations: int = 0
    growth_bytes_per_s: float = 0.0
    oldest_age_s: float = 0.0
    age_hist_bytes: list[int] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)  # a leaf's full stack (innermost first)
    children: dict[str, Agg] = field(default_factory=dict)

    def add(self, row: LeakTableRow) -> None:
        self.outstanding_bytes += row["outstanding_bytes"]
        self.allocations += row["allocations"]
        self.growth_bytes_per_s += row["growth_bytes_per_s"]
        self.oldest_age_s = max(self.oldest_age_s, row["oldest_age_s"])
        hist = row["age_hist_bytes"]
        if len(self.age_hist_bytes) < len(hist):
            self.age_hist_bytes += [0] * (len(hist) - len(self.age_hist_bytes))
        for i, b in enumerate(hist):
            self.age_hist_bytes[i] += b


def build_tree(rows: list[LeakTableRow], inverted: bool) -> Agg:
    root = Agg("")
    for row in rows:
        frames = row["frames"]
        # top-down: process root first, then outermost frame ... allocation site
        path = [frames[-1]] + list(frames[:-1]) if inverted else list(reversed(frames))
        node = root
        node.add(row)
        for name in path:
            node = node.children.setdefault(name, Agg(name))
            node.add(row)
        node.frames = list(frames)
    return root


def node_label(agg: Agg, sampled: bool = False) -> Sentence:
    """A tree node's line: its figures, then its frame (untrusted: plain text, never markup)."""
    t = Sentence()
    shown = estimate_h(agg.outstanding_bytes) if sampled else fmt.bytes_h(agg.outstanding_bytes)
    t.add(f"{shown:>8}", style="bold")
    t.add(f" {fmt.count_h(agg.allocations):>6}", style="cyan")
    g = agg.growth_bytes_per_s
    t.add(f" {growth_h(g):>11}", style="red" if g > 0 else "dim")
    t.add(f" {fmt.age_h(agg.oldest_age_s):>8}", style="yellow" if agg.oldest_age_s >= 60 else "")
    t.add("  ")
    t.add(agg.name)  # untrusted: plain text, never markup
    return t


def node_detail(agg: Agg, sampled: bool) -> Sentence:
    """The line under the tree for the node under the cursor: its figures, its ages, its frames."""
    t = Sentence()
    amount = (
        f"{estimate_h(agg.outstanding_bytes)} outstanding (estimated) in {agg.allocations} samples"
        if sampled
        else f"{fmt.bytes_h(agg.outstanding_bytes)} outstanding in {agg.allocations} allocations"
    )
    t.add(
        f"{amount} · "
        f"growth {growth_h(agg.growth_bytes_per_s)} over the last minute · "
        f"oldest {fmt.age_h(agg.oldest_age_s)}\n"
    )
    hist = agg.age_hist_bytes
    if any(hist):
        t.add("ages: ")
        t.add(fmt.sparkline(hist, len(hist)), style="cyan")
        t.add("  " + "  ".join(f"{age_label(i)} {fmt.bytes_h(b)}" for i, b in enumerate(hist) if b))
    if agg.frames:
        t.add("\n")
        t.add(" ← ".join(agg.frames[:6]), style="dim")
    return t


def status_segments(
    state: State, rows: list[LeakTableRow], opts: Options, sampled: bool, inverted: bool
) -> Sentence:
    """What the status line says after the probes: how to ask for a target, each target's
    state, what tracing costs, the budget and the leak it found, the stacks and bytes shown,
    the sort, the filters; ``sampled``: byte sampling's figures, ``inverted``: the tree's `i`."""
    leaks = state.get(LeaksState)
    status = Sentence()
    if not leaks.targets and state.probe_state("leaks") is None and leaks.preflight is None:
        status.add(
            "no target: run memtop --leaks PID[,PID…], or press m in a process drill-in", style="italic"
        )
    for t in leaks.targets.values():
        status.add("  ")
        style = {"tracing": "green", "exited": "bold yellow", "failed": "red"}.get(t.state, "dim")
        status.add(f"pid {t.pid} ")
        status.add(t.comm)
        status.add(f" {t.state}", style=style)
        if t.state == "exited":
            status.add(" — target exited; showing its last figures", style="yellow")
        elif t.state == "failed" and t.message:
            status.add(f" — {t.message}", style="red")
        if t.failed_symbols:
            status.add(f" ({len(t.failed_symbols)} symbols not attached)", style="yellow")
    # while tracing, what it costs at the rate the probe sees (the text and JSON say the same)
    rate = LeaksView.rate(state)
    if rate["allocation_calls_per_s"] is not None:
        status.add(
            f" · {fmt.count_h(rate['allocation_calls_per_s'])} allocs/s, ≈{rate['cost_pct_of_core']:.1f} % of a core"
        )
        if rate["proposal"]:
            status.add(f" (over a tenth: --sample-bytes {leakcost.PROPOSED_SAMPLE_BYTES})", style="yellow")
    bd = budget_doc(state)
    if bd is not None:  # tracing in windows: the duty cycle, the cost, the leaks found
        cost = bd["cost_pct_of_core"]
        status.add(
            f" · budget {bd['budget_pct']:g} %: duty {bd['duty_pct'] or 0:.1f} %, cost "
            + (f"{cost:.2f} %" if cost is not None else "?")
            + " of a core",
            style="yellow" if cost is not None and cost > bd["budget_pct"] else "",
        )
        for f in bd["leaks"][:1]:
            status.add(f" · leak {100 * f['confidence']:.1f} % confident: ", style="bold red")
            status.add(f["frames"][0])  # untrusted: plain text
    total = sum(r["outstanding_bytes"] for r in rows)
    shown = estimate_h(total) if sampled else fmt.bytes_h(total)
    status.add(f"   {len(rows)} stacks, {shown} outstanding · sort {SORTS.get(opts.sort, 'bytes')}")
    if opts.extra.get("min_age_s"):
        status.add(f" · age ≥ {opts.extra['min_age_s']:g}s")
    if opts.extra.get("min_bytes", 0) > 1:
        status.add(f" · size ≥ {fmt.bytes_h(opts.extra['min_bytes'])}")
    if opts.filter:
        status.add(" · frame contains ")
        status.add(opts.filter, style="bold")
    if inverted:
        status.add(" · inverted")
    return status
