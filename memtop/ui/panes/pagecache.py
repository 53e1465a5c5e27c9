"""Page cache pane: the files in the page cache, most cached first (`C` / `D` / `E` sort by
cached, dirty, recently evicted; `/` filters by path), with what the list can see beside meminfo's
Cached, refaults, and the pages added and deleted per second. The box below the table shows the
selected file's holders and the memory cgroups' page cache; Enter on a file drills into its first
holder."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from memtop.core import fmt
from memtop.state import State
from memtop.ui.lines import show_text
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
    cgroup_lines,
    summary_lines,
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
        status = self.status_text(state)
        label = next((c.label for c in self.view.columns if c.key == self.opts.sort), self.opts.sort)
        status.append(f"   sort {label or 'PATH'} {'↓' if self.opts.reverse else '↑'}")
        if self.opts.filter:
            status.append(" · filter: ")
            status.append(self.opts.filter, style="bold")
        show_text(self.query_one("#pagecache-status", StatusLine), status)
        show_text(
            self.query_one("#pagecache-summary", Static),
            Text("\n".join(summary_lines(doc)), no_wrap=True, overflow="ellipsis"),
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
        t = Text(no_wrap=True, overflow="ellipsis")
        key = cursor_key(table)
        row = self._rows.get(key) if key is not None else None
        if row is not None:
            t.append(row["path"], style="bold")
            t.append(
                f"  size {fmt.bytes_h(row['size_bytes'])} · evicted {fmt.bytes_h(row['evicted_bytes'])}"
                f" · in the last 30 s evicted {fmt.bytes_h(row['evicted_window_bytes'])},"
                f" read back {fmt.bytes_h(row['read_back_window_bytes'])}"
            )
            t.append("\nheld by: " + (row["holder_names"] or "no process (under --cache-path)"))
        lines = cgroup_lines(doc, CGROUP_LINES)
        if lines:
            t.append("\nmemory cgroups' page cache:", style="bold")
            for line in lines:
                t.append("\n  " + line)
        show_text(self.query_one("#pagecache-detail", Static), t)

    @on(DataTable.RowHighlighted, "#pagecache-table")
    def _highlight(self, _event: DataTable.RowHighlighted) -> None:
        self._detail(self.query_one("#pagecache-table", DataTable))

    @on(DataTable.RowSelected, "#pagecache-table")
    def _row(self, event: DataTable.RowSelected) -> None:
        row = self._rows.get(str(event.row_key.value))
        if row is not None and row["holders"]:
            self.post_message(DrillIn(int(row["holders"][0]["pid"])))
