"""The Kernel pane: where MemTotal went (a breakdown that adds up, "unexplained" its own line), the
slab caches of /proc/slabinfo with their growth, and on demand who allocates them (the slabtrace
probe, sampled, by cache and call site) and page allocations by order (pagealloc); fragmentation
from /proc/buddyinfo, vmalloc by caller, kernel allocation profiling (/proc/allocinfo).

Options: ``sort`` (a column key of the slab table), ``filter`` (part of a cache name),
``extra["cache"]`` (a cache: the document's ``sites`` are that cache's call sites; all caches'
otherwise). ``section``: "" (everything), or one of :data:`SECTIONS` for `snapshot --section`.
"""

from __future__ import annotations

from typing import ClassVar, Literal, NotRequired, TypedDict, get_args

from memtop.core import fmt
from memtop.linux import kernelfs
from memtop.records.kernel import PageAlloc, SlabTrace
from memtop.state import State
from memtop.state.kernel import KernelState, Traced
from memtop.views import Column, Head, Options, View
from memtop.views.segments import Sentence

#: what the slab table sorts by
SortKey = Literal[
    "name",
    "active_objs",
    "num_objs",
    "objsize",
    "total_bytes",
    "bytes_per_s",
    "delta_bytes",
    "allocs_per_s",
]
SORT_KEYS: tuple[SortKey, ...] = get_args(SortKey)
#: the slab table's columns
RowKey = Literal[
    "name",
    "total_bytes",
    "bytes_per_s",
    "delta_bytes",
    "active_objs",
    "num_objs",
    "objsize",
    "allocs_per_s",
    "top_site",
]
#: the parts `memtop snapshot --section` may ask for
Section = Literal["breakdown", "slabs", "sites", "pages", "vmalloc", "allocinfo"]
SECTIONS: tuple[Section, ...] = get_args(Section)
#: rows of call sites, vmalloc callers and allocinfo sites a document carries
MAX_SITES = 100
#: the slab tracers, one attached at a time: allocations (the default), allocations and frees (per
#: call site net growth), allocations with kernel stacks
SLAB_TRACERS = ("slabtrace", "slabfrees", "slabstacks")
#: why per call site frees and net growth are null: the tracer that ran did not hook the frees
FREES_NOT_TRACED = "frees not traced: f to trace"
#: the order whose fragmentation the buddy table shows (a THP is order 9; 3 is what the kernel's
#: costly-order threshold, PAGE_ALLOC_COSTLY_ORDER, calls costly)
FRAG_ORDERS = (3, 9)


class BreakdownLine(TypedDict):
    key: str
    label: str
    bytes: int
    pct: float | None


class BreakdownDoc(TypedDict):
    """Where MemTotal went (``breakdown``)."""

    total_bytes: int
    sum_bytes: int
    lines: list[BreakdownLine]
    unexplained_bytes: int
    vmap_stack: bool | None


class SlabDoc(TypedDict):
    """/proc/slabinfo as read (``slab``)."""

    readable: bool | None
    message: str | None
    hint: str | None
    caches: int | None
    total_bytes: int | None


class SlabRow(TypedDict):
    """A slab cache (``rows[]``)."""

    name: str
    active_objs: int
    num_objs: int
    objsize: int
    total_bytes: int
    active_bytes: int
    bytes_per_s: float
    objs_per_s: float
    delta_bytes: int
    delta_objs: int
    allocs_per_s: float | None
    top_site: str | None


class CostDoc(TypedDict):
    """What a tracer costs, as the kernel measured it."""

    events_per_s: float | None
    cpu_pct: float | None
    ns_per_event: float | None


class SiteStack(TypedDict):
    frames: list[str]
    allocs: int


class SiteRow(TypedDict):
    """A slab call site (``sites.rows[]``)."""

    cache: str
    site: str
    allocs: int
    bytes: int
    frees: int | None
    net_objs: int | None
    allocs_per_s: float | None
    bytes_per_s: float | None
    net_per_s: float | None
    stacks: list[SiteStack]


