"""The cgroups pane as a user drives it, on the cgroups recording: fold and unfold, depth, sort,
filter, Enter into a cgroup and back; and Processes grouped by cgroup."""

from __future__ import annotations

from pathlib import Path

from support.ui import settle
from textual.widgets import DataTable

from memtop.stream.replay import Recording, ReplaySource
from memtop.ui.app import MemtopApp
from memtop.ui.screens.cgroup import CgroupScreen

RECORDING = Path(__file__).resolve().parents[1] / "data" / "cgroups.jsonl.gz"


def keys(app: MemtopApp, table_id: str = "#cgroups-table") -> list[str]:
    return [str(r.key.value) for r in app.query_one(table_id, DataTable).ordered_rows]


async def test_fold_depth_filter_and_drill_in() -> None:
    rec = Recording.load(RECORDING)
    app = MemtopApp(ReplaySource(rec, at_s=rec.duration_s), interval_s=1.0, initial_pane="cgroups")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.redraw()
        await settle(pilot)
        rows = keys(app)
        assert rows[0] == "/" and len(rows) >= 3
        limited = next(k for k in rows if k.startswith("/memtop-test-"))
        table = app.query_one("#cgroups-table", DataTable)
        # fold the root: only it stays; unfold
        await pilot.press("h")
        assert keys(app) == ["/"]
        await pilot.press("l")
        assert keys(app) == rows
        # depth: the root's children only, then every level again
        await pilot.press("D")
        assert all(k == "/" or k.count("/") == 1 for k in keys(app)) and len(keys(app)) < len(rows)
        for _ in range(10):
            await pilot.press("D")
            if keys(app) == rows:
                break
        assert keys(app) == rows
        # filter: the match and its ancestors
        await pilot.press("slash", *limited[1:], "enter")
        await settle(pilot)
        assert keys(app) == ["/", limited]
        await pilot.press("escape")
        # Enter on the cgroup near its limit: its drill-in, with its workload's processes
        table.move_cursor(row=keys(app).index(limited))
        table.focus()
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CgroupScreen) and screen.path == limited
        procs = screen.query_one("#cg-procs", DataTable)
        assert procs.row_count >= 1
        comms = {str(procs.get_row_at(i)[1]) for i in range(procs.row_count)}
        assert "rec_hog" in comms
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, CgroupScreen)


async def test_processes_group_by_cgroup() -> None:
    rec = Recording.load(RECORDING)
    app = MemtopApp(ReplaySource(rec, at_s=rec.duration_s), interval_s=1.0, initial_pane="processes")
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        app.redraw()
        await settle(pilot)
        await pilot.press("C")
        await settle(pilot)
        pane = app.active_pane()
        assert pane is not None and pane.opts.extra.get("group") == "cgroup"
        table = app.query_one("#processes-table", DataTable)
        col = [c.key.value for c in table.ordered_columns].index("cgroup")
        groups = [str(table.get_row_at(i)[col]) for i in range(table.row_count)]
        # each cgroup's processes together: a group never comes back after another began
        seen: list[str] = []
        for g in groups:
            if not seen or seen[-1] != g:
                assert g not in seen, groups
                seen.append(g)
        assert len(seen) >= 2
        await pilot.press("C")
        assert pane.opts.extra.get("group") == ""


async def test_enter_in_the_filter_gives_the_rows_back_and_selects_the_first_match() -> None:
    """Issue 22, item 11: after Enter the filter box hides (the status line shows the filter) and
    the cursor is on the first match."""
    from textual.widgets import Input

    rec = Recording.load(RECORDING)
    app = MemtopApp(ReplaySource(rec, at_s=rec.duration_s), interval_s=1.0, initial_pane="processes")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.query_one("#processes-table", DataTable)
        table.move_cursor(row=min(3, table.row_count - 1))
        await pilot.press("slash", *"rec_", "enter")
        await settle(pilot)
        box = app.query_one("#processes-filter", Input)
        assert not box.display or box.has_class("hidden")
        assert table.cursor_row == 0 and table.row_count >= 1
        first = str(table.get_row_at(0)[1])
        assert "rec_" in first, first
        await pilot.press("slash")  # opens again with the filter in it
        await settle(pilot)
        assert box.value == "rec_" and not box.has_class("hidden")


async def test_the_status_line_says_how_many_cgroups_were_left_out() -> None:
    """Past the cgroups probe's limit, the status line says how many it did not read."""
    from support import FakeSource

    from memtop.records import Batch, ProbeStatus
    from memtop.records.cgroups import CgroupLayout, CgroupPoll, CgroupSample

    recs = (
        ProbeStatus("cgroups", "attached", "test"),
        CgroupLayout("v1", "/sys/fs/cgroup/memory", 1, "", False),
        CgroupSample("/", 1, usage_bytes=1 << 30),
        CgroupSample("/big", 1, usage_bytes=1 << 29),
        CgroupPoll(2, over_limit=1234, max_cgroups=5000),
    )
    src = FakeSource([Batch(1_000_000_000, recs)])
    app = MemtopApp(src, interval_s=1.0, initial_pane="cgroups")
    async with app.run_test(size=(200, 40)) as pilot:
        await app.runner.tick()
        app.redraw()
        await pilot.pause()
        status = str(app.query_one("#cgroups-status").render())
        assert "1,234 more past the limit of 5,000 not read (the largest kept)" in status, status
