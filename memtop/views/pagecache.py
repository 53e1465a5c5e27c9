"""The Page cache pane: the files in the page cache (cached, dirty, writeback, evicted and recently
evicted bytes, who holds them, pages added and deleted per second, thrashing), refaults, the
memory cgroups' page cache, and how much of the cache the list can see (``scope``)."""

from __future__ import annotations

import heapq
from typing import Any, ClassVar, Literal, TypedDict, get_args

from memtop.core import fmt
from memtop.state import State
from memtop.state.cgroups import CgroupRow, CgroupsState
from memtop.state.host import HostState
from memtop.state.pagecache import FileSeen, PagecacheState
from memtop.views import Column, Head, Options, View, measuring
from memtop.views.segments import Sentence, plain

#: what the files table sorts by
SortKey = Literal[
    "cached_bytes",
    "dirty_bytes",
    "recently_evicted_bytes",
    "evicted_window_bytes",
    "size_bytes",
    "added_per_s",
    "path",
]
SORT_KEYS: tuple[SortKey, ...] = get_args(SortKey)
#: rows a document lists (after the filter and the sort); ``rows_total`` says how many matched
MAX_ROWS = 500
#: what the list can see, for the screen and the document
REACH = (
    "files a process holds open or maps, and files under --cache-path; files nobody has open"
    " are not listed, so the list is not all of the cache"
)


#: the files table's columns
RowKey = Literal[
    "cached_bytes",
    "cached_pct",
    "dirty_bytes",
    "writeback_bytes",
    "recently_evicted_bytes",
    "added_per_s",
    "deleted_per_s",
    "thrashing",
    "size_bytes",
    "holder_names",
    "cgroup_label",
    "path",
]


class Holder(TypedDict):
    pid: int
    comm: str


class FileRow(TypedDict):
    """A file in the cache (``rows[]``)."""

    key: str
    dev: int
    ino: int
    path: str
    size_bytes: int
    cached_bytes: int
    cached_pct: float
    dirty_bytes: int | None
    writeback_bytes: int | None
    evicted_bytes: int | None
    recently_evicted_bytes: int | None
    evicted_window_bytes: int
    read_back_window_bytes: int
    thrashing: bool
    added_per_s: float | None
    deleted_per_s: float | None
    method: str
    holders: list[Holder]
    holder_names: str
    under_path: bool
    cgroup: str | None
    cgroup_share: float | None
    cgroup_sampled_pages: int
    cgroup_why: str
    cgroup_label: str | None


class Scope(TypedDict):
    """What the list can see (``scope``)."""

    reach: str
    method: str | None
    paths: list[str]
    processes: int | None
    fds_seen: int | None
    files_known: int | None
    files_under_paths: int | None
    truncated: bool
    why: str


class Totals(TypedDict):
    listed_cached_bytes: int | None
    listed_dirty_bytes: int | None
    meminfo_cached_bytes: int | None
    listed_share: float | None


class PidActivity(TypedDict):
    pid: int
    comm: str
    added_per_s: float
    deleted_per_s: float


class Activity(TypedDict):
    """Pages added to and deleted from the cache (``activity``; the pagecache probe's)."""

    added_per_s: float | None
    deleted_per_s: float | None
    pids: list[PidActivity]


class Refaults(TypedDict):
    refault_file_per_s: float | None
    activate_file_per_s: float | None
    restore_file_per_s: float | None


class CgroupCache(TypedDict):
    """One memory cgroup's page cache (``cgroups[]``; the Cgroups drill-in's ``page_cache``)."""

    path: str
    version: int
    cache_bytes: int | None
    active_file_bytes: int | None
    inactive_file_bytes: int | None
    dirty_bytes: int | None
    writeback_bytes: int | None
    refaults: int | None
    refaults_per_s: float | None


class PagecacheDoc(Head):
    """The Page cache pane's document (docs/panes/pagecache.md)."""

    scope: Scope
    totals: Totals
    rows_total: int
    rows: list[FileRow]
    activity: Activity
    refaults: Refaults
    cgroups: list[CgroupCache]


def _pct(v: Any) -> str:
    return f"{v:.0f}%"


def _thrash(v: Any) -> str:
    return "THRASH" if v else ""


def _rate(v: Any) -> str:
    return fmt.count_h(v)


