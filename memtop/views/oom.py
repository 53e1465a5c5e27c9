"""The OOM pane: each kill, its victim and trigger, memcg or global, the victim's memory."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, TypedDict

from memtop.core import fmt
from memtop.linux import cgroupfs
from memtop.state import State
from memtop.state.cgroups import CgroupsState
from memtop.state.oom import FORECAST_NOTICE_S, SIGNAL_NAMES, Forecast, OomState, SignalKillRow
from memtop.state.processes import ProcessesState
from memtop.views import Column, Head, Options, View, measuring, wall_ns
from memtop.views.segments import Sentence

ADJ_UNKNOWN = -10000

#: the kills table's columns
KillKey = Literal[
    "age_ns",
    "victim_pid",
    "victim_comm",
    "scope",
    "cgroup",
    "anon_rss_bytes",
    "file_rss_bytes",
    "shmem_rss_bytes",
    "total_vm_bytes",
    "uid",
    "oom_score_adj",
    "trigger_pid",
    "trigger_comm",
    "load1",
]


class TopTask(TypedDict):
    pid: int
    comm: str
    rss_bytes: int
    oom_score_adj: int


class Kill(TypedDict):
    """A kernel OOM kill (``events[]``)."""

    ts_ns: int
    age_ns: int
    victim_pid: int
    victim_comm: str
    trigger_pid: int
    trigger_comm: str
    scope: str
    total_vm_bytes: int
    anon_rss_bytes: int
    file_rss_bytes: int
    shmem_rss_bytes: int
    uid: int
    oom_score_adj: int | None
    pgtables_bytes: int
    memcg: str
    cgroup: str | None
    memcg_usage_bytes: int | None
    memcg_limit_bytes: int | None
    memcg_failcnt: int | None
    loadavg: list[float]
    load1: float
    missing: list[str]
    source: str
    at: str | None
    gfp_mask: str
    order: int | None
    top_tasks: list[TopTask]


class Signal(TypedDict):
    signal: str
    ts_ns: int
    sender_pid: int
    sender_comm: str
    result: int


class SignalKill(TypedDict):
    """A kill by a signal from user space (``signal_kills[]``): earlyoom, systemd-oomd…"""

    ts_ns: int
    age_ns: int
    at: str | None
    victim_pid: int
    victim_comm: str
    signals: list[Signal]
    sender_pid: int
    sender_comm: str
    sender_exe: str
    killer: str | None
    rss_bytes: int | None
    swap_bytes: int | None
    cgroup: str | None
    psi_some_pct: float | None
    psi_full_pct: float | None
    cgroup_psi_some_pct: float | None
    cgroup_psi_full_pct: float | None
    reason: str | None
    rule: str | None


class CgroupOoms(TypedDict):
    path: str
    oom_kill: int
    oom: int | None


class AtRisk(TypedDict):
    """A memory limit a growth will reach soon (``at_risk[]``)."""

    cgroup: str | None
    used_bytes: int | None
    limit_bytes: int | None
    margin_bytes: int
    growth_bytes_per_s: float
    seconds_left: float
    victim_pid: int | None
    victim_comm: str | None
    victim_rss_bytes: int | None
    victim_swap_bytes: int | None
    victim_oom_score_adj: int | None
    killer: str
    threshold_bytes: int | None


class Killer(TypedDict):
    """A userspace memory killer running here, with the thresholds it kills at (``killers[]``)."""

    killer: str
    pid: int
    mem_percent: float
    swap_percent: float
    mem_kib: int | None
    swap_kib: int | None
    pressure_percent: float | None
    source: str


class OomdCgroup(TypedDict):
    """A cgroup systemd-oomd monitors (``oomd.monitored[]``)."""

    cgroup: str
    rule: str
    pressure_limit_percent: float | None
    pressure_duration_s: float | None


class Oomd(TypedDict):
    """systemd-oomd's account of what it watches, from ``oomctl dump`` (``oomd``)."""

    status: str
    dry_run: bool
    swap_used_limit_percent: float | None
    pressure_limit_percent: float | None
    pressure_duration_s: float | None
    monitored: list[OomdCgroup]


class OomDoc(Head):
    """The OOM kills pane's document (docs/panes/oom.md)."""

    events: list[Kill]
    total: int | None
    before_start: int
    signal_kills: list[SignalKill]
    signal_total: int | None
    cgroups: list[CgroupOoms]
    at_risk: list[AtRisk]
    killers: list[Killer]
    oomd: Oomd | None
    forecast_notice_s: float


