"""The vmscan pane: page scanning and reclaim by origin (kswapd, direct, memcg), the kernel's own
pgscan/pgsteal counters with %vmeff as `sar -B` defines it, refaults, slab shrinkers and compaction.
Totals are since memtop started (the probe attached); rates are per second over the last tick."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal, TypedDict

from memtop.core import fmt
from memtop.state import State
from memtop.state.base import log2_le
from memtop.state.host import HostState
from memtop.state.vmscan import VmscanState
from memtop.views import Column, Head, Options, View, measuring, render_table
from memtop.views.segments import Sentence

#: the origins table's columns
OriginKey = Literal[
    "origin",
    "pages_scanned",
    "pages_reclaimed",
    "events",
    "scanned_per_s",
    "reclaimed_per_s",
    "efficiency_pct",
]
#: the slab shrinkers table's columns
ShrinkerKey = Literal["shrinker", "count", "total_ns", "avg_ns", "objects_freed", "count_per_s"]


class OriginRow(TypedDict):
    """Who reclaimed (``rows[]``): kswapd, direct or memcg."""

    origin: str
    pages_scanned: int
    pages_reclaimed: int
    events: int
    scanned_per_s: float
    reclaimed_per_s: float
    efficiency_pct: float | None


class ShrinkerRow(TypedDict):
    shrinker: str
    count: int
    total_ns: int
    avg_ns: int
    objects_freed: int
    count_per_s: float


class Bucket(TypedDict):
    le_ns: int
    count: int


class Compaction(TypedDict):
    count: int | None
    total_ns: int | None
    histogram: list[Bucket]
    kcompactd_wakes: int | None


class KernelView(TypedDict):
    """The kernel's own view, from /proc/vmstat (``kernel``)."""

    rates: dict[str, float]
    since_start: dict[str, int]
    vmeff_pct: float | None
    vmeff_all_pct: float | None
    have_vmstat: bool


class VmscanDoc(Head):
    """The vmscan pane's document (docs/panes/vmscan.md); its counts are null while the vmscan
    probe measures nothing."""

    rows: list[OriginRow]
    kswapd_wakes: int | None
    kswapd_sleeps: int | None
    kswapd_wakes_per_s: float | None
    kswapd_sleeps_per_s: float | None
    slab_shrink: list[ShrinkerRow]
    slab_dropped: int | None
    compaction: Compaction
    kernel: KernelView


#: /proc/vmstat counters whose per-second rates the pane shows (sar -B and thrashing)
KERNEL_RATES = (
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pgscan_anon",
    "pgscan_file",
    "pgsteal_anon",
    "pgsteal_file",
    "workingset_refault_anon",
    "workingset_refault_file",
    "pswpin",
    "pswpout",
    "allocstall_normal",
    "compact_stall",
)


def efficiency(reclaimed: float, scanned: float) -> float | None:
    """Reclaim efficiency in percent (pages reclaimed per page scanned); None when nothing was
    scanned."""
    return round(100.0 * reclaimed / scanned, 1) if scanned > 0 else None


def kernel_section(sys_state: HostState) -> KernelView:
    """The kernel's view from /proc/vmstat: rates over the last tick, totals since start, and
    %vmeff. sar's %vmeff is pgsteal/s over (pgscank/s + pgscand/s); the kernel leaves memcg-limit
    reclaim out of those per-origin counters, so ``vmeff_all_pct`` (pgsteal_anon+file over
    pgscan_anon+file) is given too: it counts every reclaimer."""
    rates = {f"{k}_per_s": round(sys_state.vmstat_rate(k), 1) for k in KERNEL_RATES}
    since = {k: sys_state.vmstat_since_start(k) for k in KERNEL_RATES}
    scan_sar = rates["pgscan_kswapd_per_s"] + rates["pgscan_direct_per_s"]
    steal_sar = rates["pgsteal_kswapd_per_s"] + rates["pgsteal_direct_per_s"]
    scan_all = rates["pgscan_anon_per_s"] + rates["pgscan_file_per_s"]
    steal_all = rates["pgsteal_anon_per_s"] + rates["pgsteal_file_per_s"]
    return {
        "rates": rates,
        "since_start": since,
        "vmeff_pct": efficiency(steal_sar, scan_sar),
        "vmeff_all_pct": efficiency(steal_all, scan_all),
        "have_vmstat": bool(sys_state.vmstat),
    }


