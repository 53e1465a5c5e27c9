"""Shared pane: four sections, one at a time (`v` / `V` step through them): System V segments
with the shm call log, POSIX shared memory (tmpfs files and memfds), huge pages (per process,
pools, THP, madvise), page migration by reason. A summary above the table breaks the header's
Shmem down; the box below shows what the selected row holds. Enter on a segment lists the
processes mapping it (Enter again: back to the log); on a process, drills into it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from memtop.state import State
from memtop.ui.lines import segments_line, show_text
from memtop.ui.panes.base import DrillIn, FilterablePane, StatusLine, cursor_key, fill_table
from memtop.ui.table import FastTable
from memtop.views.shared import (
    PANE_SECTIONS,
    SharedDoc,
    SharedView,
    detail_segments,
    section_table,
    summary_segments,
)

SECTION_TITLES = {"sysv": "SysV", "posix": "POSIX/memfd", "huge": "Huge pages", "migrate": "Migration"}


class SharedPane(FilterablePane):
    view_name = "shared"
    filter_hint = "filter segments: shmid, key (0x…), pid or command"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("v", "section(1)", "Section"),
        Binding("V", "section(-1)", "Section ←", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.opts.sort, self.opts.reverse = "rss_bytes", True
        self.section = PANE_SECTIONS[0]
        self._state: State | None = None
        self._doc: SharedDoc | None = None
        self._rows: dict[str, Mapping[str, Any]] = {}
        #: the segment whose mappers the detail box lists (Enter), None: the call log
        self._open: int | None = None

    def compose(self) -> ComposeResult:
        yield StatusLine(id="shared-status", classes="pane-status")
        yield Static(id="shared-summary")
        yield FastTable(id="shared-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="shared-detail")

    def focus_default(self) -> None:
        self.query_one("#shared-table", DataTable).focus()

    def _redraw(self) -> None:
        if self._state is not None:
            self.refresh_from(self._state)

    def action_section(self, step: int) -> None:
        i = PANE_SECTIONS.index(self.section)
        self.section = PANE_SECTIONS[(i + step) % len(PANE_SECTIONS)]
        self._open = None
        table = self.query_one("#shared-table", DataTable)
        table.clear(columns=True)  # another section's columns
        from memtop.ui.panes import base

        base._MEMOS.pop(table, None)
        self._redraw()

    def refresh_from(self, state: State) -> None:
        self._state = state
        assert isinstance(self.view, SharedView)
        doc = self._doc = self.view.document(state, self.opts)
        status = self.status_text(state)
        tabs = " ".join(
            f"[{SECTION_TITLES[s]}]" if s == self.section else SECTION_TITLES[s] for s in PANE_SECTIONS
        )
        status.append(f"   {tabs}  (v: next)")
        if self.opts.filter:
            status.append(f"  filter: {self.opts.filter}", style="bold")
        show_text(self.query_one("#shared-status", StatusLine), status)
        show_text(
            self.query_one("#shared-summary", Static), segments_line(summary_segments(doc, self.section))
        )
        columns, rows, key = section_table(doc, self.section)
        table = self.query_one("#shared-table", DataTable)
        fill_table(table, columns, rows, key)
        self._rows = {str(r[key]): r for r in rows}
        self._detail(table)

    def _selected(self, table: DataTable[Any]) -> Mapping[str, Any] | None:
        key = cursor_key(table)
        return None if key is None else self._rows.get(key)

    def _detail(self, table: DataTable[Any]) -> None:
        doc = self._doc
        if doc is None:
            return
        row = self._selected(table)
        show_text(
            self.query_one("#shared-detail", Static),
            segments_line(detail_segments(doc, self.section, row, self._open)),
        )

    @on(DataTable.RowHighlighted, "#shared-table")
    def _highlight(self, _event: DataTable.RowHighlighted) -> None:
        self._detail(self.query_one("#shared-table", DataTable))

    @on(DataTable.RowSelected, "#shared-table")
    def _row(self, event: DataTable.RowSelected) -> None:
        row = self._rows.get(str(event.row_key.value))
        if row is None:
            return
        if self.section == "sysv":
            self._open = None if self._open == row["shmid"] else int(row["shmid"])
            self._detail(self.query_one("#shared-table", DataTable))
        elif row.get("pid") is not None:
            self.post_message(DrillIn(int(row["pid"])))