def _adj(v: Any) -> str:
    return "?" if v is None else str(v)


class OomView(View[OomDoc]):
    name = "oom"
    title = "OOM kills"
    tab_title = "OOM"
    order = 50
    probes = ("oom", "kills", "cgroups")
    vmstat_fallback = ("oom", (("oom_kill", "OOM kills", "total"),))
    columns: ClassVar[tuple[Column[KillKey], ...]] = (
        Column("age_ns", "AGO", lambda ns: fmt.age_h(ns / 1e9)),
        Column("victim_pid", "PID"),
        Column("victim_comm", "VICTIM", numeric=False, min_width=8),
        Column("scope", "SCOPE", numeric=False),
        Column("cgroup", "CGROUP", cgroupfs.short_path, numeric=False, priority=1, min_width=10),
        Column("anon_rss_bytes", "ANON", fmt.bytes_h),
        Column("file_rss_bytes", "FILE", fmt.bytes_h, priority=2),
        Column("shmem_rss_bytes", "SHMEM", fmt.bytes_h, priority=3),
        Column("total_vm_bytes", "VM", fmt.bytes_h, priority=2),
        Column("uid", "UID", priority=4),
        Column("oom_score_adj", "ADJ", _adj, priority=3),
        Column("trigger_pid", "BY PID", priority=2),
        Column("trigger_comm", "TRIGGERED BY", numeric=False, priority=2, min_width=8),
        Column("load1", "LOAD", lambda v: f"{v:.2f}", priority=4),
    )

    def document(self, state: State, opts: Options) -> OomDoc:
        st = state.get(OomState)
        memcg = state.get(CgroupsState).pid_memcg
        events: list[Kill] = []
        for k in st.kills:
            if opts.pid is not None and opts.pid not in (k.victim_pid, k.trigger_pid):
                continue
            events.append(
                {
                    "ts_ns": k.ts_ns,
                    "age_ns": max(0, state.ts_ns - k.ts_ns),
                    "victim_pid": k.victim_pid,
                    "victim_comm": k.victim_comm,
                    "trigger_pid": k.trigger_pid,
                    "trigger_comm": k.trigger_comm,
                    "scope": k.scope,
                    "total_vm_bytes": k.total_vm_bytes,
                    "anon_rss_bytes": k.anon_rss_bytes,
                    "file_rss_bytes": k.file_rss_bytes,
                    "shmem_rss_bytes": k.shmem_rss_bytes,
                    "uid": k.uid,
                    "oom_score_adj": None if k.oom_score_adj == ADJ_UNKNOWN else k.oom_score_adj,
                    "pgtables_bytes": k.pgtables_bytes,
                    "memcg": k.memcg,
                    # the victim's own memcg; the limit that fired is memcg's (an ancestor or it)
                    "cgroup": k.task_memcg or memcg.get(k.victim_pid),
                    "memcg_usage_bytes": k.memcg_usage_bytes,
                    "memcg_limit_bytes": k.memcg_limit_bytes,
                    "memcg_failcnt": k.memcg_failcnt,
                    "loadavg": list(k.loadavg),
                    "load1": k.loadavg[0],
                    "missing": list(k.missing),
                    "source": k.source,
                    "at": _iso(wall_ns(state, k.ts_ns)),
                    "gfp_mask": k.gfp_mask,
                    "order": k.order,
                    "top_tasks": [
                        {"pid": p, "comm": c, "rss_bytes": r, "oom_score_adj": a}
                        for p, c, r, a in k.top_tasks
                    ],
                }
            )
        head = self.head(state)
        return {
            "pane": head["pane"],
            "source": head["source"],
            "taken_at_ns": head["taken_at_ns"],
            "taken_at": head["taken_at"],
            "probes": head["probes"],
            "events": events,
            # kills seen; None when the probe is not watching (no kill seen would not mean none)
            "total": st.total if measuring(state, "oom") or st.kills else None,
            "before_start": st.before_start,
            "signal_kills": [
                _signal_kill(state, r)
                for r in st.signal_kills
                if opts.pid is None or opts.pid in (r.victim_pid, r.sender_pid)
            ],
            # listed signal kills; None when the probe is not watching
            "signal_total": st.signal_total if measuring(state, "kills") or st.signal_kills else None,
            "cgroups": _cgroup_counters(state),
            "at_risk": [_at_risk(state, f) for f in _growing(st)],
            "killers": [
                {
                    "killer": name,
                    "pid": pid,
                    "mem_percent": mem_pct,
                    "swap_percent": swap_pct,
                    "mem_kib": mem_kib or None,
                    "swap_kib": swap_kib or None,
                    "pressure_percent": psi or None,
                    "source": where,
                }
                for name, pid, mem_pct, swap_pct, mem_kib, swap_kib, psi, where in st.killers
            ],
            "oomd": _oomd(st),
            "forecast_notice_s": FORECAST_NOTICE_S,
        }

    def ready(self, state: State, opts: Options) -> bool:
        """The OOM probe's first poll is in (it brings the kernel log's kills from before memtop
        started) and so are the cgroups' own counters, for the probes that run."""
        oom_polled = ("oom", "events") in state.lost or not measuring(state, "oom")
        cgroups_read = bool(state.get(CgroupsState).rows) or not measuring(state, "cgroups")
        return oom_polled and cgroups_read

    def table_rows(self, doc: OomDoc) -> list[Kill]:
        return doc["events"]

    def text_extra(self, doc: OomDoc) -> str:
        lines = [""]
        for e in doc["events"]:
            extra = []
            if e["memcg"]:
                extra.append(f"limit of memcg {e['memcg']} fired")
                if e["memcg_limit_bytes"] is not None:
                    extra.append(
                        f"usage {fmt.bytes_h(e['memcg_usage_bytes'])} of {fmt.bytes_h(e['memcg_limit_bytes'])}"
                        f", failcnt {e['memcg_failcnt']}"
                    )
            elif e["scope"] == "global":
                extra.append("global: the machine ran out of memory, no cgroup limit")
            if e["cgroup"] and e["cgroup"] != e["memcg"]:
                extra.append(f"victim in {e['cgroup']}")
            extra.append("load " + " ".join(f"{v:.2f}" for v in e["loadavg"]))
            if e["missing"]:
                extra.append("kernel did not say: " + ", ".join(e["missing"]))
            if e["source"] == "kmsg":
                extra.insert(0, f"before memtop started, read from the kernel log{_at(e)}")
            if e["top_tasks"]:
                extra.append(
                    "largest tasks then: "
                    + ", ".join(
                        f"{t['comm']} [{t['pid']}] {fmt.bytes_h(t['rss_bytes'])}" for t in e["top_tasks"]
                    )
                )
            lines.append(f"{e['victim_pid']} {e['victim_comm']}: " + "; ".join(extra))
        if not doc["events"] and doc["total"] is not None:
            lines.append("no OOM kill since memtop started")
        if doc["signal_kills"]:
            lines.append("")
            lines.append("Killed by a signal from another process (not the kernel's OOM killer):")
            for k in doc["signal_kills"]:
                lines.append("  " + signal_kill_line(k))
        if doc["at_risk"]:
            lines.append("")
            lines.append("At risk: time to exhaustion at the current growth, and who the kernel would kill:")
            for r in doc["at_risk"]:
                lines.append("  " + at_risk_line(r))
        if doc["killers"]:
            lines.append("")
            lines.append("Memory killers running, and the thresholds they kill at:")
            for killer in doc["killers"]:
                lines.append("  " + killer_line(killer))
        if doc["oomd"] is not None:
            lines.append("")
            lines.append(oomd_line(doc["oomd"]))
            for m in doc["oomd"]["monitored"]:
                lines.append("  " + oomd_cgroup_line(m))
        if doc["cgroups"]:
            lines.append("")
            lines.append("OOM kills per memory cgroup since it was created (its own counter):")
            for c in doc["cgroups"]:
                oom = "" if c["oom"] is None else f", {fmt.plural(c['oom'], 'OOM')}"
                lines.append(f"  {c['path']}: {fmt.plural(c['oom_kill'], 'kill')}{oom}")
        return "\n".join(lines) + "\n"


