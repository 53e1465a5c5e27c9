"""vmscan pane: scan/reclaim rate charts by origin, the kernel's sar -B figures, origins table,
slab shrinkers and compaction."""

from __future__ import annotations

import os
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from memtop.core import fmt
from memtop.records.vmscan import ORIGINS
from memtop.state import State
from memtop.state.base import Ring
from memtop.state.vmscan import VmscanState
from memtop.ui import charts
from memtop.ui.lines import segments_text, show_text
from memtop.ui.panes.base import Pane, StatusLine, fill_table
from memtop.ui.table import FastTable
from memtop.views.vmscan import VmscanView, compaction_segments, kernel_parts, status_segments

CHART_POINTS = 120
PAGE = os.sysconf("SC_PAGE_SIZE")


def plot_rates(plot: Any, legend: Any, title: str, rings: dict[str, Ring], now_ns: int) -> None:
    """Redraw one chart: bytes/s per origin over the last CHART_POINTS ticks (the rings hold
    pages/s), x in seconds ago."""
    series: list[charts.Series] = []
    for origin in ORIGINS:
        points = list(rings.get(origin, ()))[-CHART_POINTS:]
        series.append((origin, [(ts - now_ns) / 1e9 for ts, _ in points], [v * PAGE for _, v in points]))
    charts.draw(
        plot, legend, title, series, lambda v: f"{fmt.bytes_h(v)}/s", xlabel="seconds ago", binary=True
    )


def pack_parts(parts: list[tuple[str, str]], width: int) -> Text:
    """(bold label, text) parts on as few lines of ``width`` cells as they fit, never split in
    the middle (a part wider than a line is cut, not wrapped)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    used = 0
    for label, body in parts:
        n = len(label) + len(body)
        if used and used + 3 + n > width:
            out.append("\n")
            used = 0
        elif used:
            out.append("   ")
            used += 3
        out.append(label, style="bold")
        out.append(body)
        used += n
    return out


class VmscanPane(Pane):
    view_name = "vmscan"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._chart_pairs: tuple[tuple[Any, Any], tuple[Any, Any]] | None = None

    def compose(self) -> ComposeResult:
        yield StatusLine(id="vmscan-status", classes="pane-status")
        # who reclaims (every origin's row) and the kernel's own figures first: in a small
        # terminal the charts and the slab/compaction boxes give way, not these
        yield FastTable(id="vmscan-origins", cursor_type="row", zebra_stripes=True)
        yield Static(id="vmscan-kernel")
        # the charts are built when the pane is first drawn (``_charts``): importing plotext at
        # start delayed every first frame for a pane that may never be opened
        yield Horizontal(id="vmscan-charts")
        with Horizontal(id="vmscan-bottom"):
            with Vertical(id="vmscan-slab-box"):
                yield Static(Text("Slab shrinkers (by time spent)", style="bold"), classes="subtitle")
                yield FastTable(id="vmscan-slab", cursor_type="row", zebra_stripes=True)
            yield Static(id="vmscan-compaction")

    def refresh_from(self, state: State) -> None:
        assert isinstance(self.view, VmscanView)
        doc = self.view.document(state, self.opts)
        vs = state.get(VmscanState)
        status = segments_text(status_segments(state), self.status_text(state))
        show_text(self.query_one("#vmscan-status", StatusLine), status)

        now = vs.ts_ns or state.ts_ns
        (scan_chart, scan_legend), (reclaim_chart, reclaim_legend) = self._charts()
        plot_rates(scan_chart, scan_legend, "scanned", vs.scanned_rate, now)
        plot_rates(reclaim_chart, reclaim_legend, "reclaimed", vs.reclaimed_rate, now)

        line = pack_parts(kernel_parts(doc), max(20, self.app.size.width - 2))
        show_text(self.query_one("#vmscan-kernel", Static), line)

        fill_table(self.query_one("#vmscan-origins", DataTable), self.view.columns, doc["rows"], "origin")
        assert isinstance(self.view, VmscanView)
        fill_table(
            self.query_one("#vmscan-slab", DataTable),
            self.view.slab_columns,
            doc["slab_shrink"][:50],
            "shrinker",
        )
        comp = segments_text(compaction_segments(doc))
        show_text(self.query_one("#vmscan-compaction", Static), comp)

    def focus_default(self) -> None:
        self.query_one("#vmscan-slab", DataTable).focus()

    def _charts(self) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
        """(chart, legend) for scanning and reclaiming, mounted the first time they are asked for
        (kept here: a container's children are mounted a moment after it)."""
        if self._chart_pairs is None:
            from memtop.ui.plot import Chart

            scan = (Chart(id="vmscan-scan-chart"), Static(classes="chart-legend"))
            reclaim = (Chart(id="vmscan-reclaim-chart"), Static(classes="chart-legend"))
            self.query_one("#vmscan-charts", Horizontal).mount(
                Vertical(scan[1], scan[0]), Vertical(reclaim[1], reclaim[0])
            )
            self._chart_pairs = (scan, reclaim)
        return self._chart_pairs

    def chart_data(self, state: State) -> dict[str, list[tuple[int, float]]]:
        """What the charts plot (for tests): origin -> [(ts_ns, pages/s)]."""
        vs = state.get(VmscanState)
        return {o: list(vs.scanned_rate.get(o, ())) for o in ORIGINS}
