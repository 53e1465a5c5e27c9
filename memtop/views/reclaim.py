"""The reclaim pane: direct and memcg reclaim stalls (a drsnoop that also sees memcg-limit
reclaim): log2 latency histograms per kind, recent episodes, per-process totals. The histograms and
per-process totals are aggregated in the kernel, so they count every episode even when the event
ring overflowed; the events list is a log of what reached user space: the kernel rate-limits it
(the episodes it left out are "not listed"), and the lost count says what overflowed the ring."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from memtop.core import fmt
from memtop.linux import cgroupfs
from memtop.records.reclaim import RECLAIM_KINDS, ReclaimEvent
from memtop.state import State
from memtop.state.base import log2_le
from memtop.state.cgroups import CgroupsState
from memtop.state.reclaim import PidRow, ReclaimState
from memtop.views import Column, Options, View, measuring, render_table, wall_offset_ns
from memtop.views.vmscan import render_hist

SORT_KEYS = ("pid", "comm", "events", "total_ns", "max_ns", "avg_ns", "pages_reclaimed")
EVENTS_SHOWN = 200


class ReclaimView(View):
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
    columns = (
        Column("pid", "PID"),
        Column("comm", "COMMAND", numeric=False),
        Column("events", "STALLS", fmt.count_h),
        Column("total_ns", "TOTAL", fmt.ns_h),
        Column("max_ns", "MAX", fmt.ns_h, level="reclaim_latency_ns"),
        Column("avg_ns", "AVG", fmt.ns_h),
        Column("direct_events", "DIRECT", fmt.count_h),
        Column("memcg_events", "MEMCG", fmt.count_h),
        Column("pages_reclaimed", "PAGES", fmt.count_h),
        Column("cgroup", "CGROUP", cgroupfs.short_path, numeric=False),
    )
    event_columns = (
        Column("wall_ns", "TIME", fmt.clock_h, numeric=False),
        Column("pid", "PID"),
        Column("comm", "COMMAND", numeric=False),
        Column("kind", "KIND", numeric=False),
        Column("latency_ns", "LATENCY", fmt.ns_h, level="reclaim_latency_ns"),
        Column("pages_reclaimed", "PAGES", fmt.count_h),
        Column("cgroup", "CGROUP", cgroupfs.short_path, numeric=False),
    )

    def document(self, state: State, opts: Options) -> dict[str, Any]:
        rs = state.get(ReclaimState)
        memcg = state.get(CgroupsState).pid_memcg
        kinds = [opts.section] if opts.section in RECLAIM_KINDS else list(RECLAIM_KINDS)
        histogram = [
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
        events = [
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
        key = opts.sort if opts.sort in SORT_KEYS else "total_ns"
        rows.sort(key=lambda row: (row[key], row["pid"]), reverse=opts.reverse)
        doc: dict[str, Any] = {
            **self.head(state),
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
        if not measuring(state, "vmscan") and rs.totals is None:  # no stall seen is not "no stall"
            doc.update(histogram=[], events=[], rows=[], events_per_s={})
            doc.update(events_received=None, lost_events=None, unlisted_events=None, unpaired=None)
            doc["events_total"] = {k: None for k in RECLAIM_KINDS}
        return doc

    def text_extra(self, doc: dict[str, Any]) -> str:
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


def pid_row(r: PidRow, cgroup: str | None, kind: str | None) -> dict[str, Any]:
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
