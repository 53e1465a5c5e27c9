"""The cgroups pane: the memory cgroup tree with usage against limits, swap, limit hits, PSI, and
what memtop's probes saw per cgroup (memcg reclaim episodes, stall time, p99 latency, swap-in
waits, OOM kills). Figures from the probes are rolled up: a cgroup counts its descendants', as
its usage does.

Options: ``sort`` (a column key; the tree keeps parents above children, siblings sorted),
``filter`` (a path, unit or container name: matching cgroups with their ancestors),
``extra["collapsed"]`` (paths whose children are hidden), ``extra["depth"]`` (deepest level
shown, 0: all), ``extra["cgroup"]`` (a path: the document adds that cgroup's ``detail``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, NotRequired, TypedDict, get_args

from memtop.core import fmt
from memtop.linux import cgroupfs
from memtop.state import State
from memtop.state.base import log2_le
from memtop.state.cgroups import NEEDED_WINDOW_NS, CgroupRow, CgroupsState, Needed
from memtop.state.oom import OomState
from memtop.state.processes import ProcessesState
from memtop.state.reclaim import ReclaimState
from memtop.views import Column, Head, Options, View, measuring
from memtop.views.layout import cut_middle
from memtop.views.pagecache import CgroupCache, cache_line, cgroup_cache
from memtop.views.segments import Segment, Sentence

#: the tree table's columns and what it sorts by: fields of its rows
CgroupKey = Literal[
    "path",
    "tree",
    "usage_bytes",
    "limit_bar",
    "limit_pct",
    "swap_bytes",
    "working_set_bytes",
    "limit_hits_per_s",
    "psi_some_pct",
    "reclaim_episodes",
    "reclaim_stall_ns",
    "reclaim_p99_ns",
    "needed_bytes",
    "swapin_wait_ns",
    "oom_kills",
    "limit_bytes",
    "nprocs",
]


class Container(TypedDict):
    runtime: str
    id: str
    pod_uid: str
    name: str
    pod: str


class CgroupRowDoc(TypedDict):
    """A memory cgroup (``rows[]``): its files' figures, the probes' figures rolled up the tree
    (null where the probe does not measure), and its place in the tree."""

    path: str
    name: str
    depth: int
    version: int
    usage_bytes: int | None
    limit_bytes: int | None
    limit_pct: float | None
    limit_bar: str
    high_bytes: int | None
    low_bytes: int | None
    min_bytes: int | None
    soft_limit_bytes: int | None
    swap_bytes: int | None
    swap_limit_bytes: int | None
    working_set_bytes: int | None
    needed_bytes: int | None
    cold_bytes: int | None
    needed_source: str | None
    thrashing: bool | None
    limit_hits_per_s: float | None
    events: dict[str, int]
    stat: dict[str, int]
    psi_some_pct: float | None
    psi_full_pct: float | None
    psi_some_total_us: int | None
    psi_full_total_us: int | None
    nprocs: int
    cgroup_id: int | None
    unit: str | None
    container: Container | None
    container_name: str | None
    reclaim_episodes: int | None
    reclaim_stall_ns: int | None
    reclaim_p99_ns: int | None
    reclaim_max_ns: int | None
    swapins: int | None
    swapin_wait_ns: int | None
    oom_kills: int | None
    oom_limit_kills: int
    # the tree's, set when the tree is walked (last in the JSON, as they always were)
    children: int
    collapsed: bool
    tree: str


class Layout(TypedDict):
    mode: str
    memory_mount: str | None
    memory_version: int | None
    unified_mount: str | None
    psi: bool


class HistoryPoint(TypedDict):
    ts_ns: int
    usage_bytes: int | None
    anon_bytes: int | None
    file_bytes: int | None
    kernel_bytes: int | None
    shmem_bytes: int | None
    swap_bytes: int | None


class CgroupProcess(TypedDict):
    pid: int
    comm: str
    rss_bytes: int
    swap_bytes: int
    major_faults_per_s: float
    reclaim_stall_ns: int
    unified: str | None


class CgroupEpisode(TypedDict):
    ts_ns: int
    pid: int
    comm: str
    latency_ns: int
    pages: int


class CgroupEpisodeRow(CgroupEpisode):
    """An episode as the cgroup drill-in's table lists it, keyed by its time and pid."""

    key: str


