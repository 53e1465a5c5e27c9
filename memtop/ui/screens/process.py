"""The process drill-in screen: what in this process makes it grow and fault.

Tabs: history (RSS split and fault rates, plotext charts on one time axis), fault stacks (an
expandable tree sorted by count), faults by mapping, heap growth stacks (brk/mmap/munmap) and
mappings (pmap -x, sortable). The per-pid probes attach when the screen opens and detach when it
closes; only the target pays for them. Rendered from state on the app's timer, never per event.

The mappings tab shows the totals from smaps_rollup as soon as they are read, then the table as
the read of smaps fills it. A process may have 65,530 mappings (vm.max_map_count): the table
shows the first MAP_ROWS_SHOWN in the order asked for (the title says so; a JSON or text snapshot
has every row), and is rebuilt only when the read it shows or the order changed, so keys are
answered at once while it fills.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal, TypeVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane, Tree
from textual.widgets.tree import TreeNode

from memtop.core import fmt
from memtop.state import State
from memtop.state.process import ProcessState
from memtop.stream.source import Source
from memtop.ui import charts
from memtop.ui.lines import segments_text, show_text
from memtop.ui.panes.base import TraceAllocations, fill_table
from memtop.ui.plot import Chart
from memtop.ui.screens import DrillScreen
from memtop.ui.table import FastTable
from memtop.views import Options, measuring
from memtop.views.process import (
    FAULT_EVENTS_SLOWDOWN,
    MAPPING_SORT_KEYS,
    SECTION_COLUMNS,
    SECTION_TITLES,
    SECTIONS,
    FaultStackRow,
    GrowthRow,
    ProcessView,
    StackRow,
    fault_coverage,
    fault_file_rows,
    fault_stack_label,
    fault_stack_rows,
    growth_label,
    growth_rows,
    header_segments,
    history_rows,
    mapping_dict,
    mapping_totals,
    mapping_totals_segments,
    section_title,
    shown_mappings,
    sorted_mappings,
    status_segments,
    working_set,
    working_set_rows,
    working_set_segments,
)

TAB_LABELS = {
    "history": "History",
    "fault_stacks": "Fault stacks",
    "fault_files": "Faults by file",
    "growth": "Heap growth",
    "mappings": "Mappings",
    "working_set": "Working set",
}
#: the working-set window the drill-in's w asks for, seconds
WSS_WINDOW_S = 10.0
TREE_TOP = 100
#: mapping rows put in the table (the rest are counted in its title; snapshots have them all)
MAP_ROWS_SHOWN = 1000
#: after the screen opens, polls this often until the mapping totals and the first table are in
#: (the app's tick may be seconds away), for at most FIRST_DATA_S; the smaps probe's cadence
#: spaces its own polls
FIRST_POLL_S = 0.1
FIRST_DATA_S = 10.0
MIB = 1024 * 1024


def wall_clock(mono_ns: int) -> str:
    """HH:MM:SS of a CLOCK_MONOTONIC instant."""
    now_mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    return time.strftime("%H:%M:%S", time.localtime(time.time() - (now_mono - mono_ns) / 1e9))


#: a stack row the tree shows (fault stacks, growth)
S = TypeVar("S", bound=StackRow)


class StackTree(Tree[int]):
    """Stacks as an expandable tree: one node per stack (label: figures and the program's frame),
    its frames as leaves. Updated in place; rebuilt only when the order changes, keeping which
    stacks are expanded and where the cursor is."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(Text("stacks"), **kwargs)
        self.show_root = False
        self._order: list[int] = []
        self._stack_nodes: dict[int, TreeNode[int]] = {}

    def update_rows(self, rows: Sequence[S], label: Callable[[S], Text]) -> None:
        rows = rows[:TREE_TOP]
        order = [int(r["stack_id"]) for r in rows]
        if order == self._order:
            for r in rows:
                self._stack_nodes[int(r["stack_id"])].set_label(label(r))
            return
        expanded = {sid for sid, n in self._stack_nodes.items() if n.is_expanded}
        cursor = self.cursor_node.data if self.cursor_node is not None else None
        self.clear()
        self._stack_nodes = {}
        for r in rows:
            sid = int(r["stack_id"])
            node = self.root.add(label(r), data=sid, expand=sid in expanded)
            for i, frame in enumerate(r["frames"]):
                node.add_leaf(Text(f"#{i:<2} {frame}"), data=sid)
            self._stack_nodes[sid] = node
        self._order = order
        if cursor is not None and cursor in self._stack_nodes:
            self.move_cursor(self._stack_nodes[cursor])


#: the history chart's series: (history row key, legend label), bytes first as users read RSS
HISTORY_SERIES: tuple[tuple[Literal["anon_bytes", "file_bytes", "shmem_bytes", "swap_bytes"], str], ...] = (
    ("anon_bytes", "anon"),
    ("file_bytes", "file"),
    ("shmem_bytes", "shmem"),
    ("swap_bytes", "swap"),
)


class ProcessScreen(DrillScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", tooltip="back to the pane"),
        Binding("m", "leaks", "Leaks", tooltip="trace its allocations (Leaks pane)"),
        Binding(
            "w",
            "working_set",
            "Working set",
            tooltip="measure the memory it touches every 10 s (clears its referenced bits); again: stop",
        ),
        Binding("less_than_sign", "sort(-1)", "Sort ←", show=False, tooltip="sort by the previous column"),
        Binding("greater_than_sign", "sort(1)", "Sort →", show=False, tooltip="sort by the next column"),
        Binding("r", "reverse", "Reverse", show=False, tooltip="reverse the sort"),
    ]
    BINDINGS += [Binding(str(i), f"section({i})", show=False) for i in range(1, len(SECTIONS) + 1)]

    def help_entries(self) -> list[tuple[str, str]]:
        return [*((str(i), SECTION_TITLES[s]) for i, s in enumerate(SECTIONS, 1)), *super().help_entries()]

    def __init__(self, pid: int, source: Source, state: State, section: str = "") -> None:
        super().__init__()
        self.pid = pid
        self.source = source
        self.state = state
        self.view = ProcessView()
        start = section if section in SECTIONS else "history"
        self.opts = Options(pid=pid, section=start, sort="", reverse=False)
        self.title = f"process {pid}"
        self._focused = False
        self._mappings_key: tuple[object, ...] | None = None  # what the mappings table shows

    # -- layout ---------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="proc-header")
        yield Static(id="proc-status", classes="pane-status")
        with TabbedContent(id="proc-tabs", initial=f"sec-{self.opts.section}"):
            for i, sec in enumerate(SECTIONS, 1):
                with TabPane(f"{i} {TAB_LABELS[sec]}", id=f"sec-{sec}"):
                    yield from self._compose_section(sec)
        yield Footer()

    def _compose_section(self, sec: str) -> ComposeResult:
        if sec == "history":
            yield Static(id="proc-rss-legend", classes="chart-legend")
            yield Chart(id="proc-rss-chart", classes="proc-chart")
            yield Static(id="proc-fault-legend", classes="chart-legend")
            yield Chart(id="proc-fault-chart", classes="proc-chart")
        elif sec in ("fault_stacks", "growth"):
            yield Static(
                Text(SECTION_TITLES[sec], style="bold"), id=f"proc-{sec}-title", classes="proc-title"
            )
            yield StackTree(id=f"proc-{sec}-tree", classes="proc-tree")
        else:
            yield Static(
                Text(SECTION_TITLES[sec], style="bold"), id=f"proc-{sec}-title", classes="proc-title"
            )
            if sec in ("mappings", "working_set"):  # totals first: they are in before any row
                yield Static(id=f"proc-{sec}-totals", classes="proc-totals")
            yield FastTable(
                id=f"proc-{sec}-table", cursor_type="row", zebra_stripes=True, classes="proc-table"
            )

    def on_mount(self) -> None:
        # the source follows the pid and attaches what describes it (a replay answers from the
        # recording); the state learns of the focus from the source's record
        self.source.focus(self.pid)
        self._focused = True
        self.refresh_from(self.state)
        self._focus_section()
        if self.source.replay is None:
            self.run_worker(self._first_data(), exclusive=False)

    async def _first_data(self) -> None:
        """Poll the source soon after the probes are added rather than at the app's next tick,
        until the mapping totals and the first table are in (a slow poll in flight absorbs
        these, as ticks do)."""
        deadline = time.monotonic() + FIRST_DATA_S
        while time.monotonic() < deadline:
            await asyncio.sleep(FIRST_POLL_S)
            t = self.state.get(ProcessState).target(self.pid)
            if t is not None and t.mapping_totals is not None and t.mappings_ts_ns:
                break
            if await self.source.poll() is not None:
                self.refresh_from(self.state)

    def on_unmount(self) -> None:
        self.detach_probes()

    # -- the focus -------------------------------------------------------------------------------
    def detach_probes(self) -> None:
        """The user looks elsewhere: the source detaches what the focus attached."""
        if self._focused:
            self._focused = False
            self.source.unfocus(self.pid)

    # -- rendering ------------------------------------------------------------------------------
    @property
    def section(self) -> str:
        try:
            active = self.query_one("#proc-tabs", TabbedContent).active
        except Exception:  # noqa: BLE001
            return self.opts.section
        return active.removeprefix("sec-") if active else self.opts.section

    def refresh_from(self, state: State) -> None:
        self.state = state
        try:
            self._draw(state)
        except NoMatches:  # not composed yet, or being torn down (the app's timer may still fire)
            return

    def _draw(self, state: State) -> None:
        self._draw_header(state)
        sec = self.section
        if sec == "history":
            self._draw_history(state)
        elif sec == "fault_stacks":
            self._draw_fault_stacks(state)
        elif sec == "fault_files":
            self._draw_fault_files(state)
        elif sec == "growth":
            self._draw_growth(state)
        elif sec == "mappings":
            self._draw_mappings(state)
        elif sec == "working_set":
            self._draw_working_set(state)

    def _draw_header(self, state: State) -> None:
        h = segments_text(header_segments(state, self.pid, wall_clock))
        show_text(self.query_one("#proc-header", Static), h)
        show_text(self.query_one("#proc-status", Static), self._status_text(state))

    def _status_text(self, state: State) -> Text:
        parts = segments_text(status_segments(self.view, state))
        parts.append("   Esc back · 1-6 sections · w working set · m leaks · s snapshot", style="dim")
        return parts

    def _draw_history(self, state: State) -> None:
        rows = history_rows(state, self.pid)
        xs = [r["t_s"] for r in rows]
        xlim = (xs[0], max(xs[-1], xs[0] + 1)) if rows else None
        charts.draw(
            self.query_one("#proc-rss-chart", Chart),
            self.query_one("#proc-rss-legend", Static),
            "resident memory since memtop started",
            [(label, xs, [float(r[key]) for r in rows]) for key, label in HISTORY_SERIES],
            fmt.bytes_h,
            xlim=xlim,
            binary=True,
        )
        charts.draw(
            self.query_one("#proc-fault-chart", Chart),
            self.query_one("#proc-fault-legend", Static),
            "page faults per second",
            [
                ("minor", xs, [r["minor_faults_per_s"] for r in rows]),
                ("major", xs, [r["major_faults_per_s"] for r in rows]),
            ],
            fmt.count_h,
            xlim=xlim,
        )

    def _coverage_note(self, state: State) -> str:
        """ "" when every thread is traced; else how many are not, and why."""
        cov = fault_coverage(state, self.pid)
        if cov is None or cov["covered"]:
            return ""
        return (
            f" · {cov['threads_traced']} of {cov['threads_total']} threads traced"
            f" ({cov['threads_uncovered']} not: {cov['reason']})"
        )

    def _faults_measured(self, state: State) -> bool:
        """As the view decides: counts taken, or a probe that is counting some thread."""
        t = state.get(ProcessState).target(self.pid)
        if t is not None and (t.fault_stacks or t.fault_files):
            return True
        cov = fault_coverage(state, self.pid)
        return measuring(state, "faultstack") and (cov is None or cov["threads_traced"] > 0)

    def _draw_fault_stacks(self, state: State) -> None:
        rows = fault_stack_rows(state, self.pid)
        total = sum(r["count"] for r in rows)
        if not self._faults_measured(state):
            self._title("fault_stacks", "not measured (see the status line)" + self._coverage_note(state))
            self.query_one("#proc-fault_stacks-tree", StackTree).update_rows([], lambda r: Text())
            return

        def label(r: FaultStackRow) -> Text:
            return segments_text(fault_stack_label(r, total))

        self._title(
            "fault_stacks",
            f"{fmt.count_h(total)} faults in {len(rows)} stacks since attach"
            + (f" (top {TREE_TOP})" if len(rows) > TREE_TOP else "")
            + self._coverage_note(state)
            + " · Enter expands",
        )
        self.query_one("#proc-fault_stacks-tree", StackTree).update_rows(rows, label)

    def _draw_growth(self, state: State) -> None:
        rows = growth_rows(state, self.pid)

        def label(r: GrowthRow) -> Text:
            return segments_text(growth_label(r))

        grown = sum(r["grown_bytes"] for r in rows)
        net = sum(r["net_bytes"] for r in rows)
        self._title(
            "growth",
            f"{fmt.bytes_h(grown)} grown, net {fmt.bytes_h(net)}, from {len(rows)} stacks"
            " since attach · Enter expands",
        )
        self.query_one("#proc-growth-tree", StackTree).update_rows(rows, label)

    def _draw_fault_files(self, state: State) -> None:
        rows = fault_file_rows(state, self.pid)
        if not self._faults_measured(state):
            rows = []
            self._title("fault_files", "not measured (see the status line)" + self._coverage_note(state))
        else:
            huge = sum(r["count"] for r in rows if r["hugetlb"])
            self._title(
                "fault_files",
                f"{len(rows)} mappings with faults since attach"
                + (f" · {huge:,} huge page faults (hugetlb)" if huge else "")
                + self._coverage_note(state)
                + f" · while open, each fault of this process costs {FAULT_EVENTS_SLOWDOWN}",
            )
        fill_table(
            self.query_one("#proc-fault_files-table", DataTable), SECTION_COLUMNS["fault_files"], rows, "path"
        )

    def _draw_mappings(self, state: State) -> None:
        t = state.get(ProcessState).target(self.pid)
        rows, complete = shown_mappings(t)
        tot = mapping_totals(t)
        totals = segments_text(mapping_totals_segments(tot))
        show_text(self.query_one("#proc-mappings-totals", Static), totals)
        sort = self.opts.sort or "start"
        shown = min(len(rows), MAP_ROWS_SHOWN)
        title = f"{len(rows):,} mappings" + (
            "" if complete else " so far, reading…" if rows else " · reading…"
        )
        if shown < len(rows):
            title += f" · the first {shown:,} by {sort} shown (a snapshot has all)"
        self._title(
            "mappings",
            title + f" · sort {sort} {'↓' if self.opts.reverse else '↑'} (< > r, or click a header)",
        )
        # the table is rebuilt only when the read it shows or the order changed: sorting every row
        # and laying out the shown ones is cheap once, not on every tick
        key = (
            id(rows),
            len(rows),
            t.mappings_gen if t is not None else -1,
            self.opts.sort,
            self.opts.reverse,
        )
        if key == self._mappings_key:
            return
        self._mappings_key = key
        top = sorted_mappings(rows, self.opts.sort, self.opts.reverse, MAP_ROWS_SHOWN)
        fill_table(
            self.query_one("#proc-mappings-table", DataTable),
            SECTION_COLUMNS["mappings"],
            [mapping_dict(m) for m in top],
            "start",
        )

    def _draw_working_set(self, state: State) -> None:
        t = state.get(ProcessState).target(self.pid)
        wss = working_set(t)
        st = state.probe_state("wss")
        running = st is not None and st.state in ("pending", "attaching", "attached")
        if wss is None:
            self._title("working_set", "w measures it (clears its referenced bits; w again stops)")
        else:
            self._title(
                "working_set",
                f"{wss['source']}, {wss['window_s']:g} s windows"
                + (" · measuring (w stops)" if running else " · stopped (w measures again)"),
            )
        totals = segments_text(working_set_segments(wss))
        show_text(self.query_one("#proc-working_set-totals", Static), totals)
        fill_table(
            self.query_one("#proc-working_set-table", DataTable),
            SECTION_COLUMNS["working_set"],
            working_set_rows(t),
            "name",
        )

    def _title(self, sec: str, extra: str) -> None:
        show_text(self.query_one(f"#proc-{sec}-title", Static), segments_text(section_title(sec, extra)))

    def _focus_section(self) -> None:
        sec = self.section
        for sel in (f"#proc-{sec}-tree", f"#proc-{sec}-table"):
            found = self.query(sel)
            if found:
                found.first().focus()
                return

    @on(TabbedContent.TabActivated, "#proc-tabs")
    def _tab_changed(self, _event: TabbedContent.TabActivated) -> None:
        self.opts.section = self.section
        self.refresh_from(self.state)
        self._focus_section()

    # -- snapshots (the app's `s` and headless `memtop snapshot --pane process`) ----------------
    @property
    def snapshot_name(self) -> str:
        return f"process-{self.pid}-{self.section}"

    def options(self) -> Options:
        return Options(pid=self.pid, section=self.section, sort=self.opts.sort, reverse=self.opts.reverse)

    # -- actions --------------------------------------------------------------------------------
    def action_back(self) -> None:
        self.detach_probes()
        self.app.pop_screen()

    def action_section(self, index: int) -> None:
        if 1 <= index <= len(SECTIONS):
            self.query_one("#proc-tabs", TabbedContent).active = f"sec-{SECTIONS[index - 1]}"

    def action_working_set(self) -> None:
        """Start a working-set measurement of this process, or stop the one running (a key of
        the user's: it clears the process's referenced bits, which reclaim reads too)."""
        st = self.state.probe_state("wss")
        running = st is not None and st.state in ("pending", "attaching", "attached")
        self.source.measure_working_set(self.pid, not running, WSS_WINDOW_S)
        self.query_one("#proc-tabs", TabbedContent).active = "sec-working_set"
        self.refresh_from(self.state)

    def action_leaks(self) -> None:
        self.post_message(TraceAllocations(self.pid))

    def action_sort(self, step: int) -> None:
        if self.section != "mappings":
            return
        keys = list(MAPPING_SORT_KEYS)
        cur = keys.index(self.opts.sort) if self.opts.sort in keys else 0
        self.opts.sort = keys[(cur + step) % len(keys)]
        self.opts.reverse = self.opts.sort not in ("start", "mode", "name")
        self.refresh_from(self.state)

    def action_reverse(self) -> None:
        if self.section == "mappings":
            self.opts.reverse = not self.opts.reverse
            self.refresh_from(self.state)

    @on(DataTable.HeaderSelected, "#proc-mappings-table")
    def _header(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        key = "start" if key == "address" else key
        if key not in MAPPING_SORT_KEYS:
            return
        if self.opts.sort == key:
            self.opts.reverse = not self.opts.reverse
        else:
            self.opts.sort, self.opts.reverse = key, key not in ("start", "mode", "name")
        self.refresh_from(self.state)