class VmscanView(View[VmscanDoc]):
    name = "vmscan"
    title = "vmscan"
    order = 20
    probes = ("vmscan", "procfs")
    vmstat_fallback = (
        "vmscan",
        (
            ("pgscan*", "pages scanned", "rate"),
            ("pgsteal*", "reclaimed", "rate"),
            ("allocstall*", "direct stalls", "rate"),
        ),
    )
    columns: ClassVar[tuple[Column[OriginKey], ...]] = (
        Column("origin", "ORIGIN", numeric=False),
        Column("pages_scanned", "SCANNED", fmt.count_h),
        Column("pages_reclaimed", "RECLAIMED", fmt.count_h),
        Column("events", "CALLS", fmt.count_h),
        Column("scanned_per_s", "SCAN/s", fmt.count_h),
        Column("reclaimed_per_s", "RECL/s", fmt.count_h),
        Column("efficiency_pct", "EFF%", fmt.pct),
    )
    slab_columns: ClassVar[tuple[Column[ShrinkerKey], ...]] = (
        Column("shrinker", "SHRINKER", numeric=False),
        Column("count", "CALLS", fmt.count_h),
        Column("total_ns", "TIME", fmt.ns_h),
        Column("avg_ns", "AVG", fmt.ns_h),
        Column("objects_freed", "FREED", fmt.count_h),
        Column("count_per_s", "CALLS/s", fmt.count_h),
    )

    def document(self, state: State, opts: Options) -> VmscanDoc:
        vs = state.get(VmscanState)
        t = vs.totals
        rows: list[OriginRow] = [
            {
                "origin": r.origin,
                "pages_scanned": r.pages_scanned,
                "pages_reclaimed": r.pages_reclaimed,
                "events": r.events,
                "scanned_per_s": round(r.scanned_per_s, 1),
                "reclaimed_per_s": round(r.reclaimed_per_s, 1),
                "efficiency_pct": efficiency(r.pages_reclaimed, r.pages_scanned),
            }
            for r in vs.origins.values()
        ]
        slab: list[ShrinkerRow] = [
            {
                "shrinker": s.shrinker,
                "count": s.count,
                "total_ns": s.total_ns,
                "avg_ns": s.total_ns // s.count if s.count else 0,
                "objects_freed": s.objects_freed,
                "count_per_s": round(s.count_per_s, 1),
            }
            for s in sorted(vs.shrinkers.values(), key=lambda s: (-s.total_ns, s.shrinker))
        ]
        hist: list[Bucket] = [
            {"le_ns": log2_le(i), "count": n} for i, n in (t.compaction_hist if t is not None else ())
        ]
        head = self.head(state)
        if not measuring(state, "vmscan") and not vs.has_data:  # zeros would read as "no reclaim"
            return {
                "pane": head["pane"],
                "source": head["source"],
                "taken_at_ns": head["taken_at_ns"],
                "taken_at": head["taken_at"],
                "probes": head["probes"],
                "rows": [],
                "kswapd_wakes": None,
                "kswapd_sleeps": None,
                "kswapd_wakes_per_s": None,
                "kswapd_sleeps_per_s": None,
                "slab_shrink": [],
                "slab_dropped": None,
                "compaction": {"count": None, "total_ns": None, "histogram": [], "kcompactd_wakes": None},
                "kernel": kernel_section(state.get(HostState)),
            }
        return {
            "pane": head["pane"],
            "source": head["source"],
            "taken_at_ns": head["taken_at_ns"],
            "taken_at": head["taken_at"],
            "probes": head["probes"],
            "rows": rows,
            "kswapd_wakes": t.kswapd_wakes if t else 0,
            "kswapd_sleeps": t.kswapd_sleeps if t else 0,
            "kswapd_wakes_per_s": round(vs.kswapd_wakes_per_s, 2),
            "kswapd_sleeps_per_s": round(vs.kswapd_sleeps_per_s, 2),
            "slab_shrink": slab,
            "slab_dropped": t.slab_dropped if t else 0,
            "compaction": {
                "count": t.compaction_count if t else 0,
                "total_ns": t.compaction_total_ns if t else 0,
                "histogram": hist,
                "kcompactd_wakes": t.kcompactd_wakes if t else 0,
            },
            "kernel": kernel_section(state.get(HostState)),
        }

    def text_extra(self, doc: VmscanDoc) -> str:
        k = doc["kernel"]
        r = k["rates"]
        lines = [
            "",
            f"kswapd wakes {fmt.count(doc['kswapd_wakes'])} ({fmt.count_h(doc['kswapd_wakes_per_s'])}/s), "
            f"sleeps {fmt.count(doc['kswapd_sleeps'])} ({fmt.count_h(doc['kswapd_sleeps_per_s'])}/s)",
            "kernel (/proc/vmstat) per second: "
            f"pgscank {r['pgscan_kswapd_per_s']} pgscand {r['pgscan_direct_per_s']} "
            f"pgsteal {r['pgsteal_kswapd_per_s'] + r['pgsteal_direct_per_s']:.1f} "
            f"%vmeff {fmt.pct(k['vmeff_pct'])}  all reclaimers: scan {r['pgscan_anon_per_s'] + r['pgscan_file_per_s']:.1f} "
            f"steal {r['pgsteal_anon_per_s'] + r['pgsteal_file_per_s']:.1f} eff {fmt.pct(k['vmeff_all_pct'])}",
            f"refaults/s anon {r['workingset_refault_anon_per_s']} file {r['workingset_refault_file_per_s']}"
            f"  pswpin/s {r['pswpin_per_s']} pswpout/s {r['pswpout_per_s']}",
            "",
        ]
        out = "\n".join(lines) + "\n"
        out += render_table("Slab shrinkers (by time)", self.slab_columns, doc["slab_shrink"][:20])
        c = doc["compaction"]
        out += (
            f"\nCompaction: {fmt.count(c['count'])} runs, {fmt.ns_h(c['total_ns'])} total, "
            f"kcompactd wakes {fmt.count(c['kcompactd_wakes'])}\n"
        )
        out += render_hist(c["histogram"])
        return out