class CgroupKill(TypedDict):
    ts_ns: int
    victim_pid: int
    victim_comm: str
    oom_memcg: str | None
    task_memcg: str | None
    memcg_usage_bytes: int | None
    memcg_limit_bytes: int | None


class CgroupDetail(TypedDict):
    """One cgroup's drill-in (``detail``)."""

    path: str
    history: list[HistoryPoint]
    limit_bytes: int | None
    processes: list[CgroupProcess]
    reclaim_events: list[CgroupEpisode]
    oom_kills: list[CgroupKill]
    needed: NeededDetail | None
    page_cache: CgroupCache


class CgroupsDoc(Head):
    """The Cgroups pane's document (docs/panes/cgroups.md)."""

    layout: Layout | None
    rows: list[CgroupRowDoc]
    unattributed_reclaims: int | None
    over_limit: int | None
    max_cgroups: int | None
    lru_gen_unused: str | None
    detail: NotRequired[CgroupDetail]


#: what the table sorts by: its columns' keys but the tree and the limit bar
SortKey = Literal[
    "path",
    "usage_bytes",
    "limit_pct",
    "swap_bytes",
    "working_set_bytes",
    "needed_bytes",
    "limit_hits_per_s",
    "psi_some_pct",
    "reclaim_episodes",
    "reclaim_stall_ns",
    "reclaim_p99_ns",
    "swapin_wait_ns",
    "oom_kills",
    "nprocs",
]
SORT_KEYS: tuple[SortKey, ...] = get_args(SortKey)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}%" if v >= 10 else f"{v:.1f}%"


def limit_bar(pct: float | None, width: int = 8) -> str:
    """``█████░░░ 62%``: usage as a share of the limit (blank with no limit)."""
    if pct is None:
        return ""
    full = min(width, round(pct / 100 * width))
    return "█" * full + "░" * (width - full) + f" {pct:.0f}%"


def p99(values: list[int]) -> int | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * 0.99))]


def hist_p99(hist: dict[int, int], max_ns: int) -> int | None:
    """The 99th percentile of a log2 latency histogram: the upper bound of its bucket, or the
    longest episode when that is shorter (the bound of the top bucket can be twice it)."""
    total = sum(hist.values())
    if not total:
        return None
    rank, seen = total - total // 100, 0  # the episode at 99 % of them, counted from 1
    for bucket in sorted(hist):
        seen += hist[bucket]
        if seen >= rank:
            return min(log2_le(bucket), max_ns) if max_ns else log2_le(bucket)
    return None


def tree_label(row: Mapping[str, Any]) -> str:
    name = cut_middle(str(row["name"]))
    if row.get("container_name"):
        name += f" [{row['container_name']}]"
    mark = "▸ " if row.get("collapsed") else ""
    return "  " * int(row["depth"]) + mark + name


def matches(row: Mapping[str, Any], needle: str) -> bool:
    n = needle.lower()
    return n in row["path"].lower() or n in (row.get("container_name") or "").lower()


class NeededDetail(TypedDict):
    """A cgroup's needed memory with its inputs and method (``detail.needed``)."""

    needed_bytes: int
    cold_bytes: int
    thrashing: bool
    limit_bytes: int | None
    window_s: float
    measured_s: float
    anon_bytes: int
    shmem_bytes: int
    active_file_bytes: int
    inactive_file_bytes: int
    activated_bytes: int
    refaulting_bytes: int
    refault_anon_bytes_per_s: float | None
    refault_file_bytes_per_s: float | None
    activate_file_bytes_per_s: float | None
    psi_some_pct: float | None
    method: str
    source: str
    young_anon_bytes: int | None
    young_file_bytes: int | None
    old_anon_bytes: int | None
    old_file_bytes: int | None


