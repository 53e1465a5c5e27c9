"""Leaks pane: outstanding allocations as an expandable stack tree (like memray's tree view).

Top-down by default (process → main → … → allocation site), `i` inverts it (allocation site
first). Every node sums the stacks below it: outstanding bytes, allocations, growth over the last
minute and the oldest allocation's age, so a steady leak (old and growing) stands apart from
churn (young, flat) and from a long-lived cache (old, flat). The detail line under the tree shows
the selected node's age histogram.

Allocations are traced on demand: ``memtop --leaks PID[,PID…]`` asks the source for it at start,
the drill-in screen's `m` for its pid (memtop.ui.panes.base.TraceAllocations). Either way the
source first counts the target's allocator calls for a second (the preflight); the pane shows the
rate and what tracing would cost, and `e` (exact), `S` (byte sampling) or `n` (neither) answers it
(memtop.ui.panes.base.ChooseTracing).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from memtop.core import leakcost
from memtop.records.leaks import LeakPreflight
from memtop.state import State
from memtop.state.leaks import LeaksState
from memtop.ui.lines import segments_line, segments_text, show_text
from memtop.ui.panes.base import ChooseTracing, FilterablePane, StatusLine
from memtop.views.leaks import (
    Agg,
    LeaksView,
    build_tree,
    node_detail,
    node_label,
    preflight_doc,
    preflight_text,
    sampling,
    status_segments,
)

MIN_AGES_S = (0.0, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
MIN_SIZES = (1, 4096, 65536, 1 << 20, 16 << 20, 0)


# -- the tree -------------------------------------------------------------------------------------


#: the tree's column header, in label()'s widths (after the top level's toggle: 2 cells)
HEADER = (
    f"  {'OUTSTAND':>8} {'ALLOCS':>6} {'GROWTH':>11} {'OLDEST':>8}  STACK (top-down; "
    "counted since tracing began: allocations made before it are not seen)"
)
#: with byte sampling: bytes are estimates (~), the counts are samples
SAMPLED_HEADER = (
    f"  {'~OUTSTND':>8} {'SAMPLES':>7}{'GROWTH':>11} {'OLDEST':>8}  STACK (top-down; "
    "byte sampling: bytes estimated from the samples counted since tracing began)"
)


class LeaksTree(Tree[tuple[str, ...]]):
    """The stack tree. Space pauses (or plays a replay) as on every other pane; Tree binds it to
    open a node, which Enter already does, and a focused widget's binding would win."""

    BINDINGS = [Binding("space", "app.pause", "Pause", show=False, tooltip="pause the display")]


