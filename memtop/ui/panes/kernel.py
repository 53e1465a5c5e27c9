"""Kernel pane: where MemTotal went (a stacked bar, and over time), the slab caches with their
growth, and below the table what the user asked for: slab call sites (traced on demand), the page
allocator (fragmentation, allocations by order), vmalloc callers, allocation profiling.

Tracing is an intent to the source (``trace_kernel``): `t` (every cache) or Enter (one cache)
attaches the slab tracer (allocations only), `f` swaps it for the one that hooks the frees too
(per call site net growth), `k` for the one with kernel stacks; `p` the page-allocation counter;
pressing the key again, or leaving the pane, detaches them."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from memtop.core import fmt
from memtop.state import State
from memtop.state.kernel import KernelState
from memtop.stream.source import Source
from memtop.ui.lines import segments_line, segments_text, show_text
from memtop.ui.panes.base import FilterablePane, SortableTablePane, StatusLine, cursor_key, fill_table
from memtop.ui.recplay import RecordReplay
from memtop.ui.table import FastTable
from memtop.views.kernel import (
    SLAB_TRACERS,
    SORT_KEYS,
    BreakdownLine,
    KernelDoc,
    KernelView,
    SlabRow,
    detail_segments,
    summary,
)

#: the lines below the table, in the order `v` cycles them
MODES = ("sites", "pages", "vmalloc", "allocinfo", "breakdown")
#: one colour per breakdown line (stacking order of memtop.linux.kernelfs.BREAKDOWN); free is blank
COLOURS = {
    "anon": "red",
    "file_mapped": "green",
    "page_cache": "dark_green",
    "shmem": "magenta",
    "swap_cache": "orchid",
    "slab_reclaimable": "cyan",
    "slab_unreclaimable": "blue",
    "kernel_reclaimable": "steel_blue",
    "page_tables": "yellow",
    "kernel_stack": "dark_orange",
    "vmalloc": "orange3",
    "percpu": "gold3",
    "hugetlb": "purple",
    "zsmalloc": "turquoise4",
    "balloon": "grey50",
    "free": "grey23",
    "unexplained": "bright_white",
}


def stacked_bar(lines: list[BreakdownLine], width: int) -> Text:
    """MemTotal as one row of ``width`` cells, each line its share in its colour (free dim)."""
    t = Text(no_wrap=True, overflow="crop")
    total = sum(max(0, ln["bytes"]) for ln in lines) or 1
    acc, drawn = 0, 0
    for ln in lines:
        acc += max(0, ln["bytes"])
        upto = round(acc * width / total)
        if upto > drawn:
            glyph = "░" if ln["key"] == "free" else "█"
            t.append(glyph * (upto - drawn), style=COLOURS.get(ln["key"], "white"))
            drawn = upto
    return t


def stacked_chart(history: list[tuple[int, dict[str, int]]], width: int, height: int) -> Text:
    """Used memory over time (free left out), stacked: one column per sample (the latest
    ``width``), each line's share of the tallest column in its colour."""
    pts = history[-width:]
    keys = [k for k in COLOURS if k != "free"]
    tops = [sum(max(0, b.get(k, 0)) for k in keys) for _, b in pts]
    peak = max(tops, default=0) or 1
    cols: list[list[str]] = []
    for _, b in pts:
        cells: list[str] = []
        acc = 0
        for k in keys:
            acc += max(0, b.get(k, 0))
            while len(cells) < round(acc * height / peak):
                cells.append(k)
        cols.append(cells)
    t = Text(no_wrap=True, overflow="crop")
    for row in range(height - 1, -1, -1):
        for cells in cols:
            if row < len(cells):
                t.append("█", style=COLOURS[cells[row]])
            else:
                t.append(" ")
        if row == height - 1:
            t.append(f" {fmt.bytes_h(peak)}", style="dim")
        t.append("\n")
    return t