class SitesDoc(TypedDict):
    """The slab tracer's call sites (``sites``); the figures after ``rows`` once it read."""

    tracing: bool
    cache: str | None
    sample: int | None
    mode: str | None
    frees_traced: bool | None
    frees_note: str | None
    stacks: bool
    rows: list[SiteRow]
    nsites: NotRequired[int]
    allocs_seen: NotRequired[int]
    frees_seen: NotRequired[int | None]
    frees_unattributed: NotRequired[int | None]
    dropped: NotRequired[int]
    cost: NotRequired[CostDoc]


class ZoneDoc(TypedDict):
    node: int
    zone: str
    free_blocks: list[int]
    free_bytes: int
    unusable: dict[str, float | None]


class OrderDoc(TypedDict):
    order: int
    allocs: int
    per_s: float | None


class PageAllocDoc(TypedDict):
    """The pagealloc probe (``pages.page_alloc``); its cost once it read."""

    tracing: bool
    orders: list[OrderDoc] | None
    cost: NotRequired[CostDoc]


class PagesDoc(TypedDict):
    zones: list[ZoneDoc]
    page_alloc: PageAllocDoc


class VmallocRow(TypedDict):
    caller: str
    kind: str | None
    areas: int
    bytes: int


class VmallocDoc(TypedDict):
    """/proc/vmallocinfo by caller (``vmalloc``)."""

    readable: bool
    message: str | None
    areas: int | None
    total_bytes: int | None
    ncallers: int | None
    rows: list[VmallocRow]


class AllocSite(TypedDict):
    bytes: int
    calls: int
    where: str
    module: str | None
    function: str
    accurate: bool
    growth_bytes: int | None


class AllocDir(TypedDict):
    dir: str
    bytes: int
    calls: int


class AllocinfoDoc(TypedDict):
    """Kernel allocation profiling (``allocinfo``); the figures after ``hint`` while it is on."""

    state: str
    hint: str | None
    version: NotRequired[str]
    nsites: NotRequired[int]
    total_bytes: NotRequired[int]
    total_calls: NotRequired[int]
    inaccurate: NotRequired[int]
    window_s: NotRequired[float | None]
    by_bytes: NotRequired[list[AllocSite]]
    by_calls: NotRequired[list[AllocSite]]
    tree: NotRequired[list[AllocDir]]


class KernelDoc(Head):
    """The Kernel pane's document (docs/panes/kernel.md); ``snapshot --section`` keeps ``slab``,
    ``rows`` (empty but for ``slabs``) and the part it asks for."""

    breakdown: NotRequired[BreakdownDoc | None]
    slab: SlabDoc
    rows: list[SlabRow]
    sites: NotRequired[SitesDoc]
    pages: NotRequired[PagesDoc]
    vmalloc: NotRequired[VmallocDoc | None]
    allocinfo: NotRequired[AllocinfoDoc | None]


def _rate(v: float | None) -> str:
    if v is None:
        return "-"
    return ("+" if v > 0 else "") + fmt.bytes_h(v) + "/s" if v else "0"


def _delta(v: int | None) -> str:
    if v is None:
        return "-"
    return ("+" if v > 0 else "") + fmt.bytes_h(v)


def mode_label(sites: SitesDoc) -> str:
    """What the slab tracer that ran hooked, in words ("" before it ran)."""
    mode = sites["mode"]
    if mode is None:
        return ""
    label = "allocations and frees" if mode == "allocs+frees" else "allocations only"
    return label + (", kernel stacks" if sites["stacks"] else "")


def attached(state: State, probe: str) -> bool:
    """The tracer runs now (a detached one measured until it detached: its figures stay, marked
    stopped)."""
    st = state.statuses.get(probe)
    return st is not None and st.state == "attached"


def _rates(t: Traced | None) -> tuple[float, Traced | None]:
    """(seconds between the tracer's last two reads, the tracer) or (0, ...) before two reads."""
    if t is None or t.prev is None:
        return 0.0, t
    return (t.ts_ns - t.prev_ts_ns) / 1e9, t


