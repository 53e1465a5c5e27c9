"""Cgroups pane: the memory cgroup tree (collapsible, sortable, filterable) with usage against the
limit, swap, limit hits, PSI and what memtop's probes saw per cgroup; Enter drills into a cgroup."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from memtop.state import State
from memtop.ui.lines import segments_text, show_text
from memtop.ui.panes.base import FilterablePane, SortableTablePane, StatusLine, cursor_key, fill_table
from memtop.ui.table import FastTable
from memtop.views.cgroups import SORT_KEYS, CgroupRowDoc, CgroupsView, row_detail


class CgroupsPane(FilterablePane, SortableTablePane):
    view_name = "cgroups"
    enter_help = "open the cgroup"
    table_id = "cgroups-table"
    sort_keys = SORT_KEYS
    default_sort = "usage_bytes"
    ascending = ("path",)
    filter_hint = "filter by cgroup path, unit or container (Enter applies, Esc clears)"

    BINDINGS = [
        Binding("M", "sort_by('usage_bytes')", "Sort usage", show=False, tooltip="sort by usage"),
        Binding("L", "sort_by('limit_pct')", "Sort % of limit", show=False, tooltip="sort by % of limit"),
        Binding("P", "sort_by('psi_some_pct')", "Sort PSI", show=False, tooltip="sort by memory pressure"),
        Binding(
            "R", "sort_by('reclaim_stall_ns')", "Sort stall", show=False, tooltip="sort by reclaim stall"
        ),
        # ← → and [ ] step and jump in a replay: folding takes vim's h / l, the depth D
        Binding("h", "collapse(1)", "Fold", show=False, tooltip="fold the cgroup"),
        Binding("l", "collapse(0)", "Unfold", show=False, tooltip="unfold the cgroup"),
        Binding("c", "fold", "Fold", tooltip="fold or unfold the cgroup"),
        Binding("D", "depth", "Depth", tooltip="next depth of the tree shown"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.opts.extra.setdefault("collapsed", [])
        self.opts.extra.setdefault("depth", 0)
        self._rows: dict[str, CgroupRowDoc] = {}

    def compose(self) -> ComposeResult:
        yield StatusLine(id="cgroups-status", classes="pane-status")
        yield FastTable(id="cgroups-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="cgroups-detail")

    def refresh_from(self, state: State) -> None:
        self._state = state
        assert isinstance(self.view, CgroupsView)
        doc = self.view.document(state, self.opts)
        status = segments_text(self.view.summary(doc, self.opts), self.status_text(state))
        show_text(self.query_one("#cgroups-status", StatusLine), status)
        self._rows = {r["path"]: r for r in doc["rows"]}
        table = self.query_one("#cgroups-table", DataTable)
        # siblings are sorted (the tree keeps parents above children): the marker says by what
        fill_table(
            table,
            self.view.columns,
            doc["rows"],
            "path",
            sort=(self.opts.sort or self.default_sort, self.opts.reverse),
        )
        self._detail()

    def selected(self) -> CgroupRowDoc | None:
        table = self.table()
        key = cursor_key(table)
        return None if key is None else self._rows.get(key)

    def _detail(self) -> None:
        box = self.query_one("#cgroups-detail", Static)
        show_text(box, segments_text(row_detail(self.selected())))

    # -- actions ----------------------------------------------------------------------------------
    def _collapsed(self) -> list[str]:
        c = self.opts.extra.setdefault("collapsed", [])
        assert isinstance(c, list)
        return c

    def action_collapse(self, fold: int) -> None:
        r = self.selected()
        if r is None:
            return
        c = self._collapsed()
        if fold and r["children"] and r["path"] not in c:
            c.append(r["path"])
        elif not fold and r["path"] in c:
            c.remove(r["path"])
        elif not fold and r["collapsed"]:  # folded by depth: show its children
            self.opts.extra["depth"] = 0
        self._redraw()

    def action_fold(self) -> None:
        r = self.selected()
        if r is not None:
            self.action_collapse(0 if r["collapsed"] else 1)

    def action_depth(self) -> None:
        """Show one level more, from the root's children only up to every level (atop's depth)."""
        deepest = max((r["depth"] for r in self._rows.values()), default=0)
        depth = int(self.opts.extra.get("depth") or 0) + 1
        self.opts.extra["depth"] = 0 if depth > deepest or depth > 9 else depth
        self._redraw()

    @on(DataTable.RowHighlighted, "#cgroups-table")
    def _highlight(self, _event: DataTable.RowHighlighted) -> None:
        self._detail()

    @on(DataTable.RowSelected, "#cgroups-table")
    def _row(self, event: DataTable.RowSelected) -> None:
        path = event.row_key.value
        if path is not None and self._state is not None:
            from memtop.ui.screens.cgroup import CgroupScreen

            self.app.push_screen(CgroupScreen(str(path), self._state))
