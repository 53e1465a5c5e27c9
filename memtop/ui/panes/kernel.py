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
from memtop.ui.lines import show_text
from memtop.ui.panes.base import FilterablePane, SortableTablePane, StatusLine, cursor_key, fill_table
from memtop.ui.table import FastTable
from memtop.views.kernel import SLAB_TRACERS, SORT_KEYS, mode_label

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


def cpu(cost: dict[str, Any]) -> str:
    """A tracer's measured share of one CPU, "-" before two reads or without run stats."""
    v = cost.get("cpu_pct")
    return "-" if v is None else f"{v:.2f}%"


def stacked_bar(lines: list[dict[str, Any]], width: int) -> Text:
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
        self._rows: dict[str, dict[str, Any]] = {}
        self._tracing: set[str] = set()
        self._doc: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield StatusLine(id="kernel-status", classes="pane-status")
        yield Static(id="kernel-breakdown")
        yield FastTable(id="kernel-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="kernel-detail")

    # -- drawing ----------------------------------------------------------------------------------
    def refresh_from(self, state: State) -> None:
        self._state = state
        doc = self.view.document(state, self.opts)
        self._doc = doc
        status = self.status_text(state)
        slab = doc["slab"]
        if slab["readable"]:
            status.append(f"   {fmt.plural(slab['caches'], 'cache')} {fmt.bytes_h(slab['total_bytes'])}")
        label = next((c.label for c in self.view.columns if c.key == self.opts.sort), self.opts.sort)
        status.append(f" · sort {label} {'↓' if self.opts.reverse else '↑'}")
        if self.opts.filter:
            status.append(" · filter: ")
            status.append(self.opts.filter, style="bold")
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

    def _breakdown(self, doc: dict[str, Any]) -> None:
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

    def selected(self) -> dict[str, Any] | None:
        table = self.table()
        key = cursor_key(table)
        return None if key is None else self._rows.get(key)

    def _detail(self, doc: dict[str, Any], state: State) -> None:
        box = self.query_one("#kernel-detail", Static)
        slab = doc["slab"]
        # one line per figure, cut at the edge (wrapped lines took the rows of a small terminal)
        t = Text(no_wrap=True, overflow="ellipsis")
        if slab["readable"] is False:
            t.append(f"Slab caches: {slab['message']}", style="yellow")
            if slab["hint"]:
                t.append(f" — {slab['hint']}", style="italic")
            t.append("\n")
        if self.mode == "breakdown":
            self._history(state, doc, t)
        elif self.mode == "pages":
            self._pages(doc, t)
        elif self.mode == "vmalloc":
            self._vmalloc(doc, t)
        elif self.mode == "allocinfo":
            self._allocinfo(doc, t)
        else:
            self._sites(doc, t)
        show_text(box, t)

    def _sites(self, doc: dict[str, Any], t: Text) -> None:
        s = doc["sites"]
        if not s["sample"]:
            t.append("Slab call sites: not traced. ", style="bold")
            t.append(
                "t traces every cache, Enter the selected one (sampled in kernel; t again stops)", style="dim"
            )
            return
        c = s["cost"]
        t.append(f"Call sites of {s['cache'] or 'every cache'}", style="bold")
        # the cost line: what was hooked (and, before it is cut at 80 columns, why there is no net
        # growth), then what those programs cost as the kernel measured it
        t.append(
            f"  {mode_label(s)}"
            + ("" if s["frees_traced"] else f" · {s['frees_note']}")
            + f" · 1 in {s['sample']} sampled · {fmt.count_h(c['events_per_s'])} events/s"
            f" · {cpu(c)} of a CPU"
            + (f" ({c['ns_per_event']:.0f} ns/event)" if c["ns_per_event"] else "")
            + (f" · frees not attributed {fmt.count_h(s['frees_unattributed'])}" if s["frees_traced"] else "")
            + (f" · dropped {s['dropped']}" if s["dropped"] else "")
            + ("" if s["tracing"] else " · stopped"),
            style="dim",
        )
        for r in s["rows"][: 2 if s["stacks"] else 4]:
            t.append("\n")
            t.append(f"{r['cache'][:22]:<22} ", style="cyan")
            t.append(f"{r['site'][:34]:<34}")
            t.append(f" {fmt.count_h(r['allocs_per_s']):>6}/s  {fmt.bytes_h(r['bytes_per_s'])}/s")
            if s["frees_traced"]:
                t.append(f"  net {fmt.count_h(r['net_per_s'])}/s  Σnet {fmt.count_h(r['net_objs'])}")
            else:  # not measured: a dash, never a 0 (the cost line says why)
                t.append("  net —", style="dim")
            if s["stacks"]:  # its heaviest kernel stack: who called the call site
                t.append("\n")
                callers = r["stacks"][0]["frames"][1:] if r["stacks"] else []
                t.append("  ↳ " + (" ← ".join(callers) if callers else "no stack yet"), style="dim")

    def _pages(self, doc: dict[str, Any], t: Text) -> None:
        p = doc["pages"]
        t.append("Free blocks by order", style="bold")
        t.append("  (buddyinfo; unusable: share of free memory too fragmented for order 3 / 9)", style="dim")
        for z in p["zones"]:
            t.append("\n")
            u = z["unusable"]
            frag = " / ".join("-" if v is None else f"{v * 100:.0f}%" for v in u.values())
            t.append(f"node {z['node']} {z['zone']:<7} {fmt.bytes_h(z['free_bytes']):>7} unusable {frag:<9} ")
            t.append(" ".join(fmt.count_h(n) for n in z["free_blocks"]), style="dim")
        pa = p["page_alloc"]
        t.append("\n")
        if pa["orders"] is None:
            t.append("Page allocations by order: not counted (p counts them in kernel)", style="dim")
        else:
            c = pa["cost"]
            t.append("Page allocs/s by order: ", style="bold")
            t.append(" ".join(f"{o['order']}:{fmt.count_h(o['per_s'])}" for o in pa["orders"]))
            t.append(
                f"  ({fmt.count_h(c['events_per_s'])}/s, {cpu(c)} of a CPU)"
                + ("" if pa["tracing"] else " stopped"),
                style="dim",
            )

    def _vmalloc(self, doc: dict[str, Any], t: Text) -> None:
        v = doc["vmalloc"]
        if v is None:
            t.append("vmalloc: not read yet", style="dim")
            return
        if not v["readable"]:
            t.append(f"vmalloc: {v['message']}", style="yellow")
            return
        t.append(f"vmalloc by caller: {v['areas']} areas, {fmt.bytes_h(v['total_bytes'])}", style="bold")
        for r in v["rows"][:4]:
            t.append("\n")
            t.append(f"{fmt.bytes_h(r['bytes']):>8} {r['areas']:>5}  {(r['kind'] or '-'):<8} {r['caller']}")

    def _allocinfo(self, doc: dict[str, Any], t: Text) -> None:
        a = doc["allocinfo"]
        if a is None:
            t.append("Allocation profiling: not read yet", style="dim")
            return
        if a["state"] != "on":
            t.append(f"Allocation profiling: {a['state']}. ", style="bold yellow")
            t.append(a["hint"] or "", style="dim")
            return
        if "by_bytes" not in a:
            t.append("Allocation profiling: on; /proc/allocinfo not readable", style="yellow")
            return
        t.append(
            f"Allocation profiling ({a['version']}): {a['nsites']} call sites hold {fmt.bytes_h(a['total_bytes'])}",
            style="bold",
        )
        for r in a["by_bytes"][:4]:
            t.append("\n")
            grow = (
                ""
                if r["growth_bytes"] is None
                else f" {'+' if r['growth_bytes'] > 0 else ''}{fmt.bytes_h(r['growth_bytes'])}"
            )
            mod = f" [{r['module']}]" if r["module"] else ""
            t.append(
                f"{fmt.bytes_h(r['bytes']):>8} {fmt.count_h(r['calls']):>6}{grow:>8}  {r['where']}{mod} {r['function']}"
            )
            if not r["accurate"]:
                t.append(" (not accurate)", style="yellow")

    def _history(self, state: State, doc: dict[str, Any], t: Text) -> None:
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
        src = getattr(self.app, "source", None)
        return src

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