def _cost(t: Traced) -> CostDoc:
    """A tracer's cost: events/s between its last two reads, its programs' ns per event as the
    kernel measured them (BPF stats, held one second in ten) and the two multiplied, as a share
    of one CPU; None before two reads or without run stats."""
    dt = (t.ts_ns - t.prev_ts_ns) / 1e9 if t.prev is not None else 0.0
    cur, prev = t.cur, t.prev
    out: CostDoc = {"events_per_s": None, "cpu_pct": None, "ns_per_event": None}
    if cur.runs:
        out["ns_per_event"] = round(cur.run_ns / cur.runs, 1)
    if dt <= 0 or prev is None:
        return out
    if isinstance(cur, SlabTrace) and isinstance(prev, SlabTrace):
        out["events_per_s"] = round(max(0, cur.events - prev.events) / dt, 1)
    elif isinstance(cur, PageAlloc) and isinstance(prev, PageAlloc):
        out["events_per_s"] = round(max(0, sum(cur.orders) - sum(prev.orders)) / dt, 1)
    if out["ns_per_event"] is not None and out["events_per_s"] is not None:
        out["cpu_pct"] = round(out["events_per_s"] * out["ns_per_event"] / 1e7, 3)
    return out


class KernelView(View[KernelDoc]):
    name = "kernel"
    title = "Kernel memory"
    tab_title = "Kernel"
    order = 80
    probes = ("kernel", *SLAB_TRACERS, "pagealloc")
    on_request = (*SLAB_TRACERS, "pagealloc")
    alternatives = (SLAB_TRACERS,)
    sections = SECTIONS
    columns: ClassVar[tuple[Column[RowKey], ...]] = (
        Column("name", "CACHE", numeric=False, min_width=12),
        Column("total_bytes", "SIZE", fmt.bytes_h),
        Column("bytes_per_s", "GROW/s", _rate),
        Column("delta_bytes", "Δ START", _delta, priority=1),
        Column("active_objs", "ACTIVE", fmt.count_h, priority=3),
        Column("num_objs", "OBJS", fmt.count_h, priority=2),
        Column("objsize", "OBJSZ", fmt.bytes_h, priority=2),
        Column("allocs_per_s", "ALLOC/s", fmt.count_h, priority=1),
        Column("top_site", "TOP CALLER", numeric=False, priority=3, min_width=10),
    )

    def default_options(self) -> Options:
        return Options(sort="total_bytes", reverse=True)

    def ready(self, state: State, opts: Options) -> bool:
        st = state.get(KernelState)
        return bool(st.meminfo) and st.slab_readable is not None

    # -- parts ------------------------------------------------------------------------------------
    def breakdown(self, st: KernelState) -> BreakdownDoc | None:
        b = st.breakdown()
        if not b:
            return None
        total = st.meminfo.get("MemTotal", 0)
        lines: list[BreakdownLine] = [
            {
                "key": key,
                "label": label,
                "bytes": b[key],
                "pct": round(b[key] * 100 / total, 2) if total else None,
            }
            for key, label in kernelfs.BREAKDOWN
        ]
        return {
            "total_bytes": total,
            "sum_bytes": sum(b.values()),
            "lines": lines,
            "unexplained_bytes": b["unexplained"],
            "vmap_stack": st.vmap_stack,
        }

    def sites(self, state: State, cache: str | None) -> SitesDoc:
        """The slab tracer's call sites (of ``cache``, or all), estimated rates (sampled counts
        times the sampling period) and its cost. Frees and net growth per call site are null
        (with the reason) when the tracer that ran did not hook the frees."""
        st = state.get(KernelState)
        dt, t = _rates(st.slabtrace)
        doc: SitesDoc = {
            "tracing": any(attached(state, p) for p in SLAB_TRACERS),
            "cache": cache,
            "sample": None,
            "mode": None,
            "frees_traced": None,
            "frees_note": None,
            "stacks": False,
            "rows": [],
        }
        if t is None or not isinstance(t.cur, SlabTrace):
            return doc
        cur = t.cur
        frees = cur.frees_traced
        prev = {(c, s): (a, b, f) for c, s, a, b, f in t.prev.sites} if isinstance(t.prev, SlabTrace) else {}
        n = cur.sample
        stacks: dict[tuple[str, str], list[SiteStack]] = {}
        for c, s, frames, a in cur.stacks:
            stacks.setdefault((c, s), []).append({"frames": list(frames), "allocs": a * n})
        rows: list[SiteRow] = []
        for c, s, a, b, f in cur.sites:
            if cache is not None and c != cache:
                continue
            pa, pb, pf = prev.get((c, s), (0, 0, 0))
            rows.append(
                {
                    "cache": c,
                    "site": s,
                    "allocs": a * n,
                    "bytes": b * n,
                    "frees": f * n if frees else None,
                    "net_objs": (a - f) * n if frees else None,
                    "allocs_per_s": round((a - pa) * n / dt, 1) if dt > 0 else None,
                    "bytes_per_s": round((b - pb) * n / dt, 1) if dt > 0 else None,
                    "net_per_s": round(((a - pa) - (f - pf)) * n / dt, 1) if dt > 0 and frees else None,
                    "stacks": stacks.get((c, s), []),
                }
            )
        rows.sort(key=lambda r: (-(r["allocs_per_s"] or 0), -r["allocs"], r["cache"], r["site"]))
        doc["sample"] = n
        doc["mode"] = "allocs+frees" if frees else "allocs"
        doc["frees_traced"] = frees
        doc["frees_note"] = None if frees else FREES_NOT_TRACED
        doc["stacks"] = attached(state, "slabstacks") or bool(cur.stacks)
        doc["rows"] = rows[:MAX_SITES]
        doc["nsites"] = len(rows)
        doc["allocs_seen"] = cur.allocs
        doc["frees_seen"] = cur.frees if frees else None
        doc["frees_unattributed"] = cur.frees_unmatched if frees else None
        doc["dropped"] = cur.dropped
        doc["cost"] = _cost(t)
        return doc

    def pages(self, state: State) -> PagesDoc:
        st = state.get(KernelState)
        zones: list[ZoneDoc] = []
        for node, zone, free in st.buddy:
            zones.append(
                {
                    "node": node,
                    "zone": zone,
                    "free_blocks": list(free),
                    "free_bytes": sum(n << o for o, n in enumerate(free)) * kernelfs.PAGE,
                    "unusable": {
                        str(o): (None if (u := kernelfs.fragmentation(free, o)) is None else round(u, 4))
                        for o in FRAG_ORDERS
                    },
                }
            )
        dt, t = _rates(st.pagealloc)
        alloc: PageAllocDoc = {"tracing": attached(state, "pagealloc"), "orders": None}
        if t is not None and isinstance(t.cur, PageAlloc):
            cur = t.cur.orders
            prev = t.prev.orders if isinstance(t.prev, PageAlloc) else ()
            alloc["orders"] = [
                {
                    "order": o,
                    "allocs": n,
                    "per_s": (
                        round((n - (prev[o] if o < len(prev) else 0)) / dt, 1) if dt > 0 and t.prev else None
                    ),
                }
                for o, n in enumerate(cur)
            ]
            alloc["cost"] = _cost(t)
        return {"zones": zones, "page_alloc": alloc}

    def vmalloc(self, st: KernelState) -> VmallocDoc | None:
        v = st.vmalloc
        if v is None:
            return None
        if not v.readable:
            return {
                "readable": False,
                "message": v.message,
                "areas": None,
                "total_bytes": None,
                "ncallers": None,
                "rows": [],
            }
        return {
            "readable": True,
            "message": None,
            "areas": v.areas,
            "total_bytes": v.total_bytes,
            "ncallers": v.ncallers,
            "rows": [
                {"caller": c, "kind": k or None, "areas": n, "bytes": b}
                for c, k, n, b in v.callers[:MAX_SITES]
            ],
        }

    def allocinfo(self, st: KernelState) -> AllocinfoDoc | None:
        p = st.profile
        if p is None:
            return None
        doc: AllocinfoDoc = {"state": p.state, "hint": p.hint or None}
        if p.state != "on" or not p.sites:
            return doc
        prev: dict[tuple[str, int, str], int] = {}
        window_s = None
        if st.profile_prev is not None and st.profile_prev.sites:
            prev = {(s[2], s[3], s[5]): s[0] for s in st.profile_prev.sites}
            window_s = round((st.profile_ts_ns - st.profile_prev_ts_ns) / 1e9, 3)
        rows: list[AllocSite] = [
            {
                "bytes": b,
                "calls": n,
                "where": f"{f}:{ln}",
                "module": m or None,
                "function": fn,
                "accurate": acc,
                "growth_bytes": (b - prev[(f, ln, fn)]) if (f, ln, fn) in prev else None,
            }
            for b, n, f, ln, m, fn, acc in p.sites
        ]
        tree: dict[str, list[int]] = {}
        for b, n, f, _ln, _m, _fn, _acc in p.sites:
            parts = f.split("/")[:-1]
            for depth in range(1, min(len(parts), 3) + 1):
                d = "/".join(parts[:depth]) + "/"
                acc_ = tree.setdefault(d, [0, 0])
                acc_[0] += b
                acc_[1] += n
        doc["version"] = p.version
        doc["nsites"] = p.nsites
        doc["total_bytes"] = p.total_bytes
        doc["total_calls"] = p.total_calls
        doc["inaccurate"] = p.inaccurate
        doc["window_s"] = window_s
        doc["by_bytes"] = rows[:MAX_SITES]
        doc["by_calls"] = sorted(rows, key=lambda r: (-r["calls"], r["where"]))[:MAX_SITES]
        doc["tree"] = [
            {"dir": d, "bytes": v[0], "calls": v[1]}
            for d, v in sorted(tree.items(), key=lambda kv: (-kv[1][0], kv[0]))[:MAX_SITES]
        ]
        return doc

    # -- the document --------------------------------------------------------------------------
    def slab_rows(self, state: State, opts: Options, sites: SitesDoc) -> list[SlabRow]:
        st = state.get(KernelState)
        per_cache: dict[str, tuple[float, str]] = {}
        if sites["rows"] and sites["cache"] is None:
            for site in sites["rows"]:
                rate, top = per_cache.get(site["cache"], (0.0, ""))
                per_cache[site["cache"]] = (rate + (site["allocs_per_s"] or 0), top or site["site"])
        tracing = bool(sites["sample"])
        rows: list[SlabRow] = []
        needle = opts.filter.lower()
        for name, r in st.slabs.items():
            if needle and needle not in name.lower():
                continue
            s = r.slab
            rate, top = per_cache.get(name, (0.0, ""))
            rows.append(
                {
                    "name": name,
                    "active_objs": s.active_objs,
                    "num_objs": s.num_objs,
                    "objsize": s.objsize,
                    "total_bytes": s.total_bytes,
                    "active_bytes": s.active_objs * s.objsize,
                    "bytes_per_s": round(r.bytes_per_s, 1),
                    "objs_per_s": round(r.objs_per_s, 1),
                    "delta_bytes": s.total_bytes - r.first.total_bytes,
                    "delta_objs": s.active_objs - r.first.active_objs,
                    "allocs_per_s": round(rate, 1) if tracing else None,
                    "top_site": top or None,
                }
            )
        key: SortKey = next((k for k in SORT_KEYS if k == opts.sort), "total_bytes")
        rows.sort(key=lambda r: r["name"], reverse=False)
        rows.sort(
            key=lambda r: (r[key] is not None, r[key] if r[key] is not None else 0), reverse=opts.reverse
        )
        if key == "name":
            rows.sort(key=lambda r: r["name"], reverse=opts.reverse)
        return rows

    def document(self, state: State, opts: Options) -> KernelDoc:
        st = state.get(KernelState)
        cache = opts.extra.get("cache")
        sites = self.sites(state, cache if isinstance(cache, str) and cache else None)
        total, n = st.slab_totals()
        doc: KernelDoc = {
            **self.head(state),
            "breakdown": self.breakdown(st),
            "slab": {
                "readable": st.slab_readable,
                "message": st.slab_message or None,
                "hint": st.slab_hint or None,
                "caches": n if st.slab_readable else None,
                "total_bytes": total if st.slab_readable else None,
            },
            "rows": self.slab_rows(state, opts, sites) if st.slab_readable else [],
            "sites": sites,
            "pages": self.pages(state),
            "vmalloc": self.vmalloc(st),
            "allocinfo": self.allocinfo(st),
        }
        if opts.section in SECTIONS:
            # a section keeps the slab summary, the rows' key (empty but for "slabs") and its part
            part = opts.section
            if part != "breakdown":
                del doc["breakdown"]
            if part != "sites":
                del doc["sites"]
            if part != "pages":
                del doc["pages"]
            if part != "vmalloc":
                del doc["vmalloc"]
            if part != "allocinfo":
                del doc["allocinfo"]
            if part != "slabs":
                doc["rows"] = []
        return doc

    def history(self, state: State) -> list[tuple[int, dict[str, int]]]:
        return list(state.get(KernelState).history)

    # -- text -------------------------------------------------------------------------------------
    def text_extra(self, doc: KernelDoc) -> str:
        lines = [""]
        slab = doc.get("slab") or {}
        if slab.get("readable") is False:
            lines.append(
                f"slab caches: {slab['message']}" + (f" ({slab['hint']})" if slab.get("hint") else "")
            )
        b = doc.get("breakdown")
        if b:
            lines.append(f"Where MemTotal {fmt.bytes_h(b['total_bytes'])} went (from /proc/meminfo):")
            for line in b["lines"]:
                # no share without a MemTotal (a recording may lack it)
                pct = "     -" if line["pct"] is None else f"{line['pct']:6.2f}"
                lines.append(f"  {line['label']:<24} {fmt.bytes_h(line['bytes']):>8}  {pct}%")
        s = doc.get("sites")
        if s is not None:
            lines.append("")
            if not s["sample"]:
                lines.append("slab call sites: not traced (press t in the pane, or Enter on a cache)")
            else:
                c = s["cost"]
                frees = (
                    f"frees not attributed {s['frees_unattributed']}"
                    if s["frees_traced"]
                    else s["frees_note"]
                )
                lines.append(
                    f"slab call sites{' of ' + s['cache'] if s['cache'] else ''} ({mode_label(s)}, "
                    f"1 in {s['sample']} sampled; "
                    f"{fmt.count_h(c['events_per_s'])} events/s, {fmt.pct(c['cpu_pct'])} of a CPU; "
                    f"{frees}; dropped {s['dropped']}):"
                )
                for r in s["rows"][:20]:
                    net = fmt.count_h(r["net_objs"]) if r["net_objs"] is not None else "—"
                    lines.append(
                        f"  {r['cache']:<24} {r['site']:<32} {fmt.count_h(r['allocs_per_s']):>7}/s net {net}"
                    )
                    for st in r["stacks"]:
                        lines.append(f"      {fmt.count_h(st['allocs']):>6}  " + " ← ".join(st["frames"]))
        p = doc.get("pages")
        if p is not None:
            lines.append("")
            lines.append("free blocks by order (/proc/buddyinfo):")
            for z in p["zones"]:
                frag = " ".join(
                    f"unusable@{o} {fmt.pct(None if v is None else v * 100)}"
                    for o, v in z["unusable"].items()
                )
                lines.append(
                    f"  node {z['node']} {z['zone']:<8} {' '.join(str(x) for x in z['free_blocks'])}  {frag}"
                )
            pa = p["page_alloc"]
            if pa["orders"]:
                lines.append(
                    "page allocations/s by order: "
                    + " ".join(f"{o['order']}:{fmt.count_h(o['per_s'])}" for o in pa["orders"])
                )
        v = doc.get("vmalloc")
        if v is not None:
            lines.append("")
            if not v["readable"]:
                lines.append(f"vmalloc: {v['message']}")
            else:
                lines.append(
                    f"vmalloc by caller ({v['areas']} areas, {fmt.bytes_h(v['total_bytes'])}; /proc/vmallocinfo):"
                )
                for vr in v["rows"][:10]:
                    lines.append(
                        f"  {vr['caller']:<36} {vr['kind'] or '-':<8} {vr['areas']:>5} {fmt.bytes_h(vr['bytes']):>8}"
                    )
        a = doc.get("allocinfo")
        if a is not None:
            lines.append("")
            if a["state"] != "on":
                lines.append(
                    f"allocation profiling: {a['state']}" + (f" — {a['hint']}" if a.get("hint") else "")
                )
            elif "by_bytes" in a:
                lines.append(
                    f"allocation profiling (/proc/allocinfo {a['version']}): {a['nsites']} call sites, "
                    f"{fmt.bytes_h(a['total_bytes'])}; {a['inaccurate']} not accurate"
                )
                for ar in a["by_bytes"][:10]:
                    mod = f" [{ar['module']}]" if ar["module"] else ""
                    lines.append(
                        f"  {fmt.bytes_h(ar['bytes']):>8} {ar['calls']:>8} {ar['where']}{mod} {ar['function']}"
                    )
        return "\n".join(lines) + "\n"


