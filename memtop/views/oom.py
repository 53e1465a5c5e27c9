"""The OOM pane: each kill, its victim and trigger, memcg or global, the victim's memory."""

from __future__ import annotations

import datetime
from typing import Any

from memtop import cgroupfs, fmt
from memtop.state import State
from memtop.state.cgroups import CgroupsState
from memtop.state.oom import SIGNAL_NAMES, OomState, SignalKillRow
from memtop.views import Column, Options, View, measuring, wall_ns

ADJ_UNKNOWN = -10000


def _adj(v: Any) -> str:
    return "?" if v is None else str(v)


class OomView(View):
    name = "oom"
    title = "OOM kills"
    tab_title = "OOM"
    order = 50
    probes = ("oom", "kills")
    vmstat_fallback = ("oom", (("oom_kill", "OOM kills", "total"),))
    columns = (
        Column("age_ns", "AGO", lambda ns: fmt.age_h(ns / 1e9)),
        Column("victim_pid", "PID"),
        Column("victim_comm", "VICTIM", numeric=False),
        Column("scope", "SCOPE", numeric=False),
        Column("cgroup", "CGROUP", cgroupfs.short_path, numeric=False),
        Column("anon_rss_bytes", "ANON", fmt.bytes_h),
        Column("file_rss_bytes", "FILE", fmt.bytes_h),
        Column("shmem_rss_bytes", "SHMEM", fmt.bytes_h),
        Column("total_vm_bytes", "VM", fmt.bytes_h),
        Column("uid", "UID"),
        Column("oom_score_adj", "ADJ", _adj),
        Column("trigger_pid", "BY PID"),
        Column("trigger_comm", "TRIGGERED BY", numeric=False),
        Column("load1", "LOAD", lambda v: f"{v:.2f}"),
    )

    def document(self, state: State, opts: Options) -> dict[str, Any]:
        st = state.get(OomState)
        memcg = state.get(CgroupsState).pid_memcg
        events: list[dict[str, Any]] = []
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
        return {
            **self.head(state),
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
        }

    def table_rows(self, doc: dict[str, Any]) -> list[dict[str, Any]]:
        events = doc.get("events", [])
        return events if isinstance(events, list) else []

    def text_extra(self, doc: dict[str, Any]) -> str:
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
        if doc["cgroups"]:
            lines.append("")
            lines.append("OOM kills per memory cgroup since it was created (its own counter):")
            for c in doc["cgroups"]:
                oom = "" if c["oom"] is None else f", {fmt.plural(c['oom'], 'OOM')}"
                lines.append(f"  {c['path']}: {fmt.plural(c['oom_kill'], 'kill')}{oom}")
        return "\n".join(lines) + "\n"


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    stamp = datetime.datetime.fromtimestamp(ns / 1e9, datetime.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _at(e: dict[str, Any]) -> str:
    return f" (at {e['at']})" if e["at"] else ""


def _cgroup_counters(state: State) -> list[dict[str, Any]]:
    """Each memory cgroup whose own counter says it had OOM kills (v1 ``memory.oom_control``
    ``oom_kill``; v2 ``memory.events`` ``oom_kill`` and ``oom``): kills before memtop started
    too, as long as the cgroup exists."""
    out: list[dict[str, Any]] = []
    for path, row in state.get(CgroupsState).rows.items():
        kills = row.event("oom_kill")
        if kills:
            out.append({"path": path, "oom_kill": kills, "oom": row.event("oom")})
    out.sort(key=lambda c: (-c["oom_kill"], c["path"]))
    return out


def _signal_kill(state: State, r: SignalKillRow) -> dict[str, Any]:
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
        "rss_bytes": r.rss_bytes,
        "swap_bytes": r.swap_bytes,
        "cgroup": r.cgroup,
        "psi_some_pct": r.psi_some,
        "psi_full_pct": r.psi_full,
        "cgroup_psi_some_pct": r.cgroup_psi_some,
        "cgroup_psi_full_pct": r.cgroup_psi_full,
    }


def signal_kill_line(k: dict[str, Any]) -> str:
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
    return "; ".join(parts)
