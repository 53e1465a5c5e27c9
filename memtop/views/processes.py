"""The processes pane: per-process RSS split and page faults, exact from the kernel's accounting."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from operator import itemgetter
from typing import Any, ClassVar, Literal, NotRequired, TypedDict, cast, get_args

from memtop.core import fmt
from memtop.linux import cgroupfs
from memtop.records.processes import ProcSample
from memtop.state import State
from memtop.state.cgroups import CgroupsState
from memtop.state.processes import SPARK_LEN, ExitedRow, ProcessesState, rss_growth_per_s
from memtop.state.reclaim import ReclaimState
from memtop.state.swapin import SwapinState
from memtop.views import Column, Head, Options, View, measuring, render_table
from memtop.views.layout import cut_middle
from memtop.views.segments import Segment

#: what the table can be sorted by: its columns' keys
SortKey = Literal[
    "pid",
    "user",
    "comm",
    "rss_bytes",
    "anon_bytes",
    "file_bytes",
    "shmem_bytes",
    "swap_bytes",
    "minor_faults_per_s",
    "major_faults_per_s",
    "reclaim_stall_ns",
    "swapin_wait_ns",
    "rss_growth_bytes_per_s",
    "cgroup",
]
#: the sums a cgroup's line of totals has: every sort key but who the process is and where
GroupSum = Literal[
    "rss_bytes",
    "anon_bytes",
    "file_bytes",
    "shmem_bytes",
    "swap_bytes",
    "minor_faults_per_s",
    "major_faults_per_s",
    "reclaim_stall_ns",
    "swapin_wait_ns",
    "rss_growth_bytes_per_s",
]


class _ProcessFields:
    """What holds a process's row while it is built: CPython's instances of one class share one
    table of their attributes' names (key-sharing dicts, PEP 412), so the dict taken from one
    holds only its values: ~0.2 KiB for a process's 17 fields, against ~0.45 KiB for a dict of
    its own (~0.25 MiB with 1,000 processes, each row kept while the process is unchanged).
    Where the keys cannot be shared it is an ordinary dict; it is a dict either way."""


def _process_row(fields: dict[str, Any]) -> ProcessRow:
    holder = _ProcessFields()
    for k, v in fields.items():
        setattr(holder, k, v)
    return cast(ProcessRow, holder.__dict__)


class ProcessRow(TypedDict):
    """One live process (``rows[]``), in the order the JSON writes its fields."""

    pid: int
    comm: str
    user: str
    rss_bytes: int
    anon_bytes: int
    file_bytes: int
    shmem_bytes: int
    swap_bytes: int
    minor_faults: int
    major_faults: int
    minor_faults_per_s: float
    major_faults_per_s: float
    cmdline: str
    reclaim_stall_ns: int | None
    swapin_wait_ns: int | None
    cgroup: str | None
    rss_growth_bytes_per_s: float


class CgroupTotals(TypedDict):
    """A memory cgroup's line of totals when grouped (``groups[]``): the sums of its rows."""

    cgroup: str
    processes: int
    rss_bytes: int | None
    anon_bytes: int | None
    file_bytes: int | None
    shmem_bytes: int | None
    swap_bytes: int | None
    minor_faults_per_s: float | None
    major_faults_per_s: float | None
    reclaim_stall_ns: int | None
    swapin_wait_ns: int | None
    rss_growth_bytes_per_s: float | None


class ExitedProcess(TypedDict):
    """A process that exited (``exited[]``): its last reading."""

    pid: int
    comm: str
    exited_ns: int
    lifetime_ns: int | None
    rss_bytes: int | None
    swap_bytes: int | None
    minor_faults: int | None
    major_faults: int | None


#: what a row shows from other probes besides its sample: minor and major faults/s, reclaim
#: stall, swap-in wait, memory cgroup, RSS growth/s
Figures = tuple[float, float, int | None, int | None, str | None, float]


class ProcessesDoc(Head):
    """The Processes pane's document (docs/panes/processes.md)."""

    rows: list[ProcessRow]
    groups: NotRequired[list[CgroupTotals]]
    exited: list[ExitedProcess]
    exited_between: int
    exited_between_shown: bool