def _oomd(st: OomState) -> Oomd | None:
    o = st.oomd
    if o is None:
        return None
    return {
        "status": o.status,
        "dry_run": o.dry_run,
        "swap_used_limit_percent": o.swap_used_limit_percent,
        "pressure_limit_percent": o.pressure_limit_percent,
        "pressure_duration_s": o.pressure_duration_s,
        "monitored": [
            {"cgroup": path, "rule": rule, "pressure_limit_percent": limit, "pressure_duration_s": dur}
            for path, rule, limit, dur in o.monitored
        ],
    }


def oomd_line(o: Mapping[str, Any]) -> str:
    """One line: what systemd-oomd watches, or why memtop cannot say."""
    if o["status"]:
        return f"systemd-oomd (oomctl): {o['status']}"
    limits = []
    if o["swap_used_limit_percent"] is not None:
        limits.append(f"swap used over {o['swap_used_limit_percent']:.2f}%")
    if o["pressure_limit_percent"] is not None:
        dur = "" if o["pressure_duration_s"] is None else f" for {o['pressure_duration_s']:g}s"
        limits.append(f"memory pressure over {o['pressure_limit_percent']:.2f}%{dur} by default")
    dry = " (dry run: it kills nothing)" if o["dry_run"] else ""
    n = len(o["monitored"])
    return (
        f"systemd-oomd (oomctl) kills on {', '.join(limits) or 'its limits'}{dry}; "
        f"{fmt.plural(n, 'cgroup')} monitored{':' if n else ''}"
    )


