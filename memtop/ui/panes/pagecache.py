"""Page cache pane: the files in the page cache, most cached first (`C` / `D` / `E` sort by
cached, dirty, recently evicted; `/` filters by path), with what the list can see beside meminfo's
Cached, refaults, and the pages added and deleted per second. The box below the table shows the
selected file's holders and the memory cgroups' page cache; Enter on a file drills into its first
holder."""

from __future__ import annotations

from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from memtop.state import State
from memtop.ui.lines import segments_line, segments_text, show_text
from memtop.ui.panes.base import (
    DrillIn,
    FilterablePane,
    SortableTablePane,
    StatusLine,
    cursor_key,
    fill_table,
)
from memtop.ui.table import FastTable
from memtop.views.pagecache import (
    SORT_KEYS,
    FileRow,
    PagecacheDoc,
    PagecacheView,
    file_detail,
    status_segments,
    summary_segments,
)

#: memory cgroups the detail box lists
CGROUP_LINES = 4


class PagecachePane(FilterablePane, SortableTablePane):
    view_name = "pagecache"
    enter_help = "drill into the first process holding the file"
    filter_hint = "filter files by path (Enter applies, Esc clears)"
    table_id = "pagecache-table"
    sort_keys = SORT_KEYS
    default_sort = "cached_bytes"
    ascending = ("path",)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("C", "sort_by('cached_bytes')", "Sort cached", show=False, tooltip="sort by cached bytes"),
        Binding("D", "sort_by('dirty_bytes')", "Sort dirty", show=False, tooltip="sort by dirty bytes"),
        Binding(
            "E",
            "sort_by('recently_evicted_bytes')",
            "Sort evicted",
            show=False,
            tooltip="sort by recently evicted bytes",
        ),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._rows: dict[str, FileRow] = {}
        self._doc: PagecacheDoc | None = None

    def compose(self) -> ComposeResult:
        yield StatusLine(id="pagecache-status", classes="pane-status")
        yield Static(id="pagecache-summary")
        yield FastTable(id="pagecache-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="pagecache-detail")

    def refresh_from(self, state: State) -> None:
        self._state = state
        assert isinstance(self.view, PagecacheView)
        doc = self._doc = self.view.document(state, self.opts)
        status = segments_text(status_segments(self.opts), self.status_text(state))
        show_text(self.query_one("#pagecache-status", StatusLine), status)
        show_text(
            self.query_one("#pagecache-summary", Static),
            segments_line(summary_segments(doc)),
        )
        table = self.query_one("#pagecache-table", DataTable)
        fill_table(
            table,
            self.view.columns,
            doc["rows"],
            "key",
            sort=(self.opts.sort or self.default_sort, self.opts.reverse),
        )
        self._rows = {r["key"]: r for r in doc["rows"]}
        self._detail(table)

    def _detail(self, table: DataTable[Any]) -> None:
        doc = self._doc
        if doc is None:
            return
        key = cursor_key(table)
        row = self._rows.get(key) if key is not None else None
        t = segments_line(file_detail(doc, row, CGROUP_LINES))
        show_text(self.query_one("#pagecache-detail", Static), t)

    @on(DataTable.RowHighlighted, "#pagecache-table")
    def _highlight(self, _event: DataTable.RowHighlighted) -> None:
        self._detail(self.query_one("#pagecache-table", DataTable))

    @on(DataTable.RowSelected, "#pagecache-table")
    def _row(self, event: DataTable.RowSelected) -> None:
        row = self._rows.get(str(event.row_key.value))
        if row is not None and row["holders"]:
            self.post_message(DrillIn(int(row["holders"][0]["pid"])))