SORT_KEYS: tuple[SortKey, ...] = get_args(SortKey)


def growth_h(bytes_per_s: float) -> str:
    """RSS growth per second, signed: "+1.4M", "-256.0K", "0"."""
    if not round(bytes_per_s):
        return "0"
    return ("+" if bytes_per_s > 0 else "-") + fmt.bytes_h(abs(bytes_per_s))


#: the "Recently exited" table, as the pane and the text snapshot both show it
EXITED_COLUMNS = (
    Column("pid", "PID"),
    Column("comm", "COMMAND", numeric=False),
    Column("lifetime_ns", "LIFETIME", fmt.ns_h),
    Column("rss_bytes", "LAST RSS", fmt.bytes_h),
    Column("swap_bytes", "LAST SWAP", fmt.bytes_h),
    Column("minor_faults", "MINFLT", fmt.count_h),
    Column("major_faults", "MAJFLT", fmt.count_h),
)


def exited_title(doc: Mapping[str, Any]) -> str:
    """The "Recently exited" title, with how many processes came and went between two polls
    (a shell's millisecond children: never read from /proc, listed only on request)."""
    n = doc["exited_between"]
    if not n:
        return "Recently exited"
    if doc["exited_between_shown"]:
        return f"Recently exited (with {fmt.count(n)} born and gone between polls; E hides them)"
    return f"Recently exited ({fmt.count(n)} born and gone between polls not listed; E lists them)"


def matches(row: Mapping[str, object], needle: str) -> bool:
    if not needle:
        return True
    n = needle.lower()
    return (
        n in str(row["comm"]).lower()
        or n in str(row["user"]).lower()
        or n == str(row["pid"])
        or n in str(row.get("cmdline", "")).lower()
        or n in str(row.get("cgroup") or "").lower()
    )