def oomd_cgroup_line(m: Mapping[str, Any]) -> str:
    if m["rule"] == "swap":
        return f"{m['cgroup']}: swap (killed first when swap use is over the limit)"
    limit = "" if m["pressure_limit_percent"] is None else f" over {m['pressure_limit_percent']:.2f}%"
    dur = "" if m["pressure_duration_s"] is None else f" for {m['pressure_duration_s']:g}s"
    return f"{m['cgroup']}: memory pressure{limit}{dur}"


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    stamp = datetime.datetime.fromtimestamp(ns / 1e9, datetime.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _at(e: Kill) -> str:
    return f" (at {e['at']})" if e["at"] else ""


def _cgroup_counters(state: State) -> list[CgroupOoms]:
    """Each memory cgroup whose own counter says it had OOM kills (v1 ``memory.oom_control``
    ``oom_kill``; v2 ``memory.events`` ``oom_kill`` and ``oom``): kills before memtop started
    too, as long as the cgroup exists."""
    out: list[CgroupOoms] = []
    for path, row in state.get(CgroupsState).rows.items():
        kills = row.event("oom_kill")
        if kills:
            out.append({"path": path, "oom_kill": kills, "oom": row.event("oom")})
    out.sort(key=lambda c: (-c["oom_kill"], c["path"]))
    return out


def _signal_kill(state: State, r: SignalKillRow) -> SignalKill:
    return {
        "ts_ns": r.ts_ns,
        "age_ns": max(0, state.ts_ns - r.last_ts_ns),
        "at": _iso(wall_ns(state, r.ts_ns)),
        "victim_pid": r.victim_pid,
        "victim_comm": r.victim_comm,
        "signals": [
            {
                "signal": SIGNAL_NAMES.get(sig, str(sig)),
                "ts_ns": ts,
                "sender_pid": pid,
                "sender_comm": comm,
                "result": res,
            }
            for sig, ts, pid, comm, res in r.signals
        ],
        "sender_pid": r.sender_pid,
        "sender_comm": r.sender_comm,
        "sender_exe": r.sender_exe,
        "killer": r.killer or None,
        "reason": r.reason or None,
        "rule": r.rule or None,
        "rss_bytes": r.rss_bytes,
        "swap_bytes": r.swap_bytes,
        "cgroup": r.cgroup,
        "psi_some_pct": r.psi_some,
        "psi_full_pct": r.psi_full,
        "cgroup_psi_some_pct": r.cgroup_psi_some,
        "cgroup_psi_full_pct": r.cgroup_psi_full,
    }


def signal_kill_line(k: SignalKill) -> str:
    """``comm [pid] killed by earlyoom (memory killer) …`` or ``… killed by PID COMM``."""
    by = f"{k['sender_pid']} {k['sender_comm']}"
    who = f"by memory killer {k['killer']} ({by})" if k["killer"] else f"by {by}, not an OOM kill"
    sigs = " then ".join(s["signal"] for s in k["signals"])
    parts = [f"{k['victim_comm']} [{k['victim_pid']}] killed {who}: {sigs}"]
    if k["rss_bytes"] is not None:
        mem = f"RSS {fmt.bytes_h(k['rss_bytes'])}"
        if k["swap_bytes"]:
            mem += f", swap {fmt.bytes_h(k['swap_bytes'])}"
        parts.append(mem)
    if k["cgroup"]:
        parts.append(f"in {k['cgroup']}")
    if k["psi_some_pct"] is not None:
        parts.append(f"PSI some {k['psi_some_pct']:.2f}% full {k['psi_full_pct']:.2f}%")
    if k["cgroup_psi_some_pct"] is not None:
        parts.append(f"cgroup PSI some {k['cgroup_psi_some_pct']:.2f}%")
    if k["at"]:
        parts.append(f"at {k['at']}")
    if k.get("reason"):
        parts.append(f"{k['killer']} said: {k['reason']}")
    return "; ".join(parts)


#: a process the OOM killer never chooses
OOM_SCORE_ADJ_MIN = -1000
#: forecasts listed as at risk, the soonest first
AT_RISK = 20


#: forecasts further off than this are not "at risk"
AT_RISK_HORIZON_S = 3600.0


def _growing(st: OomState) -> list[Forecast]:
    out = [
        f for f in st.forecasts.values() if f.seconds_left is not None and f.seconds_left <= AT_RISK_HORIZON_S
    ]
    out.sort(key=lambda f: f.seconds_left or 0.0)
    return out[:AT_RISK]


def _at_risk(state: State, f: Forecast) -> AtRisk:
    """A forecast with the process the kernel would choose, by its badness: RSS + swap plus
    oom_score_adj thousandths of what may be used (the memcg's limit, or the machine's RAM +
    swap), among the processes of the memcg and its children (or of the machine); a process at
    -1000 is never chosen."""
    # only a growing limit is at risk (_growing): its time left is known
    assert f.seconds_left is not None
    procs = state.get(ProcessesState)
    st = state.get(OomState)
    total = f.limit_bytes if f.path else st.mem_total_bytes + st.swap_total_bytes
    cgroups = state.get(CgroupsState)
    if f.path:
        prefix = f.path.rstrip("/") + "/"
        pids = [
            pid
            for path, row in cgroups.rows.items()
            if path == f.path or path.startswith(prefix) or f.path == "/"
            for pid in row.sample.pids
        ]
    else:
        pids = list(procs.rows)
    best: tuple[int, int, str, int, int, int] | None = None
    for pid in pids:
        r = procs.rows.get(pid)
        if r is None:
            continue
        s = r.sample
        adj = st.adj.get(pid, 0)
        if adj <= OOM_SCORE_ADJ_MIN:
            continue
        points = s.rss_bytes + s.swap_bytes + adj * total // 1000
        if best is None or points > best[0]:
            best = (points, pid, s.comm, s.rss_bytes, s.swap_bytes, adj)
    return {
        "cgroup": f.path or None,
        "used_bytes": f.used_bytes if f.path else None,
        "limit_bytes": f.limit_bytes if f.path else None,
        "margin_bytes": f.margin_bytes,
        "growth_bytes_per_s": f.growth_bytes_per_s,
        "seconds_left": f.seconds_left,
        "victim_pid": best[1] if best else None,
        "victim_comm": best[2] if best else None,
        "victim_rss_bytes": best[3] if best else None,
        "victim_swap_bytes": best[4] if best else None,
        "victim_oom_score_adj": best[5] if best else None,
        "killer": f.killer,
        "threshold_bytes": None if f.path else f.threshold_bytes,
    }


def at_risk_line(r: AtRisk) -> str:
    where = f"memcg {r['cgroup']}" if r["cgroup"] else "the machine (MemAvailable)"
    if not r["cgroup"] and r.get("killer", "kernel") != "kernel":
        where = f"the machine (MemAvailable to {r['killer']}'s {fmt.bytes_h(r['threshold_bytes'])})"
    line = (
        f"{where}: {fmt.age_h(r['seconds_left'])} left at +{fmt.bytes_h(int(r['growth_bytes_per_s']))}/s, "
        f"margin {fmt.bytes_h(r['margin_bytes'])}"
    )
    if r["victim_pid"] is not None:
        line += (
            f"; next victim {r['victim_comm']} [{r['victim_pid']}] RSS {fmt.bytes_h(r['victim_rss_bytes'])}"
        )
    return line


def killer_line(k: Killer) -> str:
    """``earlyoom [812]: MemAvailable <= 10.00% and SwapFree <= 10.00% (cmdline)``."""
    mem = f"{k['mem_percent']:.2f}%"
    if k["mem_kib"]:
        mem += f" or {fmt.bytes_h(k['mem_kib'] * 1024)}, the lower"
    swap = f"{k['swap_percent']:.2f}%"
    if k["swap_kib"]:
        swap += f" or {fmt.bytes_h(k['swap_kib'] * 1024)}, the lower"
    line = f"{k['killer']} [{k['pid']}]: MemAvailable <= {mem} and SwapFree <= {swap}"
    if k["pressure_percent"]:
        line += f"; a unit's memory pressure over {k['pressure_percent']:.2f}%"
    return line + f" (from {k['source']})"


# -- the pane's sentences (the TUI draws them: memtop/ui/panes/oom.py) ----------------------------
def status_segments(doc: OomDoc) -> Sentence:
    """What the status line says after the probes: kills since start, before it, the cgroups'
    own counters."""
    t = Sentence()
    if doc["total"] is not None:
        t.add(f"   {fmt.plural(doc['total'], 'OOM kill')} since start")
    if doc["before_start"]:
        t.add(f", {doc['before_start']} before (kernel log)")
    if doc["cgroups"]:
        t.add(
            "   cgroup counters: "
            + ", ".join(f"{c['path']} {c['oom_kill']}" for c in doc["cgroups"][:3])
            + (" …" if len(doc["cgroups"]) > 3 else "")
        )
    return t


def signals_segments(doc: OomDoc) -> Sentence:
    """The latest kills by a signal from another process, one a line (a killer's in yellow)."""
    t = Sentence()
    for i, k in enumerate(doc["signal_kills"][:8]):
        if i:
            t.add("\n")
        t.add(signal_kill_line(k), style="yellow" if k["killer"] else "")
    return t


def risk_segments(doc: OomDoc) -> Sentence:
    """Who is at risk (red when the exhaustion is near), then what systemd-oomd watches."""
    t = Sentence()
    for i, r in enumerate(doc["at_risk"][:5]):
        if i:
            t.add("\n")
        soon = r["seconds_left"] is not None and r["seconds_left"] < doc["forecast_notice_s"]
        t.add("at risk: " + at_risk_line(r), style="bold red" if soon else "dim")
    if doc["oomd"] is not None:  # oomctl is installed: what systemd-oomd watches, or why unknown
        if t:
            t.add("\n")
        t.add(oomd_line(doc["oomd"]), style="dim")
    return t


def kill_detail(e: Kill | None) -> Sentence:
    """The kill under the cursor: who, why (which limit), what it held, the largest tasks then."""
    t = Sentence()
    if e is None:
        t.add("No OOM kill since memtop started.", style="dim")
        return t
    t.add(f"{e['victim_comm']} [{e['victim_pid']}]", style="bold red")
    t.add(f" killed ({e['scope']}")
    if e["memcg"]:
        t.add(f": the limit of {e['memcg']} fired")
        if e["memcg_limit_bytes"] is not None:
            t.add(
                f", usage {fmt.bytes_h(e['memcg_usage_bytes'])} of {fmt.bytes_h(e['memcg_limit_bytes'])}"
                f", failcnt {e['memcg_failcnt']}"
            )
    elif e["scope"] == "global":
        t.add(": no cgroup limit, the machine ran out")
    t.add(f"), triggered by {e['trigger_comm']} [{e['trigger_pid']}]")
    if e["source"] == "kmsg":
        t.add(" · before memtop started (kernel log" + (f", {e['at']})" if e["at"] else ")"), style="dim")
    if e["cgroup"] and e["cgroup"] != e["memcg"]:
        t.add(f" · victim in {e['cgroup']}")
    t.add("\n")
    t.add(
        f"total_vm {fmt.bytes_h(e['total_vm_bytes'])}  anon {fmt.bytes_h(e['anon_rss_bytes'])}  "
        f"file {fmt.bytes_h(e['file_rss_bytes'])}  shmem {fmt.bytes_h(e['shmem_rss_bytes'])}  "
        f"page tables {fmt.bytes_h(e['pgtables_bytes'])}  uid {e['uid']}  "
        f"oom_score_adj {'?' if e['oom_score_adj'] is None else e['oom_score_adj']}  "
        f"load {' '.join(f'{v:.2f}' for v in e['loadavg'])}"
    )
    if e["top_tasks"]:
        t.add(
            "\nlargest tasks then: "
            + ", ".join(f"{x['comm']} [{x['pid']}] {fmt.bytes_h(x['rss_bytes'])}" for x in e["top_tasks"])
        )
    if e["missing"]:
        t.add("\nthis kernel did not say: " + ", ".join(e["missing"]), style="yellow")
    return t