def needed_detail(n: Needed | None, psi_some_pct: float | None) -> NeededDetail | None:
    """The needed-memory estimate with its inputs and method, for the detail (None without the
    inputs)."""
    if n is None:
        return None

    def r(v: float | None) -> float | None:
        return None if v is None else round(v, 1)

    return {
        "needed_bytes": n.needed_bytes,
        "cold_bytes": n.cold_bytes,
        "thrashing": n.thrashing,
        "limit_bytes": n.limit_bytes,
        "window_s": NEEDED_WINDOW_NS / 1e9,
        "measured_s": round(n.measured_s, 3),
        "anon_bytes": n.anon_bytes,
        "shmem_bytes": n.shmem_bytes,
        "active_file_bytes": n.active_file_bytes,
        "inactive_file_bytes": n.inactive_file_bytes,
        "activated_bytes": n.activated_bytes,
        "refaulting_bytes": n.refaulting_bytes,
        "refault_anon_bytes_per_s": r(n.refault_anon_bytes_per_s),
        "refault_file_bytes_per_s": r(n.refault_file_bytes_per_s),
        "activate_file_bytes_per_s": r(n.activate_file_bytes_per_s),
        "psi_some_pct": psi_some_pct,
        "method": NEEDED_METHOD_LRU_GEN if n.source == "lru_gen" else NEEDED_METHOD,
        "source": n.source,
        "young_anon_bytes": n.young_anon_bytes,
        "young_file_bytes": n.young_file_bytes,
        "old_anon_bytes": n.old_anon_bytes,
        "old_file_bytes": n.old_file_bytes,
    }


#: how the needed memory is estimated, in the detail and the JSON (docs/panes/cgroups.md has more)
NEEDED_METHOD = (
    "needed = anon + shmem + active file + inactive file activated in the window + evicted pages "
    "read back in the window (refaults; anonymous at most what is on swap); cold = inactive file "
    "not activated. From memory.stat only: nothing written, nothing reclaimed. PSI is the check: "
    "stalls with needed under the limit mean the estimate is low."
)
#: the method where MGLRU's page ages are read (debugfs lru_gen)
NEEDED_METHOD_LRU_GEN = (
    "needed = anon and file pages (its children's included) in MGLRU generations born within the "
    "window; cold = those in older generations. The kernel's own page ages from debugfs lru_gen, "
    "read only: nothing written, nothing reclaimed. PSI is the check: stalls with needed under "
    "the limit mean the estimate is low."
)


