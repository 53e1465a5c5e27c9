"""The reclaim pane: direct and memcg reclaim stalls (a drsnoop that also sees memcg-limit
reclaim): log2 latency histograms per kind, recent episodes, per-process totals. The histograms and
per-process totals are aggregated in the kernel, so they count every episode even when the event
ring overflowed; the events list is a log of what reached user space: the kernel rate-limits it
(the episodes it left out are "not listed"), and the lost count says what overflowed the ring."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import ClassVar, Literal, TypedDict, get_args

from memtop.core import fmt
from memtop.linux import cgroupfs
from memtop.records.reclaim import RECLAIM_KINDS, ReclaimEvent
from memtop.state import State
from memtop.state.base import log2_le
from memtop.state.cgroups import CgroupsState
from memtop.state.reclaim import PidRow, ReclaimState
from memtop.views import Column, Head, Options, View, measuring, render_table, wall_offset_ns
from memtop.views.segments import Segment, Sentence
from memtop.views.vmscan import render_hist

#: the processes table's columns
RowKey = Literal[
    "pid",
    "comm",
    "events",
    "total_ns",
    "max_ns",
    "avg_ns",
    "direct_events",
    "memcg_events",
    "pages_reclaimed",
    "cgroup",
]
#: the recent episodes' columns
EventKey = Literal["wall_ns", "pid", "comm", "kind", "latency_ns", "pages_reclaimed", "cgroup"]
#: what the processes table sorts by
SortKey = Literal["pid", "comm", "events", "total_ns", "max_ns", "avg_ns", "pages_reclaimed"]
SORT_KEYS: tuple[SortKey, ...] = get_args(SortKey)
EVENTS_SHOWN = 200


class Bucket(TypedDict):
    kind: str
    le_ns: int
    count: int


class Episode(TypedDict):
    """A logged reclaim episode (``events[]``)."""

    ts_ns: int
    wall_ns: int | None
    pid: int
    comm: str
    kind: str
    latency_ns: int
    pages_reclaimed: int
    cgroup: str | None


class EpisodeRow(Episode):
    """An episode as the pane's table lists it, keyed by its time and pid."""

    key: str


class ReclaimRow(TypedDict):
    """A process's stalls (``rows[]``)."""

    pid: int
    comm: str
    events: int
    total_ns: int
    max_ns: int
    avg_ns: int
    direct_events: int
    memcg_events: int
    pages_reclaimed: int
    cgroup: str | None


class ReclaimDoc(Head):
    """The Reclaim pane's document (docs/panes/reclaim.md); the counts are null while the vmscan
    probe measures nothing."""

    histogram: list[Bucket]
    events: list[Episode]
    rows: list[ReclaimRow]
    events_total: dict[str, int | None]
    events_received: int | None
    lost_events: int | None
    unlisted_events: int | None
    unpaired: int | None
    events_per_s: dict[str, float]