class LeaksPane(FilterablePane):
    view_name = "leaks"
    quiet_when_absent = True
    filter_hint = "show stacks with a frame containing… (function or module; Enter applies, Esc clears)"

    BINDINGS = [
        Binding("b", "sort_by('outstanding_bytes')", "Bytes", tooltip="sort by outstanding bytes"),
        Binding("c", "sort_by('allocations')", "Count", tooltip="sort by outstanding allocations"),
        Binding("g", "sort_by('growth_bytes_per_s')", "Growth", tooltip="sort by growth per second"),
        Binding("a", "min_age", "Min age", tooltip="next minimum age of allocations shown"),
        Binding("z", "min_size", "Min size", tooltip="next minimum outstanding bytes shown"),
        Binding("i", "invert", "Invert", tooltip="invert the tree: allocating function first"),
        Binding("x", "expand_top", "Expand top", show=False, tooltip="expand the largest stack"),
        # the preflight's answers, while it waits for one
        Binding("e", "choose('exact')", "Exact", tooltip="trace every allocation (the preflight's cost)"),
        Binding("S", "choose('sampled')", "Sampled", tooltip="trace with byte sampling"),
        Binding("B", "choose('budget')", "Budget", tooltip="trace in windows on a 1 % CPU budget"),
        Binding("n", "choose('cancel')", "Cancel", tooltip="do not trace"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inverted = False
        self._lk_state: State | None = None
        self._lk_shape: list[tuple[str, ...]] = []
        self._lk_nodes: dict[tuple[str, ...], TreeNode[tuple[str, ...]]] = {}
        self._lk_aggs: dict[tuple[str, ...], Agg] = {}
        self._lk_expanded: set[tuple[str, ...]] = set()
        self._lk_built = False
        self._lk_asking = False
        self._lk_sampled = False

    def compose(self) -> ComposeResult:
        yield StatusLine(id="leaks-status", classes="pane-status")
        yield Static(id="leaks-preflight", classes="hidden")
        yield Static(Text(HEADER, style="bold", no_wrap=True, overflow="ellipsis"), id="leaks-header")
        tree = LeaksTree("stacks", id="leaks-tree")
        tree.show_root = False
        tree.guide_depth = 2
        yield tree
        yield Static(id="leaks-detail")

    def focus_default(self) -> None:
        self.query_one("#leaks-tree", Tree).focus()

    # -- rendering --------------------------------------------------------------------------------
    def refresh_from(self, state: State) -> None:
        self._lk_state = state
        assert isinstance(self.view, LeaksView)
        rows = self.view.rows(state, self.opts)
        sampled = sampling(state)
        if sampled != self._lk_sampled:  # the labels' figures change meaning: every label again
            self._lk_sampled = sampled
            self._lk_shape = []
            header = SAMPLED_HEADER if sampled else HEADER
            self.query_one("#leaks-header", Static).update(
                Text(header, style="bold", no_wrap=True, overflow="ellipsis")
            )
        status = segments_text(
            status_segments(state, rows, self.opts, self._lk_sampled, self.inverted), self.status_text(state)
        )
        show_text(self.query_one("#leaks-status", StatusLine), status)
        self._show_preflight(state)
        root = build_tree(rows, self.inverted)
        self._update_tree(root)
        self._show_detail()

    def _waiting(self) -> LeakPreflight | None:
        """The preflight waiting for the user's answer, if one is."""
        pf = self._lk_state.get(LeaksState).preflight if self._lk_state is not None else None
        if pf is None or pf.decision or pf.state == "measuring" or self._lk_state is None:
            return None
        return pf if self._lk_state.mode != "replay" else None

    def _show_preflight(self, state: State) -> None:
        box = self.query_one("#leaks-preflight", Static)
        doc = preflight_doc(state.get(LeaksState).preflight)
        box.set_class(doc is None, "hidden")
        if doc is None:
            return
        waiting = self._waiting()
        t = Text(preflight_text(doc), style="bold" if waiting else "")  # plain text, never markup
        if waiting is not None:
            t.append("\n")
            proposal = doc["proposal"]
            for key, what, choice in (
                ("e", "trace every allocation", "exact"),
                ("S", "byte sampling", "sampled"),
                ("B", f"on a {leakcost.DEFAULT_BUDGET:.0%} CPU budget", "budget"),
                ("n", "do not trace", ""),
            ):
                t.append(f" {key} ", style="reverse bold")
                t.append(f" {what}{' (proposed)' if choice and choice == proposal else ''}  ")
        show_text(box, t)
        if (waiting is not None) != self._lk_asking:
            self._lk_asking = waiting is not None
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "choose":
            return self._waiting() is not None
        return super().check_action(action, parameters)

    def action_choose(self, choice: str) -> None:
        pf = self._waiting()
        if pf is None:
            return
        sample = None if choice == "cancel" else (pf.sample_bytes if choice == "sampled" else 0)
        budget = leakcost.DEFAULT_BUDGET if choice == "budget" else 0.0
        self.post_message(ChooseTracing(pf.pids, sample, budget))

    def _ordered(self, agg: Agg) -> list[Agg]:
        sort = self.opts.sort

        def key(a: Agg) -> tuple[float, float, str]:
            if sort == "allocations":
                return (a.allocations, a.outstanding_bytes, a.name)
            if sort == "growth_bytes_per_s":
                return (a.growth_bytes_per_s, a.outstanding_bytes, a.name)
            return (a.outstanding_bytes, a.allocations, a.name)

        return sorted(agg.children.values(), key=key, reverse=self.opts.reverse)

    def _update_tree(self, root: Agg) -> None:
        tree: Tree[tuple[str, ...]] = self.query_one("#leaks-tree", Tree)
        shape: list[tuple[str, ...]] = []
        aggs: dict[tuple[str, ...], Agg] = {}

        def walk(agg: Agg, path: tuple[str, ...]) -> None:
            for child in self._ordered(agg):
                p = path + (child.name,)
                shape.append(p)
                aggs[p] = child
                walk(child, p)

        walk(root, ())
        self._lk_aggs = aggs
        if shape == self._lk_shape and self._lk_nodes:
            for p, node in self._lk_nodes.items():
                node.set_label(segments_line(node_label(aggs[p], self._lk_sampled)))
            return
        # structure or order changed: rebuild, keeping what was expanded and where the cursor was
        cursor = tree.cursor_node.data if tree.cursor_node is not None else None
        self._lk_expanded = (
            {p for p, n in self._lk_nodes.items() if n.is_expanded} if self._lk_built else set()
        )
        if not self._lk_built and shape:
            self._lk_expanded = self._top_path(root)
            self._lk_built = True
        tree.clear()
        self._lk_nodes = {}
        for p in shape:
            parent = tree.root if len(p) == 1 else self._lk_nodes[p[:-1]]
            agg = aggs[p]
            if agg.children:
                node = parent.add(
                    segments_line(node_label(agg, self._lk_sampled)), data=p, expand=p in self._lk_expanded
                )
            else:
                node = parent.add_leaf(segments_line(node_label(agg, self._lk_sampled)), data=p)
            self._lk_nodes[p] = node
        self._lk_shape = shape
        if cursor is not None and cursor in self._lk_nodes:
            target = self._lk_nodes[cursor]
            tree.call_after_refresh(tree.move_cursor, target)

    def _top_path(self, root: Agg) -> set[tuple[str, ...]]:
        """Paths to expand so the biggest stack's allocation site is on screen."""
        out: set[tuple[str, ...]] = set()
        for proc in root.children.values():
            out.add((proc.name,))
        node: Agg = root
        path: tuple[str, ...] = ()
        while node.children:
            node = self._ordered(node)[0]
            path = path + (node.name,)
            out.add(path)
        return out

    def _show_detail(self) -> None:
        tree: Tree[tuple[str, ...]] = self.query_one("#leaks-tree", Tree)
        detail = self.query_one("#leaks-detail", Static)
        node = tree.cursor_node
        agg = self._lk_aggs.get(node.data) if node is not None and node.data is not None else None
        if agg is None:
            show_text(
                detail,
                Text("b/c/g sort · a min age · z min size · / filter · i invert · x expand top", style="dim"),
            )
            return
        show_text(detail, segments_text(node_detail(agg, self._lk_sampled)))

    def _redraw(self) -> None:
        if self._lk_state is not None:
            self.refresh_from(self._lk_state)

    @on(Tree.NodeHighlighted, "#leaks-tree")
    def _highlighted(self, _event: Tree.NodeHighlighted[tuple[str, ...]]) -> None:
        self._show_detail()

    # -- actions ----------------------------------------------------------------------------------
    def action_sort_by(self, key: str) -> None:
        if self.opts.sort == key:
            self.opts.reverse = not self.opts.reverse
        else:
            self.opts.sort, self.opts.reverse = key, True
        self._redraw()

    def action_min_age(self) -> None:
        cur = float(self.opts.extra.get("min_age_s", 0))
        i = MIN_AGES_S.index(cur) if cur in MIN_AGES_S else 0
        self.opts.extra["min_age_s"] = MIN_AGES_S[(i + 1) % len(MIN_AGES_S)]
        self._redraw()

    def action_min_size(self) -> None:
        cur = int(self.opts.extra.get("min_bytes", 1))
        i = MIN_SIZES.index(cur) if cur in MIN_SIZES else 0
        self.opts.extra["min_bytes"] = MIN_SIZES[(i + 1) % len(MIN_SIZES)]
        self._redraw()

    def action_invert(self) -> None:
        self.inverted = not self.inverted
        self._lk_built = False
        self._lk_nodes = {}
        self._redraw()

    def action_expand_top(self) -> None:
        root = Agg("")
        for p, agg in self._lk_aggs.items():
            if len(p) == 1:
                root.children[p[0]] = agg
        for p in self._top_path(root):
            node = self._lk_nodes.get(p)
            if node is not None and node.allow_expand:
                node.expand()
