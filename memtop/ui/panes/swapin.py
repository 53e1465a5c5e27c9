"""Swap-in pane: who waits on swap (sortable per-process table; Enter drills in), the log2 wait
histogram, and the system line (pswpin/pswpout rates, swap devices, zswap, PSI)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Static

from memtop import fmt
from memtop.state import State
from memtop.state.swapin import SwapinState
from memtop.ui.lines import show_text
from memtop.ui.panes.base import DrillIn, SortableTablePane, StatusLine, fill_table
from memtop.views import measuring
from memtop.views.swapin import SORT_KEYS, bar, hist_lines, system_text


class SwapinPane(SortableTablePane):
    view_name = "swapin"
    table_id = "swapin-table"
    sort_keys = SORT_KEYS
    default_sort = "wait_ns_total"

    BINDINGS = [
        Binding("P", "sort_by('pid')", "Sort PID", show=False),
        Binding("W", "sort_by('wait_ns_total')", "Sort waited", show=False),
        Binding("S", "sort_by('swapins')", "Sort swap-ins", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield StatusLine(id="swapin-status", classes="pane-status")
        yield Static(id="swapin-system")
        with Horizontal(id="swapin-body"):
            yield DataTable(id="swapin-table", cursor_type="row", zebra_stripes=True)
            yield Static(id="swapin-hist")

    def refresh_from(self, state: State) -> None:
        self._state = state
        doc = self.view.document(state, self.opts)
        st = state.get(SwapinState)
        status = self.status_text(state)
        swapins, files, waited = st.totals()
        label = next((c.label for c in self.view.columns if c.key == self.opts.sort), self.opts.sort)
        if measuring(state, "swapin") or st.rows:
            status.append(
                f"   {fmt.plural(len(doc['rows']), 'process', 'processes')} · {fmt.count_h(swapins)} swap-ins"
                f" waited {fmt.ns_h(waited)} · {fmt.count_h(files)} file major faults"
            )
        status.append(f" · sort {label} {'↓' if self.opts.reverse else '↑'}")
        show_text(self.query_one("#swapin-status", StatusLine), status)
        show_text(self.query_one("#swapin-system", Static), Text("\n".join(system_text(doc["system"]))))
        fill_table(self.query_one("#swapin-table", DataTable), self.view.columns, doc["rows"], "pid")
        hist = Text()
        hist.append("Swap-in wait per fault\n", style="bold")
        lines = hist_lines(doc["histogram"])
        most = max((c for _, c in lines), default=0)
        for label, count in lines:
            hist.append(f"{label:>17} {count:>7} ")
            hist.append(bar(count, most, 20) + "\n", style="cyan")
        if not doc["histogram"]:
            hist.append("no swap-in yet", style="dim")
        show_text(self.query_one("#swapin-hist", Static), hist)

    @on(DataTable.RowSelected, "#swapin-table")
    def _row(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.post_message(DrillIn(int(event.row_key.value)))
