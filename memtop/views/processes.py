"""The processes pane: per-process RSS split and page faults, exact from the kernel's accounting."""

from __future__ import annotations

from collections import deque
from operator import itemgetter
from typing import Any

from memtop.core import fmt
from memtop.linux import cgroupfs
from memtop.state import State
from memtop.state.cgroups import CgroupsState
from memtop.state.processes import ExitedRow, ProcessesState, rss_growth_per_s
from memtop.state.reclaim import ReclaimState
from memtop.state.swapin import SwapinState
from memtop.views import Column, Options, View, measuring, render_table
from memtop.views.cgroups import cut_middle

SORT_KEYS = (
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
)


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


def exited_title(doc: dict[str, Any]) -> str:
    """The "Recently exited" title, with how many processes came and went between two polls
    (a shell's millisecond children: never read from /proc, listed only on request)."""
    n = doc["exited_between"]
    if not n:
        return "Recently exited"
    if doc["exited_between_shown"]:
        return f"Recently exited (with {fmt.count(n)} born and gone between polls; E hides them)"
    return f"Recently exited ({fmt.count(n)} born and gone between polls not listed; E lists them)"


def matches(row: dict[str, Any], needle: str) -> bool:
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


class ProcessesView(View):
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
    columns = (
        Column("pid", "PID"),
        Column("comm", "COMMAND", numeric=False),
        Column("rss_bytes", "RSS", fmt.bytes_h),
        Column("swap_bytes", "SWAP", fmt.bytes_h),
        Column("major_faults_per_s", "MAJFLT/s", fmt.count_h, level="major_faults_per_s"),
        # totals since memtop started, beside per-second columns: Σ says which
        Column("reclaim_stall_ns", "RECLAIM Σ", fmt.ns_total),
        Column("swapin_wait_ns", "SWAPWAIT Σ", fmt.ns_total),
        # RSS change per second over the sparkline's window (atop's RGROW): a leak's slope
        Column("rss_growth_bytes_per_s", "GROW/s", growth_h, level="rss_growth_bytes_per_s"),
        Column("minor_faults_per_s", "MINFLT/s", fmt.count_h),
        Column("anon_bytes", "ANON", fmt.bytes_h),
        Column("file_bytes", "FILE", fmt.bytes_h),
        Column("shmem_bytes", "SHMEM", fmt.bytes_h),
        Column("user", "USER", numeric=False),
        Column("cgroup", "CGROUP", cgroupfs.short_path, numeric=False),
    )

    def __init__(self) -> None:
        # pid -> (sample, figures from other probes, row): a process whose sample object and
        # figures did not change keeps its row dict, so tables can tell it is unchanged by identity
        self._row_cache: dict[
            int, tuple[Any, tuple[float, float, int | None, int | None, str | None, float], dict[str, Any]]
        ] = {}

    def document(self, state: State, opts: Options) -> dict[str, Any]:
        procs = state.get(ProcessesState)
        # columns the other probes feed: time stalled in direct/memcg reclaim, time waiting on
        # swap-ins (totals since memtop started; 0 where the probe saw nothing, None where it is
        # not measuring: failed, not attached yet or not running)
        reclaim, swapin = state.get(ReclaimState), state.get(SwapinState)
        stall_default = 0 if measuring(state, "vmscan") or reclaim.totals is not None else None
        swap_default = 0 if measuring(state, "swapin") or swapin.rows else None
        stall = {pid: r.total_ns for pid, r in reclaim.pids.items()}
        swapwait = {pid: r.rec.swapin_wait_ns for pid, r in swapin.rows.items()}
        rows: list[dict[str, Any]] = []
        cache: dict[
            int, tuple[Any, tuple[float, float, int | None, int | None, str | None, float], dict[str, Any]]
        ] = {}
        memcg = state.get(CgroupsState).pid_memcg
        old_cache = self._row_cache
        for pid, r in procs.rows.items():
            s = r.sample
            figures = (
                r.minflt_per_s,
                r.majflt_per_s,
                stall.get(pid, stall_default),
                swapwait.get(pid, swap_default),
                memcg.get(pid),
                round(rss_growth_per_s(r), 1),
            )
            hit = old_cache.get(pid)
            if hit is not None and hit[0] is s and hit[1] == figures:
                cache[pid] = hit
                if matches(hit[2], opts.filter):
                    rows.append(hit[2])
                continue
            row = {
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
            cache[pid] = (s, figures, row)
            if matches(row, opts.filter):
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
        groups: list[dict[str, Any]] | None = None
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
        exited = [
            {
                "pid": e.pid,
                "comm": e.comm,
                "exited_ns": e.exited_ns,
                "lifetime_ns": e.lifetime_ns or None,  # 0: its start was never seen
                "rss_bytes": e.last.rss_bytes if e.last else None,
                "swap_bytes": e.last.swap_bytes if e.last else None,
                "minor_faults": e.last.minor_faults if e.last else None,
                "major_faults": e.last.major_faults if e.last else None,
            }
            for e in listed
            if matches(
                {
                    "comm": e.comm,
                    "user": e.last.user if e.last else "",
                    "pid": e.pid,
                    "cmdline": e.last.cmdline if e.last else "",
                },
                opts.filter,
            )
        ]
        return {
            **self.head(state),
            "rows": rows,
            **({} if groups is None else {"groups": groups}),
            "exited": exited,
            "exited_between": procs.exited_between_total,
            "exited_between_shown": opts.extra.get("exited") == "all",
        }

    def text_extra(self, doc: dict[str, Any]) -> str:
        return "\n" + render_table(exited_title(doc), EXITED_COLUMNS, doc["exited"][:20])

    def table_rows(self, doc: dict[str, Any]) -> list[dict[str, Any]]:
        """The table's rows, each keyed (``key``): grouped, each cgroup's line of totals (its
        COMMAND the cgroup and its count of processes) before its processes."""
        rows: list[dict[str, Any]] = doc["rows"]
        groups: list[dict[str, Any]] | None = doc.get("groups")
        if groups is None:
            return [dict(r, key=str(r["pid"])) for r in rows]
        out: list[dict[str, Any]] = []
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
GROUP_SUMS = tuple(k for k in SORT_KEYS if k not in ("pid", "user", "comm", "cgroup"))


def group_by_cgroup(rows: list[dict[str, Any]], key: str, reverse: bool) -> list[dict[str, Any]]:
    """One entry per memory cgroup of ``rows`` (``""``: not seen in one yet): its path, its count
    of processes and the sums of GROUP_SUMS; ordered by the sum of ``key`` (by RSS when ``key``
    has no sum, as PID or COMMAND), largest first unless ``reverse`` is off, then by path."""
    groups: dict[str, dict[str, Any]] = {}
    for r in rows:
        path = r["cgroup"] or ""
        g = groups.get(path)
        if g is None:
            g = groups[path] = {"cgroup": path, "processes": 0, **dict.fromkeys(GROUP_SUMS)}
        g["processes"] += 1
        for f in GROUP_SUMS:
            v = r[f]
            if v is not None:
                g[f] = v if g[f] is None else g[f] + v
    for g in groups.values():
        for f in ("minor_faults_per_s", "major_faults_per_s", "rss_growth_bytes_per_s"):
            if g[f] is not None:
                g[f] = round(g[f], 3)
    by = key if key in GROUP_SUMS else "rss_bytes"
    out = sorted(groups.values(), key=lambda g: g["cgroup"])
    out.sort(key=lambda g: g[by] if g[by] is not None else -1, reverse=reverse)
    return out
