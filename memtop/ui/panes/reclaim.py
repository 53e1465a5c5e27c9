"""Reclaim pane: direct and memcg reclaim latency histograms, per-process stall totals (sortable,
Enter drills in) and a scrolling list of recent episodes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.events import Resize
from textual.widgets import DataTable, Static

from memtop.records.reclaim import RECLAIM_KINDS
from memtop.state import State
from memtop.ui import hist
from memtop.ui.lines import segments_line, segments_text, show_text
from memtop.ui.panes.base import DrillIn, SortableTablePane, StatusLine, fill_table
from memtop.ui.table import FastTable
from memtop.views.reclaim import EVENTS_SHOWN, SORT_KEYS, EpisodeRow, ReclaimView, hist_title

KIND_CYCLE = ("",) + RECLAIM_KINDS


def hist_lines(height: int) -> int:
    """Lines of each latency histogram in a terminal ``height`` lines high: one summary line
    below 30 lines (the stalled processes come first), up to 12 buckets from 44 lines."""
    return 1 if height < 30 else min(12, (height - 20) // 2)


class ReclaimPane(SortableTablePane):
    view_name = "reclaim"
    enter_help = "drill into the process"
    table_id = "reclaim-procs"
    sort_keys = SORT_KEYS
    default_sort = "total_ns"

    BINDINGS = [
        Binding("K", "kind", "Kind", tooltip="next kind shown: all, direct, memcg"),
        Binding("T", "sort_by('total_ns')", "Sort total", show=False, tooltip="sort by total stall"),
        Binding("X", "sort_by('max_ns')", "Sort max", show=False, tooltip="sort by longest stall"),
        Binding("E", "sort_by('events')", "Sort count", show=False, tooltip="sort by episodes"),
        Binding("P", "sort_by('pid')", "Sort PID", show=False, tooltip="sort by PID"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: the episode rows listed, by key (reused while unchanged: fill_table skips them)
        self._episodes: dict[str, EpisodeRow] = {}

    def compose(self) -> ComposeResult:
        yield StatusLine(id="reclaim-status", classes="pane-status")
        with Horizontal(id="reclaim-hists"):
            for kind in RECLAIM_KINDS:
                yield Static(id=f"reclaim-hist-{kind}", classes="reclaim-hist")
        yield Static(
            Text("Processes (totals since start; Enter drills in)", style="bold"), classes="subtitle"
        )
        yield FastTable(id="reclaim-procs", cursor_type="row", zebra_stripes=True, fixed_columns=2)
        yield Static(Text("Recent episodes (newest first)", style="bold"), classes="subtitle")
        yield FastTable(id="reclaim-events", cursor_type="row", zebra_stripes=True)

    def on_resize(self, event: Resize) -> None:
        self._redraw()

    def refresh_from(self, state: State) -> None:
        self._state = state
        view = self.view
        assert isinstance(view, ReclaimView)
        # only the episodes the table lists (the document of a snapshot has all 1,000)
        doc = view.document(
            state, replace(self.opts, extra={**self.opts.extra, "events_limit": EVENTS_SHOWN})
        )
        status = segments_text(view.summary(doc, self.opts), self.status_text(state))
        show_text(self.query_one("#reclaim-status", StatusLine), status)

        # the histograms share the width side by side and shrink with the height (merged
        # buckets, then one summary line): they never wrap and never push the processes away
        kinds = [k for k in RECLAIM_KINDS if not self.opts.section or self.opts.section == k]
        width = max(20, self.app.size.width // max(1, len(kinds)) - 4)
        lines = hist_lines(self.app.size.height)
        for kind in RECLAIM_KINDS:
            box = self.query_one(f"#reclaim-hist-{kind}", Static)
            box.display = kind in kinds
            buckets = hist.from_log2(
                [(b["le_ns"], b["count"]) for b in doc["histogram"] if b["kind"] == kind]
            )
            t = segments_line(hist_title(doc, kind))
            t.append_text(hist.render(buckets, box.content_size.width or width, lines))
            show_text(box, t)

        fill_table(
            self.query_one("#reclaim-procs", DataTable),
            self.view.columns,
            doc["rows"],
            "pid",
            sort=(self.opts.sort or self.default_sort, self.opts.reverse),
        )
        # the log is newest first and turns over in a storm (up to 64 episodes a second per CPU):
        # an episode already listed keeps its row object, so it is not formatted again, and the
        # table drops the oldest rows and adds the newest rather than being rebuilt
        rows: list[EpisodeRow] = []
        for e in doc["events"][:EVENTS_SHOWN]:
            key = f"{e['ts_ns']}-{e['pid']}"
            row: EpisodeRow = {**e, "key": key}
            old = self._episodes.get(key)
            rows.append(old if old == row else row)
        self._episodes = {r["key"]: r for r in rows}
        table = self.query_one("#reclaim-events", DataTable)
        fill_table(table, view.event_columns, rows, "key", edits=EVENTS_SHOWN * 2)

    # -- actions ----------------------------------------------------------------------------------
    def action_kind(self) -> None:
        i = KIND_CYCLE.index(self.opts.section) if self.opts.section in KIND_CYCLE else 0
        self.opts.section = KIND_CYCLE[(i + 1) % len(KIND_CYCLE)]
        self._redraw()

    @on(DataTable.RowSelected, "#reclaim-procs")
    def _row(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.post_message(DrillIn(int(event.row_key.value)))

    @on(DataTable.RowSelected, "#reclaim-events")
    def _event_row(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if key is not None:
            self.post_message(DrillIn(int(str(key).rsplit("-", 1)[1])))
