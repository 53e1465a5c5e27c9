"""Processes pane: per-process RSS split and faults, sortable, filterable, plus recently exited."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.widgets import DataTable, Static

from memtop.core import fmt
from memtop.state import State
from memtop.state.processes import ProcessesState
from memtop.ui.lines import segments_text, show_text
from memtop.ui.panes.base import DrillIn, FilterablePane, SortableTablePane, StatusLine, fill_table
from memtop.ui.table import FastTable
from memtop.views.processes import EXITED_COLUMNS, SORT_KEYS, ProcessesView, exited_title

SPARK_WIDTH = 12
#: a sparkline spans at least this share of the process's RSS: a row's own min..max made a few
#: pages of jitter look like a steady leak
SPARK_MIN_SPAN = 0.05


def exited_rows(height: int) -> int:
    """How many "Recently exited" rows a terminal ``height`` lines high shows: the block gives way
    to the live processes first (3 rows at 24 lines, 5 at 30, 8 from 39 on)."""
    return max(1, min(8, (height - 15) // 3))


class ProcessesPane(FilterablePane, SortableTablePane):
    view_name = "processes"
    enter_help = "drill into the process"
    table_id = "processes-table"
    sort_keys = SORT_KEYS
    default_sort = "rss_bytes"
    filter_hint = "filter by name, pid, user or command line (Enter applies, Esc clears)"

    BINDINGS = [
        Binding("M", "sort_by('rss_bytes')", "Sort RSS", show=False, tooltip="sort by RSS (again: reverse)"),
        Binding("P", "sort_by('pid')", "Sort PID", show=False, tooltip="sort by PID"),
        Binding(
            "F", "sort_by('minor_faults_per_s')", "Sort faults", show=False, tooltip="sort by minor faults/s"
        ),
        Binding("S", "sort_by('swap_bytes')", "Sort swap", show=False, tooltip="sort by swap"),
        Binding(
            "C",
            "group_cgroup",
            "Group by cgroup",
            show=False,
            tooltip="group by memory cgroup (again: ungroup)",
        ),
        Binding(
            "E",
            "all_exited",
            "Exited: all",
            show=False,
            tooltip="list processes born and gone between polls too",
        ),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: RSS sparklines drawn lately, by the window of values they draw
        self._sparks: dict[tuple[int, ...], str] = {}
        #: id of an exited row of the view -> (that row, the row the table was given for it)
        self._exited_keyed: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}

    def compose(self) -> ComposeResult:
        yield StatusLine(id="processes-status", classes="pane-status")
        # PID and COMMAND stay put when the table scrolls right
        yield FastTable(id="processes-table", cursor_type="row", zebra_stripes=True, fixed_columns=2)
        yield Static(Text("Recently exited", style="bold"), classes="subtitle", id="processes-exited-title")
        yield FastTable(id="processes-exited", cursor_type="row", zebra_stripes=True, fixed_columns=2)

    def on_resize(self, event: Resize) -> None:
        height = self.app.size.height
        self.query_one("#processes-exited", DataTable).styles.height = exited_rows(height) + 1
        # a small terminal gives the blank line above "Recently exited" to the processes
        self.query_one("#processes-exited-title", Static).set_class(height < 30, "tight")

    def refresh_from(self, state: State) -> None:
        self._state = state
        view = self.view
        assert isinstance(view, ProcessesView)
        doc = view.document(state, self.opts)
        procs = state.get(ProcessesState)
        status = segments_text(view.summary(doc, self.opts), self.status_text(state))
        show_text(self.query_one("#processes-status", StatusLine), status)

        # the sparklines drawn in this redraw, from last redraw's when drawn then: kept no longer
        # than a row shows them (a cache of up to 4,096 windows of 12 values was ~2 MiB in a
        # fault storm, where every busy process draws a new one each tick)
        last = self._sparks
        sparks: dict[tuple[int, ...], str] = {}

        def spark(row: Mapping[str, Any]) -> str:
            r = procs.rows.get(row["pid"])
            if r is not None and r.spark_same >= SPARK_WIDTH:  # a flat line: no copy of the window
                vals: tuple[int, ...] = (r.spark[-1],) * SPARK_WIDTH
            else:
                vals = tuple(r.spark)[-SPARK_WIDTH:] if r else ()
            text = sparks.get(vals)
            if text is None:
                text = last.get(vals)
                if text is None:
                    text = fmt.sparkline(list(vals), SPARK_WIDTH, SPARK_MIN_SPAN)
                sparks[vals] = text
            return text

        def flat_before(row: Mapping[str, Any]) -> bool:
            # the sparkline was already a flat line of this value last tick
            r = procs.rows.get(row["pid"])
            return r is not None and r.spark_same > SPARK_WIDTH

        # grouped, each cgroup's line of totals comes before its processes (keyed by the view);
        # else the rows themselves, whose identity tells the table they did not change
        grouped = "groups" in doc
        fill_table(
            self.query_one("#processes-table", DataTable),
            self.view.columns,
            self.view.table_rows(doc) if grouped else doc["rows"],
            "key" if grouped else "pid",
            extra={"RSS HISTORY": spark},
            extra_same=flat_before,
            # the sparkline is the first to go on a narrow terminal: GROW/s says the slope
            extra_priority=7,
            sort=(self.opts.sort or self.default_sort, self.opts.reverse),
        )
        self._sparks = sparks
        title = self.query_one("#processes-exited-title", Static)
        show_text(title, Text(exited_title(doc), style="bold", no_wrap=True, overflow="ellipsis"))
        # each keyed row is the same object while the view hands the same row (fill_table then
        # neither formats nor compares it again)
        last_keyed = self._exited_keyed
        keyed: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}
        exited: list[dict[str, Any]] = []
        for e in doc["exited"][:50]:
            hit = last_keyed.get(id(e))
            row: dict[str, Any] = (
                hit[1] if hit is not None and hit[0] is e else {**e, "key": f"{e['pid']}:{e['exited_ns']}"}
            )
            keyed[id(e)] = (e, row)
            exited.append(row)
        self._exited_keyed = keyed
        fill_table(self.query_one("#processes-exited", DataTable), EXITED_COLUMNS, exited, "key")

    # -- actions ----------------------------------------------------------------------------------
    def action_group_cgroup(self) -> None:
        """Group processes by memory cgroup (again: ungroup)."""
        grouped = self.opts.extra.get("group") == "cgroup"
        self.opts.extra["group"] = "" if grouped else "cgroup"
        self._redraw()

    def action_all_exited(self) -> None:
        """List the processes born and gone between two polls among the exited (again: hide)."""
        self.opts.extra["exited"] = "" if self.opts.extra.get("exited") == "all" else "all"
        self._redraw()

    @on(DataTable.RowSelected, "#processes-table")
    def _row(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if key is not None and key.isdigit():  # a cgroup's line of totals has nothing to drill into
            self.post_message(DrillIn(int(key)))

    @on(DataTable.RowSelected, "#processes-exited")
    def _exited_row(self, event: DataTable.RowSelected) -> None:
        pid = self.query_one("#processes-exited", DataTable).get_row(event.row_key)[0]
        self.post_message(DrillIn(int(str(pid))))
