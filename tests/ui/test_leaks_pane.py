"""Memleak pane on a fake source (Pilot): the stack tree, sorting by growth, the minimum age and the
frame filter."""

from __future__ import annotations

from typing import Any

from support.ui import settle

from memtop.probes.base import Probe
from memtop.records import Record
from memtop.records.leaks import LeakStack, LeakTarget
from memtop.stream.bridge import Bridge, now_ns


class FakeLeakProbe(Probe):
    """Replays a leak (growing), a cache (old, flat) and churn (nothing outstanding)."""

    name = "leaks"
    needs_bpf = False
    cadence_s = 0.01

    def __init__(self) -> None:
        self.n = 0

    def load(self) -> None:
        pass

    def poll(self) -> list[Record]:
        self.n += 1
        t = now_ns()
        n = self.n
        return [
            LeakTarget(pid=42, comm="app", state="tracing", message="11 symbols"),
            LeakStack(
                42,
                1,
                ("leak_here+0xe [app] app.c:10", "main+0x10 [app]"),
                4096 * 100 * n,
                100 * n,
                0,
                0,
                oldest_ts_ns=t - 30 * 10**9,
                age_hist_bytes=(4096, 8192, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
            ),
            LeakStack(
                42,
                2,
                ("cache_fill+0x4 [app]", "main+0x20 [app]"),
                1 << 20,
                16,
                0,
                0,
                oldest_ts_ns=t - 600 * 10**9,
                age_hist_bytes=(0,) * 10 + (1 << 20, 0),
            ),
            LeakStack(
                42,
                3,
                ("churn_here+0x4 [app]", "main+0x30 [app]"),
                64 * 1000 * n,
                1000 * n,
                64 * 1000 * n,
                1000 * n,
            ),
        ]


def tree_labels(app: Any) -> list[str]:
    from textual.widgets import Tree

    tree = app.query_one("#leaks-tree", Tree)
    out = []

    def walk(node: Any) -> None:
        for child in node.children:
            out.append(str(child.label))
            walk(child)

    walk(tree.root)
    return out


async def test_pane_tree_sort_filter() -> None:
    from memtop.ui.app import MemtopApp
    from memtop.ui.panes.base import Pane

    app = MemtopApp(Bridge([FakeLeakProbe()]))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        app.show_pane("leaks")
        for _ in range(3):
            source = app.source
            assert isinstance(source, Bridge)
            source.publish(source.poll_sync(force=True))
            await settle(pilot)
        app.redraw()
        await settle(pilot)
        labels = tree_labels(app)
        assert labels[0].endswith("app [pid 42]")
        sites = [lb for lb in labels if "leak_here" in lb or "cache_fill" in lb or "churn_here" in lb]
        assert any("leak_here" in s for s in sites) and not any(
            "churn_here" in s for s in sites
        )  # 0 B hidden
        pane = app.query_one("#pane-leaks", Pane)
        assert pane.opts.sort == "outstanding_bytes"
        await pilot.press("g")  # growth: the leak first
        app.redraw()
        await settle(pilot)
        main_children = [lb for lb in tree_labels(app) if "main+" in lb]
        assert "main+0x10" in main_children[0]
        await pilot.press("a")  # min age 1 s: all three are older
        await pilot.press("a")  # 5 s
        await pilot.press("a")  # 10 s
        await pilot.press("a")  # 30 s
        await pilot.press("a")  # 60 s: only the cache is that old
        app.redraw()
        await settle(pilot)
        labels = tree_labels(app)
        assert any("cache_fill" in lb for lb in labels) and not any("leak_here" in lb for lb in labels)
        status = str(app.query_one("#leaks-status").render())
        assert "age ≥ 60s" in status
        await pilot.press("slash", *"nosuchframe", "enter")  # the filter box, built on first use
        app.redraw()
        await settle(pilot)
        assert tree_labels(app) == [] and "frame contains nosuchframe" in str(
            app.query_one("#leaks-status").render()
        )
        await pilot.press("escape")
        app.redraw()
        await settle(pilot)
        assert any("cache_fill" in lb for lb in tree_labels(app))
        assert "frame contains" not in str(app.query_one("#leaks-status").render())


async def test_status_says_the_rate_and_what_tracing_costs_while_tracing() -> None:
    """While tracing, the status line gives the allocation rate the probe sees and what tracing
    costs at it (the preflight's estimate, as the text and JSON give it); past a tenth of a core
    it proposes byte sampling."""
    from memtop.core import fmt, leakcost
    from memtop.records import Batch
    from memtop.records.leaks import LeakCalls
    from memtop.ui.app import MemtopApp

    source = Bridge([])
    app = MemtopApp(source)
    target = LeakTarget(pid=42, comm="app", state="tracing", message="11 symbols")
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        app.show_pane("leaks")
        t0 = now_ns()
        calls = 0
        for i, per_s in enumerate((0, 20_000, 60_000)):
            calls += per_s
            source.publish(Batch(t0 + i * 10**9, (target, LeakCalls(calls=calls))))
            app.redraw()
            await settle(pilot)
            status = str(app.query_one("#leaks-status").render())
            if not per_s:
                assert "allocs/s" not in status  # no rate before two counts
                continue
            pct = 100 * leakcost.estimate(per_s, per_s).exact_cpu
            assert f"{fmt.count_h(per_s)} allocs/s, ≈{pct:.1f} % of a core" in status, status
            proposed = f"--sample-bytes {leakcost.PROPOSED_SAMPLE_BYTES}" in status
            assert proposed == (pct > 100 * leakcost.PROPOSE_AT_CPU), status