class ProcessesView(View[ProcessesDoc]):
    name = "processes"
    title = "Processes"
    order = 10
    probes = ("procfs", "procmem", "vmscan", "swapin")
    legend = (
        ("N processes", "the rows listed (those the filter keeps)"),
        (
            "Σ",
            "a total since memtop started: RECLAIM Σ the time stalled in reclaim, SWAPWAIT Σ the "
            "time waited on swap-ins",
        ),
        ("GROW/s", "RSS change per second over the sparkline's window"),
        (
            "born and gone",
            "processes that started and exited between two polls: counted, not listed (E lists them)",
        ),
    )
    # who (PID and COMMAND, which the pane keeps in place when it scrolls right), how much, then
    # the trouble (major faults, reclaim stalls, swap waits) before the detail: at 80 columns the
    # process in trouble is seen without scrolling
    columns: ClassVar[tuple[Column[SortKey], ...]] = (
        Column("pid", "PID"),
        Column("comm", "COMMAND", numeric=False, min_width=8),
        Column("rss_bytes", "RSS", fmt.bytes_h),
        # on a narrow terminal (priority: higher drops sooner) the trouble stays, the detail goes
        Column("swap_bytes", "SWAP", fmt.bytes_h, priority=1),
        Column("major_faults_per_s", "MAJFLT/s", fmt.count_h, level="major_faults_per_s", priority=1),
        # totals since memtop started, beside per-second columns: Σ says which
        Column("reclaim_stall_ns", "RECLAIM Σ", fmt.ns_total, priority=1),
        Column("swapin_wait_ns", "SWAPWAIT Σ", fmt.ns_total, priority=1),
        # RSS change per second over the sparkline's window (atop's RGROW): a leak's slope
        Column(
            "rss_growth_bytes_per_s", "GROW/s", growth_h, level="rss_growth_bytes_per_s", width=7, priority=2
        ),
        Column("minor_faults_per_s", "MINFLT/s", fmt.count_h, priority=3),
        Column("anon_bytes", "ANON", fmt.bytes_h, priority=4),
        Column("file_bytes", "FILE", fmt.bytes_h, priority=4),
        Column("shmem_bytes", "SHMEM", fmt.bytes_h, priority=5),
        Column("user", "USER", numeric=False, priority=5, min_width=6),
        Column("cgroup", "CGROUP", cgroupfs.short_path, numeric=False, priority=6, min_width=10),
    )

    def __init__(self) -> None:
        # pid -> (sample, figures from other probes, row): a process whose sample object and
        # figures did not change keeps its row dict, so tables can tell it is unchanged by identity
        self._row_cache: dict[int, tuple[ProcSample, Figures, ProcessRow]] = {}
        #: id of an exited process's entry -> (the entry, its lifetime then, its row)
        self._exited_cache: dict[int, tuple[ExitedRow, int, ExitedProcess]] = {}

    def document(self, state: State, opts: Options) -> ProcessesDoc:
        procs = state.get(ProcessesState)
        # columns the other probes feed: time stalled in direct/memcg reclaim, time waiting on
        # swap-ins (totals since memtop started; 0 where the probe saw nothing, None where it is
        # not measuring: failed, not attached yet or not running)
        reclaim, swapin = state.get(ReclaimState), state.get(SwapinState)
        stall_default = 0 if measuring(state, "vmscan") or reclaim.totals is not None else None
        swap_default = 0 if measuring(state, "swapin") or swapin.rows else None
        stall = {pid: r.total_ns for pid, r in reclaim.pids.items()}
        swapwait = {pid: r.rec.swapin_wait_ns for pid, r in swapin.rows.items()}
        rows: list[ProcessRow] = []
        cache: dict[int, tuple[ProcSample, Figures, ProcessRow]] = {}
        memcg = state.get(CgroupsState).pid_memcg
        old_cache = self._row_cache
        needle = opts.filter
        for pid, r in procs.rows.items():
            s = r.sample
            same = r.spark_same
            figures: Figures = (
                r.minflt_per_s,
                r.majflt_per_s,
                stall.get(pid, stall_default),
                swapwait.get(pid, swap_default),
                memcg.get(pid),
                # a window of equal values grows at 0.0: rss_growth_per_s reads its ring's ends
                # through Python, which with 1,000 idle processes was half of this document. A
                # window is at most SPARK_LEN long: a sleeper's count of equal values, past it,
                # says so without the ring's length (a call into Python a row)
                0.0 if same >= SPARK_LEN or same >= len(r.spark) else round(rss_growth_per_s(r), 1),
            )
            hit = old_cache.get(pid)
            if hit is not None and hit[0] is s and hit[1] == figures:
                cache[pid] = hit
                if not needle or matches(hit[2], needle):
                    rows.append(hit[2])
                continue
            row = _process_row(
                {
                    "pid": pid,
                    "comm": s.comm,
                    "user": s.user,
                    "rss_bytes": s.rss_bytes,
                    "anon_bytes": s.rss_anon_bytes,
                    "file_bytes": s.rss_file_bytes,
                    "shmem_bytes": s.rss_shmem_bytes,
                    "swap_bytes": s.swap_bytes,
                    "minor_faults": s.minor_faults,
                    "major_faults": s.major_faults,
                    "minor_faults_per_s": round(r.minflt_per_s, 3),
                    "major_faults_per_s": round(r.majflt_per_s, 3),
                    "cmdline": s.cmdline,
                    "reclaim_stall_ns": figures[2],
                    "swapin_wait_ns": figures[3],
                    "cgroup": figures[4],
                    "rss_growth_bytes_per_s": figures[5],
                }
            )
            cache[pid] = (s, figures, row)
            if not needle or matches(row, needle):
                rows.append(row)
        self._row_cache = cache
        key = opts.sort if opts.sort in SORT_KEYS else "rss_bytes"
        if (key == "reclaim_stall_ns" and stall_default is None) or (
            key == "swapin_wait_ns" and swap_default is None
        ):
            key = "rss_bytes"  # a column with nothing measured has no order
        if key == "cgroup":
            rows.sort(key=lambda r: (r["cgroup"] or "", r["pid"]), reverse=opts.reverse)
        else:
            rows.sort(key=itemgetter(key, "pid"), reverse=opts.reverse)
        groups: list[CgroupTotals] | None = None
        if opts.extra.get("group") == "cgroup":
            # grouped: each cgroup's processes together under its totals, the cgroups in the
            # order of their totals of the sort column (by RSS when that column has no sum)
            groups = group_by_cgroup(rows, key, opts.reverse)
            order = {g["cgroup"]: i for i, g in enumerate(groups)}
            rows.sort(key=lambda r: order[r["cgroup"] or ""])
        between = list(procs.exited_between)
        listed: list[ExitedRow] | deque[ExitedRow] = procs.exited
        if opts.extra.get("exited") == "all":
            listed = sorted([*procs.exited, *between], key=lambda e: e.exited_ns, reverse=True)
        # an exited process's row is the same object while its entry is (its lifetime may be
        # learnt later): the pane's table tells by identity that it need not format it again
        # (up to EXITED_LEN rows a tick on a machine where processes come and go)
        old_exited: dict[int, tuple[ExitedRow, int, ExitedProcess]] = self._exited_cache
        kept: dict[int, tuple[ExitedRow, int, ExitedProcess]] = {}
        exited: list[ExitedProcess] = []
        for e in listed:
            gone = old_exited.get(id(e))
            if gone is not None and gone[0] is e and gone[1] == e.lifetime_ns:
                exited_row = gone[2]
            else:
                exited_row = {
                    "pid": e.pid,
                    "comm": e.comm,
                    "exited_ns": e.exited_ns,
                    "lifetime_ns": e.lifetime_ns or None,  # 0: its start was never seen
                    "rss_bytes": e.last.rss_bytes if e.last else None,
                    "swap_bytes": e.last.swap_bytes if e.last else None,
                    "minor_faults": e.last.minor_faults if e.last else None,
                    "major_faults": e.last.major_faults if e.last else None,
                }
            kept[id(e)] = (e, e.lifetime_ns, exited_row)
            if not opts.filter or matches(
                {
                    "comm": e.comm,
                    "user": e.last.user if e.last else "",
                    "pid": e.pid,
                    "cmdline": e.last.cmdline if e.last else "",
                },
                opts.filter,
            ):
                exited.append(exited_row)
        self._exited_cache = kept
        head = self.head(state)
        doc: ProcessesDoc = {
            "pane": head["pane"],
            "source": head["source"],
            "taken_at_ns": head["taken_at_ns"],
            "taken_at": head["taken_at"],
            "probes": head["probes"],
            "rows": rows,
            "exited": exited,
            "exited_between": procs.exited_between_total,
            "exited_between_shown": opts.extra.get("exited") == "all",
        }
        if groups is None:
            return doc
        # grouped: the groups after the rows, as the JSON has always written them
        return {
            "pane": doc["pane"],
            "source": doc["source"],
            "taken_at_ns": doc["taken_at_ns"],
            "taken_at": doc["taken_at"],
            "probes": doc["probes"],
            "rows": rows,
            "groups": groups,
            "exited": exited,
            "exited_between": doc["exited_between"],
            "exited_between_shown": doc["exited_between_shown"],
        }

    def summary(self, doc: ProcessesDoc, opts: Options) -> list[Segment]:
        """What the status line says after the probes: how many processes, the sort, grouping
        and the filter (``   20 processes · sort RSS ↓``)."""
        label = next(c.label for c in self.columns if c.key == (opts.sort or "rss_bytes"))
        out = [
            Segment(
                f"   {fmt.plural(len(doc['rows']), 'process', 'processes')} · sort {label} "
                f"{'↓' if opts.reverse else '↑'}"
            )
        ]
        if opts.extra.get("group") == "cgroup":
            out.append(Segment(" · grouped by cgroup"))
        if opts.filter:
            out += [Segment(" · filter: "), Segment(opts.filter, "bold")]
        return out

    def text_extra(self, doc: ProcessesDoc) -> str:
        exited: list[ExitedProcess] = doc["exited"]
        return "\n" + render_table(exited_title(doc), EXITED_COLUMNS, exited[:20])

    def table_rows(self, doc: ProcessesDoc) -> list[Mapping[str, Any]]:
        """The table's rows, each keyed (``key``): grouped, each cgroup's line of totals (its
        COMMAND the cgroup and its count of processes) before its processes. Two shapes of row
        in one table (a process's, a cgroup's totals), told apart by ``key``."""
        rows = doc["rows"]
        groups = doc.get("groups")
        if groups is None:
            return [dict(r, key=str(r["pid"])) for r in rows]
        out: list[Mapping[str, Any]] = []
        at = 0
        for g in groups:
            # cut in the middle, as the Cgroups pane's tree: a long path widened COMMAND for every row
            label = cut_middle(cgroupfs.short_path(g["cgroup"])) if g["cgroup"] else "(no cgroup seen)"
            out.append(
                dict(
                    g,
                    key=f"cgroup:{g['cgroup']}",
                    pid="",
                    comm=f"▸ {label} ({g['processes']})",
                    cgroup=g["cgroup"] or None,
                )
            )
            for r in rows[at : at + g["processes"]]:
                out.append(dict(r, key=str(r["pid"])))
            at += g["processes"]
        return out