class CgroupsView(View[CgroupsDoc]):
    name = "cgroups"
    title = "Cgroups"
    order = 70
    probes = ("cgroups", "vmscan", "swapin", "oom")
    # what signals trouble first (share of the limit, pressure, limit hits, reclaim), then the
    # sizes: an 80-column terminal shows the first ones
    columns: ClassVar[tuple[Column[CgroupKey], ...]] = (
        Column("tree", "CGROUP", numeric=False),
        Column("usage_bytes", "USAGE", fmt.bytes_h),
        Column("limit_bar", "OF LIMIT", numeric=False, level="limit_used_pct", level_key="limit_pct"),
        # on a narrow terminal (priority: higher drops sooner) pressure and stalls stay
        Column("psi_some_pct", "PSI", _pct, level="psi_some_avg10", width=4, priority=1),
        Column("limit_hits_per_s", "HITS/s", fmt.count_h, priority=2),
        Column("reclaim_episodes", "RECLAIMS", fmt.count_h, priority=3),
        Column("reclaim_stall_ns", "STALL Σ", fmt.ns_total, priority=1),
        Column("reclaim_p99_ns", "P99", fmt.ns_h, priority=3),
        Column("needed_bytes", "NEEDED", fmt.bytes_h, priority=3),
        Column("swap_bytes", "SWAP", fmt.bytes_h, priority=2),
        Column("swapin_wait_ns", "SWAPWAIT Σ", fmt.ns_total, priority=3),
        Column("oom_kills", "OOM", fmt.count, priority=2),
        Column("limit_bytes", "LIMIT", fmt.bytes_h, priority=4),
        Column("nprocs", "PROCS", width=5, priority=4),
    )

    def default_options(self) -> Options:
        return Options(sort="usage_bytes", reverse=True)

    def summary(self, doc: Mapping[str, Any], opts: Options) -> list[Segment]:
        """What the status line says after the probes: the cgroup layout, how many cgroups (and
        how many past the probe's limit were left out), the sort, the depth and the filter."""
        out: list[Segment] = []
        lay = doc["layout"]
        if lay:
            out.append(Segment(f"   {lay['mode']}"))
            if lay["memory_version"]:
                out.append(Segment(f" · memory v{lay['memory_version']}"))
            out.append(Segment(" · PSI " + ("on" if lay["psi"] else "off")))
        out.append(Segment(f" · {fmt.plural(len(doc['rows']), 'cgroup')}"))
        if doc["over_limit"]:
            out.append(
                Segment(
                    f" · {doc['over_limit']:,} more past the limit of {doc['max_cgroups']:,} not read "
                    "(the largest kept)",
                    "yellow",
                )
            )
        label = next((c.label for c in self.columns if c.key == opts.sort), opts.sort)
        out.append(Segment(f" · sort {label} {'↓' if opts.reverse else '↑'}"))
        depth = opts.extra.get("depth") or 0
        if depth:
            out.append(Segment(f" · depth {depth}"))
        if opts.filter:
            out += [Segment(" · filter: "), Segment(opts.filter, "bold")]
        return out

    def ready(self, state: State, opts: Options) -> bool:
        return bool(state.get(CgroupsState).rows)

    # -- rows -----------------------------------------------------------------------------------
    def _rows(self, state: State) -> dict[str, CgroupRowDoc]:
        st = state.get(CgroupsState)
        reclaim_on = measuring(state, "vmscan") or bool(st.probed)
        swapin_on = measuring(state, "swapin") or bool(st.swapin)
        oom_on = measuring(state, "oom") or bool(state.get(OomState).kills)
        rows: dict[str, CgroupRowDoc] = {}
        for path, r in st.rows.items():
            rows[path] = self._row(st, path, r)
        # roll the probes' figures up the tree (a cgroup's usage counts its children's too)
        lat: dict[str, list[int]] = {}
        hists: dict[str, dict[int, int]] = {}
        swapin = st.swapin_by_path()
        for path in rows:
            p = st.probed.get(path)
            n, w = swapin.get(path, (0, 0))
            if p is None and not n and not w:
                continue  # nothing of its own to roll up
            own = (
                (p.reclaim_events, p.reclaim_ns, p.oom_kills, list(p.latencies), p.reclaim_max_ns)
                if p is not None
                else (0, 0, 0, [], 0)
            )
            anc = path
            while True:
                row = rows.get(anc)
                if row is not None:  # the figures are counts yet (None comes after, if at all)
                    row["reclaim_episodes"] = (row["reclaim_episodes"] or 0) + own[0]
                    row["reclaim_stall_ns"] = (row["reclaim_stall_ns"] or 0) + own[1]
                    row["oom_kills"] = (row["oom_kills"] or 0) + own[2]
                    row["reclaim_max_ns"] = max(row["reclaim_max_ns"] or 0, own[4])
                    row["swapins"] = (row["swapins"] or 0) + n
                    row["swapin_wait_ns"] = (row["swapin_wait_ns"] or 0) + w
                    lat.setdefault(anc, []).extend(own[3])
                    if p is not None and p.hist:
                        h = hists.setdefault(anc, {})
                        for b, c in p.hist.items():
                            h[b] = h.get(b, 0) + c
                if anc == "/":
                    break
                anc = cgroupfs.parent(anc)
        for path, row in rows.items():
            if path in hists:
                row["reclaim_p99_ns"] = hist_p99(hists[path], row["reclaim_max_ns"] or 0)
            else:  # a recording made before the kernel's per-process histograms
                row["reclaim_p99_ns"] = p99(lat.get(path, []))
            if not reclaim_on:
                row["reclaim_episodes"] = row["reclaim_stall_ns"] = row["reclaim_p99_ns"] = None
                row["reclaim_max_ns"] = None
            if not swapin_on:
                row["swapins"] = row["swapin_wait_ns"] = None
            if not oom_on:
                row["oom_kills"] = None
        return rows

    def _row(self, st: CgroupsState, path: str, r: CgroupRow) -> CgroupRowDoc:
        s = r.sample
        stat = dict(s.stat)
        limit = s.limit_bytes
        pct = s.usage_bytes * 100 / limit if limit and s.usage_bytes is not None else None
        c = s.container
        p = st.probed.get(path)
        need = r.needed(st.polled_ns or r.ts_ns)
        return {
            "path": path,
            "name": "/" if path == "/" else path.rsplit("/", 1)[-1],
            "depth": 0 if path == "/" else path.count("/"),
            "version": s.version,
            "usage_bytes": s.usage_bytes,
            "limit_bytes": limit,
            "limit_pct": None if pct is None else round(pct, 2),
            "limit_bar": limit_bar(pct),
            "high_bytes": s.high_bytes,
            "low_bytes": s.low_bytes,
            "min_bytes": s.min_bytes,
            "soft_limit_bytes": s.soft_limit_bytes,
            "swap_bytes": s.swap_bytes,
            "swap_limit_bytes": s.swap_limit_bytes,
            "working_set_bytes": cgroupfs.working_set(s.usage_bytes, stat.get("inactive_file")),
            "needed_bytes": need.needed_bytes if need else None,
            "cold_bytes": need.cold_bytes if need else None,
            "needed_source": need.source if need else None,
            "thrashing": need.thrashing if need else None,
            "limit_hits_per_s": None if r.limit_hits_per_s is None else round(r.limit_hits_per_s, 3),
            "events": dict(s.events),
            "stat": stat,
            "psi_some_pct": None if r.psi_some is None else round(r.psi_some * 100, 3),
            "psi_full_pct": None if r.psi_full is None else round(r.psi_full * 100, 3),
            "psi_some_total_us": s.psi_some_us,
            "psi_full_total_us": s.psi_full_us,
            "nprocs": len(s.pids) if s.version else len(s.unified_pids),
            "cgroup_id": s.cgroup_id or None,
            "unit": cgroupfs.unit_of(path) or None,
            "container": (
                {"runtime": c[0], "id": c[1], "pod_uid": c[2], "name": c[3], "pod": c[4]} if c else None
            ),
            "container_name": cgroupfs.Container(*c).short() if c else None,
            "reclaim_episodes": 0,
            "reclaim_stall_ns": 0,
            "reclaim_p99_ns": None,
            "reclaim_max_ns": 0,
            "swapins": 0,
            "swapin_wait_ns": 0,
            "oom_kills": 0,
            "oom_limit_kills": p.oom_limit_kills if p else 0,
            "children": 0,
            "collapsed": False,
            "tree": "",
        }

    def document(self, state: State, opts: Options) -> CgroupsDoc:
        st = state.get(CgroupsState)
        by_path = self._rows(state)
        children: dict[str, list[str]] = {}
        for path in by_path:
            if path != "/":
                parent = cgroupfs.parent(path)
                while parent not in by_path and parent != "/":
                    parent = cgroupfs.parent(parent)
                children.setdefault(parent, []).append(path)
        for path, row in by_path.items():
            row["children"] = len(children.get(path, []))
        key = opts.sort if opts.sort in SORT_KEYS else "usage_bytes"

        def order(p: str) -> tuple[bool, Any]:
            v = by_path[p].get(key)
            return (v is not None, v if v is not None else 0)

        keep: set[str] | None = None
        if opts.filter:
            keep = set()
            for path, row in by_path.items():
                if matches(row, opts.filter):
                    anc = path
                    while anc not in keep:
                        keep.add(anc)
                        if anc == "/":
                            break
                        anc = cgroupfs.parent(anc)
        collapsed = set(opts.extra.get("collapsed", ()))
        depth = int(opts.extra.get("depth", 0) or 0)
        rows: list[CgroupRowDoc] = []

        def visit(path: str) -> None:
            row = by_path[path]
            if keep is not None and path not in keep:
                return
            kids = children.get(path, [])
            row["collapsed"] = bool(kids) and (path in collapsed or (depth > 0 and row["depth"] >= depth))
            row["tree"] = tree_label(row)
            rows.append(row)
            if row["collapsed"]:
                return
            ranked = sorted(kids, key=lambda p: (order(p), p), reverse=opts.reverse)
            if key == "path":
                ranked = sorted(kids, reverse=not opts.reverse)
            for kid in ranked:
                visit(kid)

        roots = [p for p in by_path if p == "/"] or sorted(
            p for p in by_path if cgroupfs.parent(p) not in by_path
        )
        for root in roots:
            visit(root)
        lay = st.layout
        head = self.head(state)
        doc: CgroupsDoc = {
            "pane": head["pane"],
            "source": head["source"],
            "taken_at_ns": head["taken_at_ns"],
            "taken_at": head["taken_at"],
            "probes": head["probes"],
            "layout": (
                {
                    "mode": lay.mode,
                    "memory_mount": lay.memory_mount or None,
                    "memory_version": lay.memory_version or None,
                    "unified_mount": lay.unified_mount or None,
                    "psi": lay.psi,
                }
                if lay
                else None
            ),
            "rows": rows,
            # episodes whose process was in no cgroup memtop had read (it started and stalled
            # between two reads, or the cgroups probe is not running)
            "unattributed_reclaims": (
                st.unattributed if st.rows and (measuring(state, "vmscan") or st.probed) else None
            ),
            # past the probe's limit the largest are read, the rest left out: said, never silent
            "over_limit": st.over_limit if measuring(state, "cgroups") else None,
            "max_cgroups": st.max_cgroups or None,
            # the kernel has MGLRU but its ages cannot be read (said, never a silent fallback)
            "lru_gen_unused": st.lru_gen_why or None,
        }
        target = opts.extra.get("cgroup")
        if isinstance(target, str) and target in by_path:
            doc["detail"] = self.detail(state, target, by_path[target])
        return doc

    # -- one cgroup ----------------------------------------------------------------------------
    def detail(self, state: State, path: str, row: CgroupRowDoc) -> CgroupDetail:
        """A cgroup's drill-in: its figures over time, its processes, its reclaim episodes and
        OOM kills."""
        st = state.get(CgroupsState)
        r = st.rows[path]
        procs = state.get(ProcessesState)
        reclaim = state.get(ReclaimState)
        inside = path.rstrip("/") + "/"

        def within(p: str | None) -> bool:
            return p is not None and (p == path or p.startswith(inside) or path == "/")

        processes: list[CgroupProcess] = []
        for pid, memcg in st.pid_memcg.items():
            if memcg != path:
                continue
            pr = procs.rows.get(pid)
            if pr is None:
                continue
            stall = reclaim.pids.get(pid)
            processes.append(
                {
                    "pid": pid,
                    "comm": pr.sample.comm,
                    "rss_bytes": pr.sample.rss_bytes,
                    "swap_bytes": pr.sample.swap_bytes,
                    "major_faults_per_s": round(pr.majflt_per_s, 3),
                    "reclaim_stall_ns": stall.total_ns if stall else 0,
                    "unified": st.unified_of(pid),
                }
            )
        processes.sort(key=lambda p: (p["rss_bytes"], p["pid"]), reverse=True)
        episodes: list[CgroupEpisode] = [
            {
                "ts_ns": e.ts_ns,
                "pid": e.pid,
                "comm": e.comm,
                "latency_ns": e.latency_ns,
                "pages": e.pages_reclaimed,
            }
            for e in reclaim.events
            if e.kind == "memcg" and within(st.pid_memcg.get(e.pid))
        ]
        episodes = episodes[-100:]
        kills: list[CgroupKill] = [
            {
                "ts_ns": k.ts_ns,
                "victim_pid": k.victim_pid,
                "victim_comm": k.victim_comm,
                "oom_memcg": k.memcg or None,
                "task_memcg": k.task_memcg or None,
                "memcg_usage_bytes": k.memcg_usage_bytes,
                "memcg_limit_bytes": k.memcg_limit_bytes,
            }
            for k in state.get(OomState).kills
            if within(k.task_memcg or st.pid_memcg.get(k.victim_pid)) or (k.memcg and within(k.memcg))
        ]
        return {
            "path": path,
            "history": [
                {
                    "ts_ns": ts,
                    "usage_bytes": u,
                    "anon_bytes": a,
                    "file_bytes": f,
                    "kernel_bytes": k,
                    "shmem_bytes": sh,
                    "swap_bytes": sw,
                }
                for ts, u, a, f, k, sh, sw in r.history
            ],
            "limit_bytes": row["limit_bytes"],
            "needed": needed_detail(r.needed(st.polled_ns or r.ts_ns), row["psi_some_pct"]),
            "page_cache": cgroup_cache(path, r),
            "processes": processes,
            "reclaim_events": episodes,
            "oom_kills": kills,
        }

    def text_extra(self, doc: CgroupsDoc) -> str:
        lay = doc.get("layout")
        lines = [""]
        if lay:
            lines.append(
                f"layout: {lay['mode']}; memory controller v{lay['memory_version'] or '-'} at "
                f"{lay['memory_mount'] or '-'}; cgroup2 at {lay['unified_mount'] or '-'}; "
                f"PSI per cgroup {'on' if lay['psi'] else 'off'}"
            )
        if doc.get("unattributed_reclaims"):
            lines.append(
                f"memcg reclaim episodes of processes in no known cgroup: {doc['unattributed_reclaims']}"
            )
        why = doc.get("lru_gen_unused")
        if why:
            lines.append(f"needed memory from memory.stat, not MGLRU's page ages: {why}")
        if doc.get("over_limit"):
            lines.append(
                f"{doc['over_limit']} more cgroups past the limit of {doc['max_cgroups']} not read "
                "(the largest kept, by memory usage)"
            )
        return "\n".join(lines) + "\n"


