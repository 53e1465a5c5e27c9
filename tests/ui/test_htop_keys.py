"""htop's habits work (issue 22, item 4): F1 help, F10 quit, F3 search, F6 next sort column, I
inverts, Home / End go to the first / last row (and stay the text cursor's in the filter box)."""

from __future__ import annotations

from pathlib import Path

from fakeproc import make_fake_proc
from support import force_tick
from support.ui import settle
from textual.widgets import DataTable, Input

from memtop.probes.procfs import ProcfsProbe
from memtop.stream.bridge import Bridge
from memtop.ui.app import HelpScreen, MemtopApp


def pids(app: MemtopApp) -> list[int]:
    table = app.query_one("#processes-table", DataTable)
    return [int(str(r.key.value)) for r in table.ordered_rows]


async def test_htop_keys(tmp_path: Path, no_bpf: None) -> None:
    app = MemtopApp(Bridge([ProcfsProbe(make_fake_proc(tmp_path / "proc"))]))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        force_tick(app)
        await settle(pilot)
        table = app.query_one("#processes-table", DataTable)
        assert pids(app) == [202, 303, 101]
        await pilot.press("I")  # inverts, as r does
        assert pids(app) == [101, 303, 202]
        await pilot.press("end")
        assert table.cursor_row == 2
        await pilot.press("home")
        assert table.cursor_row == 0
        pane = app.active_pane()
        assert pane is not None and pane.opts.sort == "rss_bytes"
        await pilot.press("f6")
        assert pane.opts.sort != "rss_bytes"
        await pilot.press("f3")  # search: the filter box takes the keyboard
        await settle(pilot)
        assert isinstance(app.focused, Input)
        await pilot.press(*"abc", "home")
        assert app.focused.cursor_position == 0 and table.cursor_row == 0  # Home stayed in the box
        await pilot.press("escape")
        await pilot.press("f1")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("f10")
        await settle(pilot)
    assert app.return_code == 0