class ReclaimView(View[ReclaimDoc]):
    name = "reclaim"
    title = "Reclaim"
    order = 30
    probes = ("vmscan",)
    legend = (
        ("N episodes", "reclaim episodes since start, every kind, lost ones included"),
        ("received N", "the episodes that reached memtop one by one (the recent episodes' table)"),
        (
            "not listed",
            "episodes over the kernel-side log's rate: counted by the histograms and totals, not listed",
        ),
        ("kind", "what K chose: all, direct or memcg"),
    )
    vmstat_fallback = (
        "vmscan",
        (
            ("allocstall*", "direct reclaim stalls", "rate"),
            ("pgsteal_direct", "pages reclaimed directly", "rate"),
        ),
    )
    columns: ClassVar[tuple[Column[RowKey], ...]] = (
        Column("pid", "PID"),
        Column("comm", "COMMAND", numeric=False, min_width=8),
        Column("events", "STALLS", fmt.count_h),
        Column("total_ns", "TOTAL", fmt.ns_h),
        Column("max_ns", "MAX", fmt.ns_h, level="reclaim_latency_ns"),
        # on a narrow terminal (priority: higher drops sooner) the split and the detail go first
        Column("avg_ns", "AVG", fmt.ns_h, priority=1),
        Column("direct_events", "DIRECT", fmt.count_h, priority=2),
        Column("memcg_events", "MEMCG", fmt.count_h, priority=2),
        Column("pages_reclaimed", "PAGES", fmt.count_h, priority=3),
        Column("cgroup", "CGROUP", cgroupfs.short_path, numeric=False, priority=4, min_width=10),
    )
    event_columns: ClassVar[tuple[Column[EventKey], ...]] = (
        Column("wall_ns", "TIME", fmt.clock_h, numeric=False),
        Column("pid", "PID"),
        Column("comm", "COMMAND", numeric=False, min_width=8),
        Column("kind", "KIND", numeric=False),
        Column("latency_ns", "LATENCY", fmt.ns_h, level="reclaim_latency_ns"),
        Column("pages_reclaimed", "PAGES", fmt.count_h, priority=1),
        Column("cgroup", "CGROUP", cgroupfs.short_path, numeric=False, priority=2, min_width=10),
    )

    def document(self, state: State, opts: Options) -> ReclaimDoc:
        rs = state.get(ReclaimState)
        memcg = state.get(CgroupsState).pid_memcg
        kinds = [opts.section] if opts.section in RECLAIM_KINDS else list(RECLAIM_KINDS)
        histogram: list[Bucket] = [
            {"kind": kind, "le_ns": log2_le(i), "count": n}
            for kind in kinds
            for i, n in sorted(rs.histogram.get(kind, {}).items())
            if n
        ]
        # the TUI asks for the episodes it lists (``extra["events_limit"]``), not all 1,000: in a
        # swap storm the log turns over every few seconds and each dict costs a tick
        limit = opts.extra.get("events_limit")
        logged: Iterable[ReclaimEvent] = reversed(rs.events)
        if isinstance(limit, int):
            logged = itertools.islice((e for e in logged if e.kind in kinds), limit)
        off = wall_offset_ns(state)
        events: list[Episode] = [
            {
                "ts_ns": e.ts_ns,
                "wall_ns": None if off is None or not e.ts_ns else e.ts_ns + off,
                "pid": e.pid,
                "comm": e.comm,
                "kind": e.kind,
                "latency_ns": e.latency_ns,
                "pages_reclaimed": e.pages_reclaimed,
                "cgroup": memcg.get(e.pid),
            }
            for e in logged
            if e.kind in kinds
        ]
        rows = [
            pid_row(r, memcg.get(r.pid), opts.section if opts.section in RECLAIM_KINDS else None)
            for r in rs.pids.values()
            if (opts.pid is None or r.pid == opts.pid)
            and (opts.section not in RECLAIM_KINDS or r.by_kind.get(opts.section))
        ]
        key: SortKey = next((k for k in SORT_KEYS if k == opts.sort), "total_ns")
        rows.sort(key=lambda row: (row[key], row["pid"]), reverse=opts.reverse)
        head = self.head(state)
        if not measuring(state, "vmscan") and rs.totals is None:  # no stall seen is not "no stall"
            return {
                "pane": head["pane"],
                "source": head["source"],
                "taken_at_ns": head["taken_at_ns"],
                "taken_at": head["taken_at"],
                "probes": head["probes"],
                "histogram": [],
                "events": [],
                "rows": [],
                "events_total": {k: None for k in RECLAIM_KINDS},
                "events_received": None,
                "lost_events": None,
                "unlisted_events": None,
                "unpaired": None,
                "events_per_s": {},
            }
        return {
            "pane": head["pane"],
            "source": head["source"],
            "taken_at_ns": head["taken_at_ns"],
            "taken_at": head["taken_at"],
            "probes": head["probes"],
            "histogram": histogram,
            "events": events,
            "rows": rows,
            "events_total": {k: rs.histogram_total(k) for k in RECLAIM_KINDS},
            "events_received": rs.events_received,
            "lost_events": rs.lost_events,
            "unlisted_events": rs.unlisted_events,
            "unpaired": rs.unpaired,
            "events_per_s": {k: round(v, 2) for k, v in rs.events_per_s.items()},
        }

    def summary(self, doc: ReclaimDoc, opts: Options) -> list[Segment]:
        """What the status line says after the probe: episodes, received, not listed, lost, the
        sort and the kind (``   36518 episodes · received 36516 · sort TOTAL ↓ · kind all``)."""
        totals = [n for n in doc["events_total"].values() if n is not None]
        total = sum(totals) if totals else None
        out = [
            Segment(
                f"   {fmt.count(total)} episodes · received {fmt.count(doc['events_received'])}", "default"
            )
        ]
        if doc["unlisted_events"]:
            out.append(Segment(f" · {fmt.count(doc['unlisted_events'])} episodes not listed", "default"))
        if doc["lost_events"]:  # the count itself is in the probe's part of the line
            out.append(Segment(" (lost to the ring; histograms and totals count them)", "red"))
        label = next(c.label for c in self.columns if c.key == (opts.sort or "total_ns"))
        out.append(Segment(f" · sort {label} {'↓' if opts.reverse else '↑'}"))
        out.append(Segment(f" · kind {opts.section or 'all'}"))
        return out

    def text_extra(self, doc: ReclaimDoc) -> str:
        out = ""
        for kind in RECLAIM_KINDS:
            buckets = [b for b in doc["histogram"] if b["kind"] == kind]
            total = fmt.count(doc["events_total"].get(kind, 0))
            out += f"\n{kind} reclaim latency ({total} episodes)\n" + render_hist(buckets)
        out += (
            f"\nevents received {fmt.count(doc['events_received'])}, lost {fmt.count(doc['lost_events'])}"
            " (histograms and totals count lost ones too)"
        )
        if doc["unlisted_events"]:
            out += f"; {fmt.count(doc['unlisted_events'])} episodes not listed (the log's rate limit)"
        out += "\n\n"
        out += render_table("Recent episodes", self.event_columns, doc["events"][:EVENTS_SHOWN])
        return out


def hist_title(doc: ReclaimDoc, kind: str) -> Sentence:
    """A kind's histogram title line: its episodes since start and their rate, then a line break
    (the TUI draws the histogram under it)."""
    t = Sentence()
    rate = doc["events_per_s"].get(kind, 0.0)
    t.add(f"{kind} reclaim", style="bold")
    t.add(f"  {fmt.count_h(doc['events_total'].get(kind, 0))} episodes, {fmt.count_h(rate)}/s\n")
    return t


def pid_row(r: PidRow, cgroup: str | None, kind: str | None) -> ReclaimRow:
    """A process's row: its totals over every kind, or one kind's alone (the pane's K)."""
    if kind is None:
        events, total_ns, max_ns, pages = r.events, r.total_ns, r.max_ns, r.pages_reclaimed
    else:
        events, total_ns, max_ns, pages = r.per_kind.get(kind, (0, 0, 0, 0))
    return {
        "pid": r.pid,
        "comm": r.comm,
        "events": events,
        "total_ns": total_ns,
        "max_ns": max_ns,
        "avg_ns": total_ns // events if events else 0,
        "direct_events": r.by_kind.get("direct", 0) if kind in (None, "direct") else 0,
        "memcg_events": r.by_kind.get("memcg", 0) if kind in (None, "memcg") else 0,
        "pages_reclaimed": pages,
        "cgroup": cgroup,
    }
