"""The process drill-in screen (Pilot, fake /proc, no BPF): opened with enter, sections by number,
the exit of the process while open, escape back with the selection kept, `m` to memleak."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fakeproc import make_fake_proc
from support import force_tick

from memtop.bridge import Bridge, now_ns
from memtop.probes.procfs import ProcfsProbe
from memtop.records import Batch
from memtop.records.process import FaultStack


async def test_enter_opens_screen_esc_returns_and_exit_keeps_data(tmp_path: Path, no_bpf: None) -> None:
    from textual.widgets import DataTable

    from memtop.ui.app import MemtopApp
    from memtop.ui.screens.process import ProcessScreen

    root = make_fake_proc(tmp_path / "proc")
    smaps = (
        "00400000-00401000 r-xp 00000000 08:01 1 /usr/bin/charlie\nSize: 4 kB\nRss: 4 kB\nPss: 2 kB\n"
        "Shared_Dirty: 0 kB\nPrivate_Dirty: 0 kB\nSwap: 0 kB\n"
        "7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \nSize: 1024 kB\nRss: 512 kB\nPss: 512 kB\n"
        "Shared_Dirty: 0 kB\nPrivate_Dirty: 512 kB\nSwap: 256 kB\n"
    )
    (root / "303" / "smaps").write_text(smaps)
    procfs = ProcfsProbe(root)
    bridge = Bridge([procfs])
    app = MemtopApp(bridge)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.3)
        force_tick(app)
        await pilot.pause(0.1)
        table = app.query_one("#processes-table", DataTable)
        assert [int(str(r.key.value)) for r in table.ordered_rows] == [202, 303, 101]
        await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause(0.3)
        screen = app.screen
        assert isinstance(screen, ProcessScreen) and screen.pid == 303
        assert "smaps" in screen._added and "faultstack" not in screen._added  # no BPF here
        # feed what the BPF probes would, and the smaps probe's reading
        app.state.apply(
            Batch(
                now_ns(),
                (
                    FaultStack(
                        303, 7, ("touch_pages+0x25 [charlie] charlie.c:26", "main+0x10 [charlie]"), 900, 3
                    ),
                    FaultStack(303, 9, ("[stack not taken: hash collision]",), 5, 0),
                ),
            )
        )
        force_tick(app)
        await pilot.pause(0.2)
        header = str(screen.query_one("#proc-header").render())
        assert "charlie" in header and "EXITED" not in header
        for key in "12345":
            await pilot.press(key)
            await pilot.pause(0.05)
        assert screen.section == "mappings"
        doc = screen.snapshot_document(app.state)
        assert doc["totals"]["rss_bytes"] == 516 * 1024 and doc["totals"]["swap_bytes"] == 256 * 1024
        await pilot.press("2")
        await pilot.pause(0.1)
        doc = screen.snapshot_document(app.state)
        assert doc["section"] == "fault_stacks" and doc["rows"][0]["frames"][0].startswith("touch_pages+")
        assert doc["rows"][0]["count"] == 903
        assert screen.snapshot_name == "process-303-fault_stacks"
        assert "touch_pages" in screen.snapshot_export(app.state, "txt")
        # the process exits while the screen is open
        shutil.rmtree(root / "303")
        force_tick(app)
        await pilot.pause(0.1)
        force_tick(app)
        await pilot.pause(0.2)
        header = str(screen.query_one("#proc-header").render())
        assert "EXITED at" in header
        doc = screen.snapshot_document(app.state)
        assert doc["exited_ns"] and doc["rows"][0]["count"] == 903  # last data kept
        await pilot.press("1")
        await pilot.pause(0.1)
        hist = screen.snapshot_document(app.state)
        assert hist["section"] == "history" and len(hist["rows"]) >= 1
        await pilot.press("5")  # still usable
        await pilot.pause(0.1)
        assert screen.snapshot_document(app.state)["totals"]["rss_bytes"] == 516 * 1024
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ProcessScreen)
        assert "smaps" not in [p.name for p in bridge.probes]  # detached on the way out
        table = app.query_one("#processes-table", DataTable)
        force_tick(app)
        await pilot.pause(0.1)
        selected = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        assert selected is not None
        # 303 is gone from the live table now; before it left, the cursor had stayed on it
        assert int(str(selected)) in (202, 101)


async def test_esc_keeps_selection(tmp_path: Path, no_bpf: None) -> None:
    from textual.widgets import DataTable

    from memtop.ui.app import MemtopApp
    from memtop.ui.screens.process import ProcessScreen

    root = make_fake_proc(tmp_path / "proc")
    app = MemtopApp(Bridge([ProcfsProbe(root)]))
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.3)
        force_tick(app)
        await pilot.pause(0.1)
        await pilot.press("down", "down", "enter")
        await pilot.pause(0.3)
        assert isinstance(app.screen, ProcessScreen) and app.screen.pid == 101
        force_tick(app)  # the processes pane redraws underneath on the timer
        await pilot.pause(0.1)
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ProcessScreen)
        table = app.query_one("#processes-table", DataTable)
        assert int(str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)) == 101
        assert app.focused is table


async def test_m_opens_memleak_for_this_pid(
    tmp_path: Path, no_bpf: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from memtop.ui.app import MemtopApp
    from memtop.ui.screens.process import ProcessScreen

    calls: list[int] = []
    try:
        leaks = importlib.import_module("memtop.ui.panes.leaks")
    except ImportError:
        leaks = None
    if leaks is not None and hasattr(leaks, "open_leaks"):
        monkeypatch.setattr(leaks, "open_leaks", lambda app, pid: calls.append(pid))
    root = make_fake_proc(tmp_path / "proc")
    app = MemtopApp(Bridge([ProcfsProbe(root)]), initial_pid=202)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.5)
        assert isinstance(app.screen, ProcessScreen) and app.screen.pid == 202
        await pilot.press("m")
        await pilot.pause(0.1)
        if leaks is not None and hasattr(leaks, "open_leaks"):
            assert calls == [202]
        else:
            assert any("not available yet" in str(n.message) for n in app._notifications)