class PagecacheView(View[PagecacheDoc]):
    name = "pagecache"
    title = "Page cache"
    tab_title = "Cache"
    order = 100
    probes = ("pagecacheinfo", "pagecache")
    legend = (
        ("THRASH", "pages of the file were evicted and read back within the last 30 s"),
        ("EVICT", "recently evicted bytes: reading them back would be a refault (cachestat)"),
    )
    vmstat_fallback = (
        "pagecache",
        (("workingset_refault_file", "file refaults", "rate"), ("pgpgin", "paged in (KiB)", "rate")),
    )
    columns: ClassVar[tuple[Column[RowKey], ...]] = (
        Column("cached_bytes", "CACHED", fmt.bytes_h),
        Column("cached_pct", "%", _pct),
        Column("dirty_bytes", "DIRTY", fmt.bytes_h),
        Column("writeback_bytes", "WB", fmt.bytes_h, priority=2),
        Column("recently_evicted_bytes", "EVICT", fmt.bytes_h),
        Column("added_per_s", "ADD/s", _rate, priority=2),
        Column("deleted_per_s", "DEL/s", _rate, priority=2),
        Column("thrashing", "", _thrash, numeric=False),
        Column("size_bytes", "SIZE", fmt.bytes_h, priority=2),
        # the names are cut before the path goes: a file held by many processes must not push
        # its path off the screen
        Column("holder_names", "HELD BY", numeric=False, priority=2, min_width=16),
        Column("cgroup_label", "CGROUP", numeric=False, priority=1, min_width=12),
        Column("path", "PATH", numeric=False, min_width=28),
    )

    def default_options(self) -> Options:
        return Options(sort="cached_bytes", reverse=True)

    def document(self, state: State, opts: Options) -> PagecacheDoc:
        st = state.get(PagecacheState)
        host = state.get(HostState)
        listing = st.table is not None
        files_rate, pids_rate = st.activity_rates()
        traced = measuring(state, "pagecache")
        needle = opts.filter.lower()
        sort = opts.sort if opts.sort in SORT_KEYS else "cached_bytes"
        # every file is matched and its sort key taken from the record; only the rows shown are
        # built (a --cache-path of 100,000 files must not cost 100,000 dicts a tick)
        matched: list[tuple[Any, FileSeen, int, int]] = []
        for key, seen in st.files.items():
            r = seen.rec
            if opts.pid is not None and all(pid != opts.pid for pid, _ in r.holders):
                continue
            if needle and needle not in r.path.lower():
                continue
            evicted, back = st.window(seen, state.ts_ns)
            if not (r.cached_bytes or r.dirty_bytes or r.writeback_bytes or r.recently_evicted_bytes or back):
                continue  # nothing in the cache now: not a row of the cache
            if sort == "path":
                k: Any = r.path
            elif sort == "evicted_window_bytes":
                k = evicted
            elif sort == "added_per_s":
                k = files_rate.get(key, (0.0, 0.0))[0]
            else:
                v = getattr(r, sort)
                k = -1 if v is None else v
            matched.append(((k, key), seen, evicted, back))
        pick = heapq.nlargest if opts.reverse else heapq.nsmallest
        shown = pick(MAX_ROWS, matched, key=lambda m: m[0])
        rows = [_row(seen, evicted, back, files_rate, traced) for _, seen, evicted, back in shown]
        table = st.table
        m = host.meminfo
        # meminfo's Cached; a recording made before it was kept has only Cached + SReclaimable
        meminfo = (
            None if m is None else (m.page_cache_bytes if m.page_cache_bytes is not None else m.cached_bytes)
        )
        listed = table.cached_bytes if table is not None else 0
        dirty = table.dirty_bytes if table is not None else None
        return {
            **self.head(state),
            "scope": {
                "reach": REACH,
                "method": table.method if table is not None else None,
                "paths": list(table.paths) if table is not None else [],
                "processes": table.processes if table is not None else None,
                "fds_seen": table.fds_seen if table is not None else None,
                "files_known": table.files_known if table is not None else None,
                "files_under_paths": table.files_under_paths if table is not None else None,
                "truncated": table.truncated if table is not None else False,
                "why": table.why if table is not None else "",
            },
            "totals": {
                "listed_cached_bytes": listed if listing else None,
                "listed_dirty_bytes": dirty if listing else None,
                "meminfo_cached_bytes": meminfo,
                "listed_share": round(listed / meminfo, 4) if listing and meminfo else None,
            },
            "rows_total": len(matched),
            "rows": rows,
            "activity": _activity(st, pids_rate, traced),
            "refaults": _refaults(host),
            "cgroups": cgroups(state),
        }

    def text_extra(self, doc: PagecacheDoc) -> str:
        return "\n" + plain(summary_segments(doc)) + "\n"


