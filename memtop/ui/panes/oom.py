"""OOM pane: the kill log (it outlives the victims) with the selected kill's details; Enter on a
kill drills into the victim. Notices of new kills show on any screen (the app asks every state
for ``pop_notices``)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from memtop.core import fmt
from memtop.state import State
from memtop.ui.lines import show_text
from memtop.ui.panes.base import DrillIn, Pane, StatusLine, cursor_key, fill_table
from memtop.ui.table import FastTable
from memtop.views.oom import at_risk_line, oomd_line, signal_kill_line


class OomPane(Pane):
    view_name = "oom"
    enter_help = "drill into the killed process"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._events: dict[str, dict[str, Any]] = {}
        #: the newest kill shown (a newer one takes the cursor)
        self._newest: int | None = None

    def compose(self) -> ComposeResult:
        yield StatusLine(id="oom-status", classes="pane-status")
        yield FastTable(id="oom-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="oom-detail")
        yield Static(id="oom-signals")
        yield Static(id="oom-risk")

    def refresh_from(self, state: State) -> None:
        doc = self.view.document(state, self.opts)
        status = self.status_text(state)
        if doc["total"] is not None:
            status.append(f"   {fmt.plural(doc['total'], 'OOM kill')} since start")
        if doc["before_start"]:
            status.append(f", {doc['before_start']} before (kernel log)")
        if doc["cgroups"]:
            status.append(
                "   cgroup counters: "
                + ", ".join(f"{c['path']} {c['oom_kill']}" for c in doc["cgroups"][:3])
                + (" …" if len(doc["cgroups"]) > 3 else "")
            )
        show_text(self.query_one("#oom-status", StatusLine), status)
        table = self.query_one("#oom-table", DataTable)
        fill_table(table, self.view.columns, doc["events"], "ts_ns")
        newest = doc["events"][0]["ts_ns"] if doc["events"] else None
        if newest != self._newest and table.row_count:
            table.move_cursor(row=0, animate=False)  # a new kill is the one to look at
        self._newest = newest
        self._events = {str(e["ts_ns"]): e for e in doc["events"]}
        self._detail(table)
        signals = Text()
        for i, k in enumerate(doc["signal_kills"][:8]):
            if i:
                signals.append("\n")
            signals.append(signal_kill_line(k), style="yellow" if k["killer"] else "")
        show_text(self.query_one("#oom-signals", Static), signals)
        risk = Text()
        for i, r in enumerate(doc["at_risk"][:5]):
            if i:
                risk.append("\n")
            soon = r["seconds_left"] is not None and r["seconds_left"] < doc["forecast_notice_s"]
            risk.append("at risk: " + at_risk_line(r), style="bold red" if soon else "dim")
        if doc["oomd"] is not None:  # oomctl is installed: what systemd-oomd watches, or why unknown
            if risk:
                risk.append("\n")
            risk.append(oomd_line(doc["oomd"]), style="dim")
        show_text(self.query_one("#oom-risk", Static), risk)

    def _detail(self, table: DataTable[Any]) -> None:
        box = self.query_one("#oom-detail", Static)
        key = cursor_key(table)
        e = None if key is None else self._events.get(key)
        if e is None:
            show_text(box, Text("No OOM kill since memtop started.", style="dim"))
            return
        t = Text()
        t.append(f"{e['victim_comm']} [{e['victim_pid']}]", style="bold red")
        t.append(f" killed ({e['scope']}")
        if e["memcg"]:
            t.append(f": the limit of {e['memcg']} fired")
            if e["memcg_limit_bytes"] is not None:
                t.append(
                    f", usage {fmt.bytes_h(e['memcg_usage_bytes'])} of {fmt.bytes_h(e['memcg_limit_bytes'])}"
                    f", failcnt {e['memcg_failcnt']}"
                )
        elif e["scope"] == "global":
            t.append(": no cgroup limit, the machine ran out")
        t.append(f"), triggered by {e['trigger_comm']} [{e['trigger_pid']}]")
        if e["source"] == "kmsg":
            t.append(
                " · before memtop started (kernel log" + (f", {e['at']})" if e["at"] else ")"), style="dim"
            )
        if e["cgroup"] and e["cgroup"] != e["memcg"]:
            t.append(f" · victim in {e['cgroup']}")
        t.append("\n")
        t.append(
            f"total_vm {fmt.bytes_h(e['total_vm_bytes'])}  anon {fmt.bytes_h(e['anon_rss_bytes'])}  "
            f"file {fmt.bytes_h(e['file_rss_bytes'])}  shmem {fmt.bytes_h(e['shmem_rss_bytes'])}  "
            f"page tables {fmt.bytes_h(e['pgtables_bytes'])}  uid {e['uid']}  "
            f"oom_score_adj {'?' if e['oom_score_adj'] is None else e['oom_score_adj']}  "
            f"load {' '.join(f'{v:.2f}' for v in e['loadavg'])}"
        )
        if e["top_tasks"]:
            t.append(
                "\nlargest tasks then: "
                + ", ".join(f"{x['comm']} [{x['pid']}] {fmt.bytes_h(x['rss_bytes'])}" for x in e["top_tasks"])
            )
        if e["missing"]:
            t.append("\nthis kernel did not say: " + ", ".join(e["missing"]), style="yellow")
        show_text(box, t)

    @on(DataTable.RowHighlighted, "#oom-table")
    def _highlight(self, _event: DataTable.RowHighlighted) -> None:
        self._detail(self.query_one("#oom-table", DataTable))

    @on(DataTable.RowSelected, "#oom-table")
    def _row(self, event: DataTable.RowSelected) -> None:
        e = self._events.get(str(event.row_key.value))
        if e is not None:
            self.post_message(DrillIn(int(e["victim_pid"])))