def render_hist(buckets: Sequence[Bucket], width: int = 40) -> str:
    """A bcc-style log2 histogram: ``[lo, hi] count |****|``."""
    if not buckets:
        return "  (none)\n"
    peak = max(b["count"] for b in buckets) or 1
    lines = []
    for b in buckets:
        hi = int(b["le_ns"])
        lo = (hi + 1) // 2
        bar = "*" * max(1 if b["count"] else 0, round(width * b["count"] / peak))
        lines.append(f"  {fmt.ns_h(lo):>9} .. {fmt.ns_h(hi):<9} {b['count']:>8} |{bar:<{width}}|")
    return "\n".join(lines) + "\n"


# -- the pane's sentences (the TUI lays them out: memtop/ui/panes/vmscan.py) ----------------------
def status_segments(state: State) -> Sentence:
    """What the status line says after the probe: that it has not read yet."""
    t = Sentence()
    if not state.get(VmscanState).has_data:
        t.add("   waiting for the vmscan probe…", style="dim")
    return t


def kernel_parts(doc: VmscanDoc) -> list[tuple[str, str]]:
    """The kernel's own figures as (bold label, text) parts, which the pane packs on as few lines
    as its width allows: kswapd's and direct scanning, every reclaimer, thrashing, kswapd."""
    k, r = doc["kernel"], doc["kernel"]["rates"]
    parts = [
        (
            "kernel/s ",
            f"pgscank {fmt.count_h(r['pgscan_kswapd_per_s'])}  pgscand {fmt.count_h(r['pgscan_direct_per_s'])}  "
            f"pgsteal {fmt.count_h(r['pgsteal_kswapd_per_s'] + r['pgsteal_direct_per_s'])}  "
            f"%vmeff {fmt.pct(k['vmeff_pct'])}",
        ),
        (
            "all reclaimers ",
            f"scan {fmt.count_h(r['pgscan_anon_per_s'] + r['pgscan_file_per_s'])}  "
            f"steal {fmt.count_h(r['pgsteal_anon_per_s'] + r['pgsteal_file_per_s'])}  "
            f"eff {fmt.pct(k['vmeff_all_pct'])}",
        ),
        (
            "thrashing ",
            f"refault/s anon {fmt.count_h(r['workingset_refault_anon_per_s'])} "
            f"file {fmt.count_h(r['workingset_refault_file_per_s'])}  "
            f"pswpin/s {fmt.count_h(r['pswpin_per_s'])}  pswpout/s {fmt.count_h(r['pswpout_per_s'])}",
        ),
        (
            "kswapd ",
            f"wakes {fmt.count(doc['kswapd_wakes'])} ({fmt.count_h(doc['kswapd_wakes_per_s'])}/s) "
            f"sleeps {fmt.count(doc['kswapd_sleeps'])} ({fmt.count_h(doc['kswapd_sleeps_per_s'])}/s)",
        ),
    ]
    return parts


def compaction_segments(doc: VmscanDoc) -> Sentence:
    """The compaction box: runs, time, kcompactd wakes and the latency histogram."""
    c = doc["compaction"]
    comp = Sentence()
    comp.add("Compaction", style="bold")
    comp.add(
        f"  {fmt.count(c['count'])} runs, {fmt.ns_h(c['total_ns'])} total,"
        f" kcompactd wakes {fmt.count(c['kcompactd_wakes'])}\n"
    )
    comp.add(render_hist(c["histogram"], width=20))
    return comp
