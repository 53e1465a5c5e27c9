"""Swap-in pane: who waits on swap (sortable per-process table; Enter drills in), the log2 wait
histogram, and the system line (pswpin/pswpout rates, swap devices, zswap, PSI)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.events import Resize
from textual.widgets import DataTable, Static

from memtop.state import State
from memtop.ui import hist
from memtop.ui.lines import segments_line, segments_text, show_text
from memtop.ui.panes.base import DrillIn, SortableTablePane, StatusLine, fill_table
from memtop.ui.table import FastTable
from memtop.views.swapin import SORT_KEYS, Bucket, SwapinView, hist_title, summary, system_text

#: narrower than this, the histogram goes below the table (the table keeps every column)
SIDE_BY_SIDE_WIDTH = 140


def hist_buckets(histogram: list[Bucket]) -> list[hist.Bucket]:
    """The wait histogram's buckets as the pane shows them: bucket 0 as "no wait" (faults that
    never blocked), then from the first non-empty bucket on."""
    out = [hist.Bucket(0, 0, histogram[0]["count"])] if histogram and histogram[0]["count"] else []
    first = next((i for i, h in enumerate(histogram) if i and h["count"]), len(histogram))
    for i in range(first, len(histogram)):
        out.append(hist.Bucket(histogram[i - 1]["le_ns"] + 1, histogram[i]["le_ns"], histogram[i]["count"]))
    return out


def fit_lines(lines: list[str], width: int) -> Text:
    """The system lines in ``width`` columns: a line too long breaks before its PSI part; what
    is still too long is cut, never wrapped."""
    out: list[str] = []
    for line in lines:
        head, sep, psi = line.partition("  PSI ")
        if len(line) > width and sep:
            out += [head, "PSI " + psi]
        else:
            out.append(line)
    return Text("\n".join(out), no_wrap=True, overflow="ellipsis")


class SwapinPane(SortableTablePane):
    view_name = "swapin"
    enter_help = "drill into the process"
    table_id = "swapin-table"
    sort_keys = SORT_KEYS
    default_sort = "wait_ns_total"

    BINDINGS = [
        Binding("P", "sort_by('pid')", "Sort PID", show=False, tooltip="sort by PID"),
        Binding("W", "sort_by('wait_ns_total')", "Sort waited", show=False, tooltip="sort by time waited"),
        Binding("S", "sort_by('swapins')", "Sort swap-ins", show=False, tooltip="sort by swap-ins"),
    ]

    def compose(self) -> ComposeResult:
        yield StatusLine(id="swapin-status", classes="pane-status")
        yield Static(id="swapin-system")
        with Horizontal(id="swapin-body"):
            yield FastTable(id="swapin-table", cursor_type="row", zebra_stripes=True, fixed_columns=2)
            yield Static(id="swapin-hist")

    def on_resize(self, event: Resize) -> None:
        self._redraw()

    def refresh_from(self, state: State) -> None:
        self._state = state
        assert isinstance(self.view, SwapinView)
        doc = self.view.document(state, self.opts)
        status = segments_text(summary(doc, state, self.opts), self.status_text(state))
        show_text(self.query_one("#swapin-status", StatusLine), status)
        width, height = self.app.size
        system = fit_lines(system_text(doc["system"]), width - 2)
        show_text(self.query_one("#swapin-system", Static), system)
        table = self.query_one("#swapin-table", DataTable)
        fill_table(
            table,
            self.view.columns,
            doc["rows"],
            "pid",
            sort=(self.opts.sort or self.default_sort, self.opts.reverse),
        )
        # the histogram goes beside the table when both fit, else below it, where the table's rows
        # come first and the histogram takes what is left: its buckets merge as it shrinks, down
        # to one summary line; it never wraps
        stacked = width < SIDE_BY_SIDE_WIDTH
        self.query_one("#swapin-body", Horizontal).set_class(stacked, "stacked")
        body = (self.size.height or height - 4) - 1 - min(6, len(system.plain.splitlines()))
        if stacked:
            want = len(doc["rows"]) + 2  # header and horizontal scrollbar
            table_h = want if body - want >= 4 else max(3, body - 2)
            hist_width, lines = width - 4, max(1, body - table_h - 1)
        else:
            table_h, hist_width, lines = 0, width * 2 // 5 - 4, max(1, body - 1)
        box = self.query_one("#swapin-hist", Static)
        hist_width = box.content_size.width or hist_width  # laid out: its own width
        new_h = str(table_h) if table_h else "1fr"
        if str(table.styles.height) != new_h:
            table.styles.height = table_h or "1fr"
        t = segments_line(hist_title(doc))
        if doc["histogram"]:
            t.append_text(hist.render(hist_buckets(doc["histogram"]), hist_width, lines))
        show_text(box, t)

    @on(DataTable.RowSelected, "#swapin-table")
    def _row(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.post_message(DrillIn(int(event.row_key.value)))