class KernelPane(FilterablePane, SortableTablePane):
    view_name = "kernel"
    table_id = "kernel-table"
    sort_keys = SORT_KEYS
    default_sort = "total_bytes"
    ascending = ("name",)
    filter_hint = "filter slab caches by name (Enter applies, Esc clears)"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("S", "sort_by('total_bytes')", "Sort size", show=False),
        Binding("G", "sort_by('bytes_per_s')", "Sort growth", show=False),
        Binding("D", "sort_by('delta_bytes')", "Sort Δ", show=False),
        Binding("t", "trace", "Trace slabs"),
        Binding(
            "f",
            "frees",
            "Net growth",
            show=False,
            tooltip="slab tracing with the frees too: net growth per call site, at a higher cost (on/off)",
        ),
        Binding(
            "k", "stacks", "Kernel stacks", show=False, tooltip="slab tracing with kernel stacks (on/off)"
        ),
        Binding("a", "all_caches", "All caches", show=False),
        Binding("p", "pages", "Page allocs"),
        Binding("v", "mode", "Below"),
        Binding("b", "breakdown", "Breakdown", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mode = "sites"
        self._rows: dict[str, SlabRow] = {}
        self._tracing: set[str] = set()
        self._doc: KernelDoc | None = None

    def compose(self) -> ComposeResult:
        yield StatusLine(id="kernel-status", classes="pane-status")
        yield Static(id="kernel-breakdown")
        yield FastTable(id="kernel-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="kernel-detail")

    # -- drawing ----------------------------------------------------------------------------------
    def refresh_from(self, state: State) -> None:
        self._state = state
        assert isinstance(self.view, KernelView)
        doc = self.view.document(state, self.opts)
        self._doc = doc
        status = segments_text(summary(doc, self.opts), self.status_text(state))
        show_text(self.query_one("#kernel-status", StatusLine), status)
        self._breakdown(doc)
        # unreadable slabinfo: no rows (not zeros), and the lines below say why
        table = self.query_one("#kernel-table", DataTable)
        self._rows = {r["name"]: r for r in doc["rows"]}
        fill_table(
            table,
            self.view.columns,
            doc["rows"],
            "name",
            sort=(self.opts.sort or self.default_sort, self.opts.reverse),
        )
        self._detail(doc, state)

    def _breakdown(self, doc: KernelDoc) -> None:
        box = self.query_one("#kernel-breakdown", Static)
        b = doc["breakdown"]
        if b is None:
            show_text(box, Text("Where memory went: waiting for /proc/meminfo", style="dim"))
            return
        width = max(10, (box.size.width or self.app.size.width or 80) - 2)
        t = stacked_bar(b["lines"], width)
        t.append("\n")
        shown = sorted(
            (ln for ln in b["lines"] if ln["key"] not in ("free", "unexplained") and ln["bytes"] > 0),
            key=lambda ln: -ln["bytes"],
        )
        legend = Text(no_wrap=True, overflow="ellipsis")
        for ln in [*shown[:5], *(x for x in b["lines"] if x["key"] == "unexplained")]:
            legend.append("█", style=COLOURS.get(ln["key"], "white"))
            legend.append(f"{ln['label']} {fmt.bytes_h(ln['bytes'])} ")
        free = next(x for x in b["lines"] if x["key"] == "free")
        legend.append("░", style=COLOURS["free"])
        legend.append(f"free {fmt.bytes_h(free['bytes'])} of {fmt.bytes_h(b['total_bytes'])}")
        t.append_text(legend)
        show_text(box, t)

    def selected(self) -> SlabRow | None:
        table = self.table()
        key = cursor_key(table)
        return None if key is None else self._rows.get(key)

    def _detail(self, doc: KernelDoc, state: State) -> None:
        box = self.query_one("#kernel-detail", Static)
        # the view's lines for the mode (the breakdown's chart is drawn here: it is a picture)
        t = segments_line(detail_segments(doc, self.mode if self.mode in MODES[:-1] else ""))
        if self.mode == "breakdown":
            self._history(state, doc, t)
        show_text(box, t)

    def _history(self, state: State, doc: KernelDoc, t: Text) -> None:
        b = doc["breakdown"]
        if b is None:
            return
        for ln in b["lines"]:
            t.append("█", style=COLOURS.get(ln["key"], "white"))
            t.append(f"{ln['label']} {fmt.bytes_h(ln['bytes'])}  ")
        t.append("\n")
        width = max(10, (self.app.size.width or 80) - 12)
        t.append_text(stacked_chart(list(state.get(KernelState).history), width, 4))

    # -- intents ----------------------------------------------------------------------------------
    def _source(self) -> Source | None:
        app = self.app
        return app.runner.source if isinstance(app, RecordReplay) else None

    def _trace(self, tracer: str, on: bool) -> None:
        src = self._source()
        if src is None:
            return
        if src.replay is not None:
            if on:
                self.app.notify("a replay shows what was traced when it was recorded", timeout=3)
            return
        if on:
            if tracer in self._tracing:
                return
            if src.trace_kernel(tracer, True):
                self._tracing.add(tracer)
                self.app.notify(f"{tracer}: attaching (sampled in kernel; press again to stop)", timeout=3)
            else:
                self.app.notify(f"cannot start {tracer} now: see the status line", severity="warning")
        elif tracer in self._tracing:
            self._tracing.discard(tracer)
            src.trace_kernel(tracer, False)

    def _slab_tracer(self) -> str | None:
        """The slab tracer attached by this pane: slabtrace, slabfrees (frees too), slabstacks
        (with kernel stacks)."""
        return next((t for t in SLAB_TRACERS if t in self._tracing), None)

    def _swap_slab_tracer(self, variant: str) -> None:
        """Trace with ``variant`` instead of the slab tracer running (or back to the plain one
        when ``variant`` is the one running)."""
        self.mode = "sites"
        tracer = self._slab_tracer()
        if tracer is not None:
            self._trace(tracer, False)
        self._trace("slabtrace" if tracer == variant else variant, True)
        self._redraw()

    def action_trace(self) -> None:
        self.mode = "sites"
        tracer = self._slab_tracer()
        if tracer is not None:
            self._trace(tracer, False)
        else:
            self.opts.extra["cache"] = None
            self._trace("slabtrace", True)
        self._redraw()

    def action_stacks(self) -> None:
        """Switch slab tracing to (or from) the tracer that also collects kernel stacks."""
        self._swap_slab_tracer("slabstacks")

    def action_frees(self) -> None:
        """Switch slab tracing to (or from) the tracer that hooks the frees too (net growth per
        call site; it runs a program on every free, sampled object or not)."""
        self._swap_slab_tracer("slabfrees")

    def action_all_caches(self) -> None:
        self.opts.extra["cache"] = None
        self.mode = "sites"
        self._redraw()

    def action_pages(self) -> None:
        self.mode = "pages"
        self._trace("pagealloc", "pagealloc" not in self._tracing)
        self._redraw()

    def action_mode(self) -> None:
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)]
        self._redraw()

    def action_breakdown(self) -> None:
        self.mode = "sites" if self.mode == "breakdown" else "breakdown"
        self._redraw()

    def action_clear_filter(self) -> None:
        self.opts.extra["cache"] = None
        super().action_clear_filter()

    def on_hide(self, _event: events.Hide) -> None:
        """Leaving the pane detaches its tracers: hot-path probes run only while looked at."""
        for tracer in list(self._tracing):
            self._trace(tracer, False)

    @on(DataTable.RowSelected, "#kernel-table")
    def _row(self, event: DataTable.RowSelected) -> None:
        name = event.row_key.value
        if name is None:
            return
        self.opts.extra["cache"] = str(name)
        self.mode = "sites"
        if self._slab_tracer() is None:
            self._trace("slabtrace", True)
        self._redraw()