def _row(
    seen: FileSeen,
    evicted: int,
    back: int,
    files_rate: dict[tuple[int, int], tuple[float, float]],
    traced: bool,
) -> FileRow:
    r = seen.rec
    add, dele = files_rate.get((r.dev, r.ino), (0.0, 0.0)) if traced else (None, None)
    return {
        "key": f"{r.dev}:{r.ino}",
        "dev": r.dev,
        "ino": r.ino,
        "path": r.path,
        "size_bytes": r.size_bytes,
        "cached_bytes": r.cached_bytes,
        "cached_pct": round(min(100.0, r.cached_bytes * 100 / r.size_bytes), 1) if r.size_bytes else 0.0,
        "dirty_bytes": r.dirty_bytes,
        "writeback_bytes": r.writeback_bytes,
        "evicted_bytes": r.evicted_bytes,
        "recently_evicted_bytes": r.recently_evicted_bytes,
        "evicted_window_bytes": evicted,
        "read_back_window_bytes": back,
        "thrashing": back > 0,
        "added_per_s": None if add is None else round(add, 3),
        "deleted_per_s": None if dele is None else round(dele, 3),
        "method": r.method,
        "holders": [{"pid": pid, "comm": comm} for pid, comm in r.holders],
        "holder_names": ", ".join(f"{comm}[{pid}]" for pid, comm in r.holders),
        "under_path": r.under_path,
        "cgroup": r.cgroup or None,
        "cgroup_share": round(r.cgroup_pages / r.cgroup_sampled_pages, 3)
        if r.cgroup and r.cgroup_sampled_pages
        else None,
        "cgroup_sampled_pages": r.cgroup_sampled_pages,
        "cgroup_why": r.cgroup_why,
        "cgroup_label": cgroup_label(r.cgroup, r.cgroup_pages, r.cgroup_sampled_pages),
    }


def cgroup_label(cgroup: str, pages: int, sampled: int) -> str | None:
    """The CGROUP cell: the memcg holding the sampled pages, with its share when they are split
    between memcgs (or some are not charged); None when not known."""
    if not cgroup:
        return None
    if sampled and pages < sampled:
        return f"{cgroup} {pages * 100 // sampled}% (mixed)"
    return cgroup


def _activity(st: PagecacheState, pids_rate: dict[int, tuple[str, float, float]], traced: bool) -> Activity:
    totals = st.totals_per_s() if traced else None
    procs = sorted(pids_rate.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))
    return {
        "added_per_s": round(totals[0], 3) if totals else None,
        "deleted_per_s": round(totals[1], 3) if totals else None,
        "pids": [
            {"pid": pid, "comm": comm, "added_per_s": round(a, 3), "deleted_per_s": round(d, 3)}
            for pid, (comm, a, d) in procs[:50]
        ]
        if traced
        else [],
    }


def _refaults(host: HostState) -> Refaults:
    have = bool(host.vmstat) and bool(host.vmstat_prev)

    def rate(counter: str) -> float | None:
        return round(host.vmstat_rate(counter), 3) if have and counter in host.vmstat else None

    return {
        "refault_file_per_s": rate("workingset_refault_file"),
        "activate_file_per_s": rate("workingset_activate_file"),
        "restore_file_per_s": rate("workingset_restore_file"),
    }


def cgroup_cache(path: str, row: CgroupRow) -> CgroupCache:
    """One memory cgroup's page cache: memory.stat's file, active/inactive file, dirty,
    writeback (v1's total_* names, v2's own, read by the cgroups probe) and its file refaults,
    per second over the probe's last interval (the Cgroups pane's drill-in shows it too)."""
    refault: float | None = None
    cur = row.stat("refault_file")
    if row.prev is not None and cur is not None:
        prev = dict(row.prev.stat).get("refault_file")
        dt = row.ts_ns - row.prev_ts_ns
        if prev is not None and dt > 0:
            refault = round(max(0, cur - prev) * 1e9 / dt, 3)
    return {
        "path": path,
        "version": row.sample.version,
        "cache_bytes": row.stat("file"),
        "active_file_bytes": row.stat("active_file"),
        "inactive_file_bytes": row.stat("inactive_file"),
        "dirty_bytes": row.stat("dirty"),
        "writeback_bytes": row.stat("writeback"),
        "refaults": cur,
        "refaults_per_s": refault,
    }