# -- the pane's sentences (the TUI draws them: memtop/ui/panes/kernel.py) -------------------------
def summary(doc: KernelDoc, opts: Options) -> Sentence:
    """What the status line says after the probes: the caches and their size, the sort, the
    filter (``   312 caches 1.2G · sort SIZE ↓``)."""
    t = Sentence()
    slab = doc["slab"]
    caches = slab["caches"]  # known whenever slabinfo was readable
    if slab["readable"] and caches is not None:
        t.add(f"   {fmt.plural(caches, 'cache')} {fmt.bytes_h(slab['total_bytes'])}")
    label = next((c.label for c in KernelView.columns if c.key == opts.sort), opts.sort)
    t.add(f" · sort {label} {'↓' if opts.reverse else '↑'}")
    if opts.filter:
        t.add(" · filter: ")
        t.add(opts.filter, style="bold")
    return t


def detail_segments(doc: KernelDoc, mode: str) -> Sentence:
    """The lines under the slab table for ``mode`` (sites, pages, vmalloc, allocinfo; the
    breakdown's chart is the pane's own), after why slabinfo is unreadable when it is. One line
    per figure, cut at the edge by the pane (wrapped lines took the rows of a small terminal)."""
    t = Sentence()
    slab = doc["slab"]
    if slab["readable"] is False:
        t.add(f"Slab caches: {slab['message']}", style="yellow")
        if slab["hint"]:
            t.add(f" — {slab['hint']}", style="italic")
        t.add("\n")
    if mode == "pages":
        _pages_segments(doc, t)
    elif mode == "vmalloc":
        _vmalloc_segments(doc, t)
    elif mode == "allocinfo":
        _allocinfo_segments(doc, t)
    elif mode == "sites":
        _sites_segments(doc, t)
    return t


