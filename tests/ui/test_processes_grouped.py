"""`C` on the Processes pane groups the processes by memory cgroup under a line of each cgroup's
totals, the cgroups largest first (issue 36, item 7: it only reordered the rows)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable

from memtop.stream.replay import Recording, ReplaySource
from memtop.stream.runner import Runner
from memtop.ui.app import MemtopApp
from memtop.views import Options, get_view
from memtop.views.processes import GROUP_SUMS

RECORDING = Path(__file__).resolve().parents[1] / "data" / "cgroups.jsonl.gz"


async def replayed_state() -> Runner:
    rec = Recording.load(RECORDING)
    source = ReplaySource(rec, at_s=rec.duration_s)
    runner = Runner(source, interval_s=1.0)
    await source.start()
    await runner.tick()
    return runner


async def test_each_cgroup_sums_its_processes_largest_first() -> None:
    runner = await replayed_state()
    view = get_view("processes")
    doc = view.document(runner.state, Options(extra={"group": "cgroup"}))
    groups, rows = doc["groups"], doc["rows"]
    assert len(groups) >= 2 and sum(g["processes"] for g in groups) == len(rows)
    at = 0
    for g in groups:  # the rows come in the groups' order, each group's processes together
        mine = rows[at : at + g["processes"]]
        at += g["processes"]
        assert {r["cgroup"] or "" for r in mine} == {g["cgroup"]}
        for f in ("rss_bytes", "swap_bytes", "anon_bytes"):
            assert g[f] == sum(r[f] for r in mine), f
        assert [r["rss_bytes"] for r in mine] == sorted((r["rss_bytes"] for r in mine), reverse=True)
    sizes = [g["rss_bytes"] for g in groups]
    assert sizes == sorted(sizes, reverse=True)
    by_swap = view.document(runner.state, Options(sort="swap_bytes", extra={"group": "cgroup"}))["groups"]
    assert [g["swap_bytes"] or 0 for g in by_swap] == sorted(
        (g["swap_bytes"] or 0 for g in by_swap), reverse=True
    )
    assert set(GROUP_SUMS) <= set(groups[0])
    # the text snapshot shows each cgroup's line before its processes
    text = view.text(runner.state, Options(extra={"group": "cgroup"}))
    assert text.count("▸ ") == len(groups)
    assert "groups" not in view.document(runner.state, Options())


async def test_the_pane_shows_a_line_of_totals_before_each_cgroup() -> None:
    rec = Recording.load(RECORDING)
    app = MemtopApp(ReplaySource(rec, at_s=rec.duration_s), interval_s=3600, initial_pane="processes")
    async with app.run_test(size=(200, 40)) as pilot:
        await app.tick()
        await pilot.press("C")
        await pilot.pause()
        table = app.query_one("#processes-table", DataTable)
        keys = [str(r.key.value) for r in table.ordered_rows]
        assert keys[0].startswith("cgroup:")
        comm = [c.key.value for c in table.ordered_columns].index("comm")
        first = str(table.get_row_at(0)[comm])
        assert first.startswith("▸ ") and first.endswith(")")
        # Enter on a cgroup's line drills into nothing; on a process it does
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("enter")
        await pilot.pause()
        assert type(app.screen).__name__ != "ProcessScreen"
        await pilot.press("C")  # again: ungrouped, the processes alone
        await pilot.pause()
        assert all(str(r.key.value).isdigit() for r in table.ordered_rows)