def row_detail(r: CgroupRowDoc | None) -> Sentence:
    """The box under the Cgroups table: the cgroup under the cursor, its container or unit, its
    limits and figures, memory.stat's split, zswap (the TUI draws it: memtop/ui/panes/cgroups.py)."""
    t = Sentence()
    if r is None:
        t.add("No cgroup: the cgroups probe has not read any yet.", style="dim")
        return t
    t.add(r["path"], style="bold")
    if r["container"]:
        c = r["container"]
        t.add(f"  {c['runtime']} {c['id'][:12]}")
        if c["name"]:
            t.add(f" {c['name']}")
        if c["pod"] or c["pod_uid"]:
            t.add(f"  pod {c['pod'] or c['pod_uid']}")
    elif r["unit"]:
        t.add(f"  unit {r['unit']}")
    t.add("\n")
    parts = [f"usage {fmt.bytes_h(r['usage_bytes'])}"]
    if r["path"] == "/" and r["version"] == 1:
        # mm/memcontrol-v1.c: the root's usage is its page cache and anon pages (and swap), while
        # every other memcg's counter also charges kernel memory: a child may show more
        parts[0] += " (the v1 root's: page cache and anon only; its children's count kernel memory too)"
    if r["limit_bytes"] is not None:
        parts.append(f"limit {fmt.bytes_h(r['limit_bytes'])}")
    for value, label in (
        (r["high_bytes"], "high"),
        (r["low_bytes"], "low"),
        (r["soft_limit_bytes"], "soft limit"),
    ):
        if value is not None:
            parts.append(f"{label} {fmt.bytes_h(value)}")
    parts.append(f"working set {fmt.bytes_h(r['working_set_bytes'])}")
    if r["needed_bytes"] is not None:  # anon + active file + what is touched again (docs)
        parts.append(
            f"needed {fmt.bytes_h(r['needed_bytes'])} cold {fmt.bytes_h(r['cold_bytes'])}"
            + (" (lru_gen)" if r["needed_source"] == "lru_gen" else "")  # MGLRU's page ages
        )
        if r["thrashing"]:
            parts.append("THRASHING: refaults high, needed over the limit")
    if r["swap_bytes"] is not None:
        parts.append(f"swap {fmt.bytes_h(r['swap_bytes'])}")
    if r["events"]:
        parts.append("events " + " ".join(f"{k} {v}" for k, v in r["events"].items()))
    some, full = r["psi_some_total_us"], r["psi_full_total_us"]
    if some is not None:
        # a memory.pressure file has both lines; a "-" where a recording lacks the full one
        parts.append(
            f"PSI some {fmt.ns_h(some * 1000)} full {fmt.ns_h(None if full is None else full * 1000)} total"
        )
    t.add("  ".join(parts))
    stat = r["stat"]
    if stat:
        t.add("\n")
        t.add(
            "  ".join(
                f"{k} {fmt.bytes_h(stat[k])}"
                for k in ("anon", "file", "kernel", "slab", "shmem", "sock", "dirty", "writeback")
                if k in stat
            ),
            style="dim",
        )
    if "zswapped" in stat:  # v2 only: its swap held compressed in RAM, not on disk
        t.add("\n")
        t.add(
            f"zswap {fmt.bytes_h(stat['zswapped'])} in {fmt.bytes_h(stat.get('zswap', 0))}"
            f"  in {fmt.count_h(stat.get('zswpin', 0))} out {fmt.count_h(stat.get('zswpout', 0))}"
            f" written back {fmt.count_h(stat.get('zswpwb', 0))} pages",
            style="dim",
        )
    return t


def detail_header(path: str, row: CgroupRowDoc | None, detail: CgroupDetail | None) -> Sentence:
    """The cgroup drill-in's header: the cgroup, its usage of its limit, swap, PSI, its
    container, its page cache; or that it is gone (the TUI draws it: memtop/ui/screens/cgroup.py)."""
    t = Sentence()
    t.add(path, style="bold")
    if row is None or detail is None:
        t.add("  this cgroup is gone", style="yellow")
        return t
    t.add(
        f"  usage {fmt.bytes_h(row['usage_bytes'])}"
        + (f" of {fmt.bytes_h(row['limit_bytes'])}" if row["limit_bytes"] is not None else " (no limit)")
        + f"  swap {fmt.bytes_h(row['swap_bytes'])}  PSI {row['psi_some_pct'] if row['psi_some_pct'] is not None else '-'}%"
    )
    if row["container_name"]:
        t.add(f"  {row['container_name']}")
    t.add("\npage " + cache_line(detail["page_cache"]))
    return t