def cpu(cost: CostDoc) -> str:
    """A tracer's measured share of one CPU, "-" before two reads or without run stats."""
    v = cost["cpu_pct"]
    return "-" if v is None else f"{v:.2f}%"


def _sites_segments(doc: KernelDoc, t: Sentence) -> None:
    s = doc["sites"]
    if not s["sample"]:
        t.add("Slab call sites: not traced. ", style="bold")
        t.add("t traces every cache, Enter the selected one (sampled in kernel; t again stops)", style="dim")
        return
    c = s["cost"]
    t.add(f"Call sites of {s['cache'] or 'every cache'}", style="bold")
    # the cost line: what was hooked (and, before it is cut at 80 columns, why there is no net
    # growth), then what those programs cost as the kernel measured it
    t.add(
        f"  {mode_label(s)}"
        + ("" if s["frees_traced"] else f" · {s['frees_note']}")
        + f" · 1 in {s['sample']} sampled · {fmt.count_h(c['events_per_s'])} events/s"
        f" · {cpu(c)} of a CPU"
        + (f" ({c['ns_per_event']:.0f} ns/event)" if c["ns_per_event"] else "")
        + (f" · frees not attributed {fmt.count_h(s['frees_unattributed'])}" if s["frees_traced"] else "")
        + (f" · dropped {s['dropped']}" if s["dropped"] else "")
        + ("" if s["tracing"] else " · stopped"),
        style="dim",
    )
    for r in s["rows"][: 2 if s["stacks"] else 4]:
        t.add("\n")
        t.add(f"{r['cache'][:22]:<22} ", style="cyan")
        t.add(f"{r['site'][:34]:<34}")
        t.add(f" {fmt.count_h(r['allocs_per_s']):>6}/s  {fmt.bytes_h(r['bytes_per_s'])}/s")
        if s["frees_traced"]:
            t.add(f"  net {fmt.count_h(r['net_per_s'])}/s  Σnet {fmt.count_h(r['net_objs'])}")
        else:  # not measured: a dash, never a 0 (the cost line says why)
            t.add("  net —", style="dim")
        if s["stacks"]:  # its heaviest kernel stack: who called the call site
            t.add("\n")
            callers = r["stacks"][0]["frames"][1:] if r["stacks"] else []
            t.add("  ↳ " + (" ← ".join(callers) if callers else "no stack yet"), style="dim")


