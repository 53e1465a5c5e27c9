"""OOM pane: the kill log (it outlives the victims) with the selected kill's details; Enter on a
kill drills into the victim. Notices of new kills show on any screen (the app asks every state
for ``pop_notices``)."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from memtop.state import State
from memtop.ui.lines import segments_text, show_text
from memtop.ui.panes.base import DrillIn, Pane, StatusLine, cursor_key, fill_table
from memtop.ui.table import FastTable
from memtop.views.oom import Kill, OomView, kill_detail, risk_segments, signals_segments, status_segments


class OomPane(Pane):
    view_name = "oom"
    enter_help = "drill into the killed process"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._events: dict[str, Kill] = {}
        #: the newest kill shown (a newer one takes the cursor)
        self._newest: int | None = None

    def compose(self) -> ComposeResult:
        yield StatusLine(id="oom-status", classes="pane-status")
        yield FastTable(id="oom-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="oom-detail")
        yield Static(id="oom-signals")
        yield Static(id="oom-risk")

    def refresh_from(self, state: State) -> None:
        assert isinstance(self.view, OomView)
        doc = self.view.document(state, self.opts)
        status = segments_text(status_segments(doc), self.status_text(state))
        show_text(self.query_one("#oom-status", StatusLine), status)
        table = self.query_one("#oom-table", DataTable)
        fill_table(table, self.view.columns, doc["events"], "ts_ns")
        newest = doc["events"][0]["ts_ns"] if doc["events"] else None
        if newest != self._newest and table.row_count:
            table.move_cursor(row=0, animate=False)  # a new kill is the one to look at
        self._newest = newest
        self._events = {str(e["ts_ns"]): e for e in doc["events"]}
        self._detail(table)
        show_text(self.query_one("#oom-signals", Static), segments_text(signals_segments(doc)))
        show_text(self.query_one("#oom-risk", Static), segments_text(risk_segments(doc)))

    def _detail(self, table: DataTable[Any]) -> None:
        box = self.query_one("#oom-detail", Static)
        key = cursor_key(table)
        e = None if key is None else self._events.get(key)
        show_text(box, segments_text(kill_detail(e)))

    @on(DataTable.RowHighlighted, "#oom-table")
    def _highlight(self, _event: DataTable.RowHighlighted) -> None:
        self._detail(self.query_one("#oom-table", DataTable))

    @on(DataTable.RowSelected, "#oom-table")
    def _row(self, event: DataTable.RowSelected) -> None:
        e = self._events.get(str(event.row_key.value))
        if e is not None:
            self.post_message(DrillIn(int(e["victim_pid"])))