#: the columns a cgroup's line sums over its processes (None where no process was measured):
#: every sort key but who the process is and where
GROUP_SUMS: tuple[GroupSum, ...] = (
    "rss_bytes",
    "anon_bytes",
    "file_bytes",
    "shmem_bytes",
    "swap_bytes",
    "minor_faults_per_s",
    "major_faults_per_s",
    "reclaim_stall_ns",
    "swapin_wait_ns",
    "rss_growth_bytes_per_s",
)


def group_by_cgroup(rows: list[ProcessRow], key: str, reverse: bool) -> list[CgroupTotals]:
    """One entry per memory cgroup of ``rows`` (``""``: not seen in one yet): its path, its count
    of processes and the sums of GROUP_SUMS; ordered by the sum of ``key`` (by RSS when ``key``
    has no sum, as PID or COMMAND), largest first unless ``reverse`` is off, then by path."""
    sums: dict[str, dict[GroupSum, float | None]] = {}
    counts: dict[str, int] = {}
    for r in rows:
        path = r["cgroup"] or ""
        got = sums.get(path)
        if got is None:
            got = sums[path] = dict.fromkeys(GROUP_SUMS)
            counts[path] = 0
        counts[path] += 1
        for f in GROUP_SUMS:
            v = r[f]
            if v is not None:
                cur = got[f]
                got[f] = v if cur is None else cur + v
    by: GroupSum = next((f for f in GROUP_SUMS if f == key), "rss_bytes")
    order = sorted(sums)

    def total(path: str) -> float:
        v = sums[path][by]
        return -1 if v is None else v

    order.sort(key=total, reverse=reverse)
    return [_totals(path, counts[path], sums[path]) for path in order]


def _whole(v: float | None) -> int | None:
    # sums of byte and nanosecond counts: ints already (JSON writes them as such)
    return None if v is None else int(v)


def _rate(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _totals(path: str, n: int, s: dict[GroupSum, float | None]) -> CgroupTotals:
    return {
        "cgroup": path,
        "processes": n,
        "rss_bytes": _whole(s["rss_bytes"]),
        "anon_bytes": _whole(s["anon_bytes"]),
        "file_bytes": _whole(s["file_bytes"]),
        "shmem_bytes": _whole(s["shmem_bytes"]),
        "swap_bytes": _whole(s["swap_bytes"]),
        "minor_faults_per_s": _rate(s["minor_faults_per_s"]),
        "major_faults_per_s": _rate(s["major_faults_per_s"]),
        "reclaim_stall_ns": _whole(s["reclaim_stall_ns"]),
        "swapin_wait_ns": _whole(s["swapin_wait_ns"]),
        # a growth of a tenth of a byte per second: rounded as the rows are
        "rss_growth_bytes_per_s": _rate(s["rss_growth_bytes_per_s"]),
    }