def _pages_segments(doc: KernelDoc, t: Sentence) -> None:
    p = doc["pages"]
    t.add("Free blocks by order", style="bold")
    t.add("  (buddyinfo; unusable: share of free memory too fragmented for order 3 / 9)", style="dim")
    for z in p["zones"]:
        t.add("\n")
        u = z["unusable"]
        frag = " / ".join("-" if v is None else f"{v * 100:.0f}%" for v in u.values())
        t.add(f"node {z['node']} {z['zone']:<7} {fmt.bytes_h(z['free_bytes']):>7} unusable {frag:<9} ")
        t.add(" ".join(fmt.count_h(n) for n in z["free_blocks"]), style="dim")
    pa = p["page_alloc"]
    t.add("\n")
    if pa["orders"] is None:
        t.add("Page allocations by order: not counted (p counts them in kernel)", style="dim")
    else:
        c = pa["cost"]
        t.add("Page allocs/s by order: ", style="bold")
        t.add(" ".join(f"{o['order']}:{fmt.count_h(o['per_s'])}" for o in pa["orders"]))
        t.add(
            f"  ({fmt.count_h(c['events_per_s'])}/s, {cpu(c)} of a CPU)"
            + ("" if pa["tracing"] else " stopped"),
            style="dim",
        )


def _vmalloc_segments(doc: KernelDoc, t: Sentence) -> None:
    v = doc["vmalloc"]
    if v is None:
        t.add("vmalloc: not read yet", style="dim")
        return
    if not v["readable"]:
        t.add(f"vmalloc: {v['message']}", style="yellow")
        return
    t.add(f"vmalloc by caller: {v['areas']} areas, {fmt.bytes_h(v['total_bytes'])}", style="bold")
    for r in v["rows"][:4]:
        t.add("\n")
        t.add(f"{fmt.bytes_h(r['bytes']):>8} {r['areas']:>5}  {(r['kind'] or '-'):<8} {r['caller']}")


def _allocinfo_segments(doc: KernelDoc, t: Sentence) -> None:
    a = doc["allocinfo"]
    if a is None:
        t.add("Allocation profiling: not read yet", style="dim")
        return
    if a["state"] != "on":
        t.add(f"Allocation profiling: {a['state']}. ", style="bold yellow")
        t.add(a["hint"] or "", style="dim")
        return
    if "by_bytes" not in a:
        t.add("Allocation profiling: on; /proc/allocinfo not readable", style="yellow")
        return
    t.add(
        f"Allocation profiling ({a['version']}): {a['nsites']} call sites hold {fmt.bytes_h(a['total_bytes'])}",
        style="bold",
    )
    for r in a["by_bytes"][:4]:
        t.add("\n")
        grow = (
            ""
            if r["growth_bytes"] is None
            else f" {'+' if r['growth_bytes'] > 0 else ''}{fmt.bytes_h(r['growth_bytes'])}"
        )
        mod = f" [{r['module']}]" if r["module"] else ""
        t.add(
            f"{fmt.bytes_h(r['bytes']):>8} {fmt.count_h(r['calls']):>6}{grow:>8}  {r['where']}{mod} {r['function']}"
        )
        if not r["accurate"]:
            t.add(" (not accurate)", style="yellow")