def cgroups(state: State) -> list[CgroupCache]:
    """Each memory cgroup's page cache (:func:`cgroup_cache`), most cached first."""
    out = [
        cgroup_cache(path, row) for path, row in state.get(CgroupsState).rows.items() if row.sample.version
    ]
    out.sort(key=lambda c: (-(c["cache_bytes"] or 0), c["path"]))
    return out


def summary_segments(doc: PagecacheDoc) -> Sentence:
    """The pane's lines above its table, and the text snapshot's lines below it (``plain``)."""
    t, sc, rf, ac = doc["totals"], doc["scope"], doc["refaults"], doc["activity"]
    lines = Sentence()
    listed = "-" if t["listed_cached_bytes"] is None else fmt.bytes_h(t["listed_cached_bytes"])
    cached = "-" if t["meminfo_cached_bytes"] is None else fmt.bytes_h(t["meminfo_cached_bytes"])
    share = f" ({t['listed_share'] * 100:.0f}%)" if t["listed_share"] is not None else ""
    lines.add(
        f"listed files {listed}{share} of Cached {cached} · {doc['rows_total']} files"
        + (f" · method {sc['method']}" if sc["method"] else "")
    )
    lines.add("\nscope: " + REACH + (f" ({sc['why']})" if sc["why"] else ""))
    if sc["method"] == "mincore":
        lines.add("\nno cachestat(2) in this kernel (before 6.5): mincore, cached bytes only")
    parts = []
    for v, label in (
        (rf["refault_file_per_s"], "refaults"),
        (rf["activate_file_per_s"], "activate"),
        (rf["restore_file_per_s"], "restore"),
    ):
        parts.append(f"{label} {'-' if v is None else fmt.count_h(v)}/s")
    act = (
        f"added {fmt.count_h(ac['added_per_s'])}/s deleted {fmt.count_h(ac['deleted_per_s'])}/s pages"
        if ac["added_per_s"] is not None
        else "pages added/deleted: pagecache probe not measuring"
    )
    lines.add("\nfile " + " ".join(parts) + " · " + act)
    return lines


def cache_line(c: CgroupCache) -> str:
    """A cgroup's page cache in one line (:func:`cgroup_cache`)."""
    rps = c["refaults_per_s"]
    return (
        f"cache {fmt.bytes_h(c['cache_bytes'])} active {fmt.bytes_h(c['active_file_bytes'])}"
        f" inactive {fmt.bytes_h(c['inactive_file_bytes'])} dirty {fmt.bytes_h(c['dirty_bytes'])}"
        f" wb {fmt.bytes_h(c['writeback_bytes'])} refaults {'-' if rps is None else fmt.count_h(rps)}/s"
    )


def cgroup_lines(doc: PagecacheDoc, limit: int = 10) -> list[str]:
    return [f"{c['path']}: {cache_line(c)}" for c in doc["cgroups"][:limit]]


# -- the pane's sentences (the TUI lays them out: memtop/ui/panes/pagecache.py) -------------------
def status_segments(opts: Options) -> Sentence:
    """What the status line says after the probes: the sort and the filter."""
    t = Sentence()
    label = next((c.label for c in PagecacheView.columns if c.key == opts.sort), opts.sort)
    t.add(f"   sort {label or 'PATH'} {'↓' if opts.reverse else '↑'}")
    if opts.filter:
        t.add(" · filter: ")
        t.add(opts.filter, style="bold")
    return t


def file_detail(doc: PagecacheDoc, row: FileRow | None, cgroups: int) -> Sentence:
    """The box under the table: the file under the cursor (its size, evictions, who holds it),
    then the first ``cgroups`` memory cgroups' page cache."""
    t = Sentence()
    if row is not None:
        t.add(row["path"], style="bold")
        t.add(
            f"  size {fmt.bytes_h(row['size_bytes'])} · evicted {fmt.bytes_h(row['evicted_bytes'])}"
            f" · in the last 30 s evicted {fmt.bytes_h(row['evicted_window_bytes'])},"
            f" read back {fmt.bytes_h(row['read_back_window_bytes'])}"
        )
        t.add("\nheld by: " + (row["holder_names"] or "no process (under --cache-path)"))
        t.add("\nmemory cgroup: " + (row["cgroup_label"] or f"- ({row['cgroup_why']})"))
    lines = cgroup_lines(doc, cgroups)
    if lines:
        t.add("\nmemory cgroups' page cache:", style="bold")
        for line in lines:
            t.add("\n  " + line)
    return t
