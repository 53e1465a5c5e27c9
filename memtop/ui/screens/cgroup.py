"""The cgroup drill-in (Enter on the cgroups pane): its memory over time with its limit drawn, its
processes (Enter drills into one), its memcg reclaim episodes and its OOM kills. Esc goes back."""

from __future__ import annotations

from typing import ClassVar, Literal

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Static

from memtop.core import fmt
from memtop.state import State
from memtop.ui import charts
from memtop.ui.lines import segments_text, show_text
from memtop.ui.panes.base import DrillIn, fill_table
from memtop.ui.plot import Chart
from memtop.ui.screens import DrillScreen
from memtop.ui.table import FastTable
from memtop.views import Column, Options, get_view
from memtop.views.cgroups import CgroupDetail, CgroupEpisodeRow, CgroupsView, detail_header

#: the history's figures the chart draws
HistoryFigure = Literal["usage_bytes", "anon_bytes", "file_bytes", "kernel_bytes", "swap_bytes"]

PROC_COLUMNS = (
    Column("pid", "PID"),
    Column("comm", "COMMAND", numeric=False),
    Column("rss_bytes", "RSS", fmt.bytes_h),
    Column("swap_bytes", "SWAP", fmt.bytes_h),
    Column("major_faults_per_s", "MAJFLT/s", fmt.count_h),
    Column("reclaim_stall_ns", "RECLAIM Σ", fmt.ns_total),
)
EPISODE_COLUMNS = (
    Column("pid", "PID"),
    Column("comm", "COMMAND", numeric=False),
    Column("latency_ns", "LATENCY", fmt.ns_h),
    Column("pages", "PAGES", fmt.count_h),
)
KILL_COLUMNS = (
    Column("victim_pid", "PID"),
    Column("victim_comm", "VICTIM", numeric=False),
    Column("oom_memcg", "LIMIT OF", numeric=False),
    Column("memcg_usage_bytes", "USAGE", fmt.bytes_h),
    Column("memcg_limit_bytes", "LIMIT", fmt.bytes_h),
)


class CgroupScreen(DrillScreen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back", tooltip="back to the pane")]

    def __init__(self, path: str, state: State) -> None:
        super().__init__()
        self.path = path
        self.view = get_view("cgroups")
        self._state = state

    def compose(self) -> ComposeResult:
        yield Static(id="cg-header")
        yield Static(id="cg-legend", classes="chart-legend")
        yield Chart(id="cg-chart")
        with Horizontal():
            with Vertical():
                yield Static(Text("Processes (Enter: drill in)", style="bold"), classes="cg-title")
                yield FastTable(id="cg-procs", cursor_type="row", zebra_stripes=True, classes="cg-table")
            with Vertical():
                yield Static(Text("Memcg reclaim episodes", style="bold"), classes="cg-title")
                yield FastTable(id="cg-episodes", cursor_type="row", zebra_stripes=True, classes="cg-table")
                yield Static(Text("OOM kills", style="bold"), classes="cg-title")
                yield FastTable(id="cg-kills", cursor_type="row", zebra_stripes=True, classes="cg-table")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_from(self._state)
        self.query_one("#cg-procs", DataTable).focus()

    @property
    def snapshot_name(self) -> str:
        return "cgroup-" + (self.path.strip("/").replace("/", "_") or "root")

    def options(self) -> Options:
        opts = self.view.default_options()
        opts.extra["cgroup"] = self.path
        return opts

    def refresh_from(self, state: State) -> None:
        self._state = state
        view = self.view
        assert isinstance(view, CgroupsView)
        doc = view.document(state, self.options())
        header = self.query_one("#cg-header", Static)
        row = next((r for r in doc["rows"] if r["path"] == self.path), None)
        detail = doc.get("detail")
        show_text(header, segments_text(detail_header(self.path, row, detail)))
        if row is None or detail is None:
            return
        self._chart(detail)
        fill_table(self.query_one("#cg-procs", DataTable), PROC_COLUMNS, detail["processes"], "pid")
        # keyed copies: the document's own rows are not written to
        episodes: list[CgroupEpisodeRow] = [
            {**e, "key": f"{e['ts_ns']}:{e['pid']}"} for e in reversed(detail["reclaim_events"])
        ]
        fill_table(self.query_one("#cg-episodes", DataTable), EPISODE_COLUMNS, episodes, "key")
        fill_table(self.query_one("#cg-kills", DataTable), KILL_COLUMNS, detail["oom_kills"], "ts_ns")

    def _chart(self, detail: CgroupDetail) -> None:
        hist = detail["history"]
        t0 = hist[0]["ts_ns"] if hist else 0
        xs = [(h["ts_ns"] - t0) / 1e9 for h in hist]
        series: list[charts.Series] = []
        figures: tuple[tuple[HistoryFigure, str], ...] = (
            ("usage_bytes", "usage"),
            ("anon_bytes", "anon"),
            ("file_bytes", "file"),
            ("kernel_bytes", "kernel"),
            ("swap_bytes", "swap"),
        )
        for key, label in figures:
            ys = [h[key] for h in hist]
            if any(y is not None for y in ys):
                series.append((label, xs, [float(y or 0) for y in ys]))
        limit = detail["limit_bytes"]
        if limit is not None and xs:
            series.append(("limit", [xs[0], xs[-1]], [float(limit), float(limit)]))
        charts.draw(
            self.query_one("#cg-chart", Chart),
            self.query_one("#cg-legend", Static),
            "memory since memtop started",
            series,
            fmt.bytes_h,
            xlim=(xs[0], max(xs[-1], xs[0] + 1)) if xs else None,
            binary=True,
        )

    def action_back(self) -> None:
        self.app.pop_screen()

    @on(DataTable.RowSelected, "#cg-procs")
    def _proc(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.post_message(DrillIn(int(event.row_key.value)))
