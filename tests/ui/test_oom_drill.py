"""Issue 22, item 6: Enter on an OOM victim shows what the kill's record says of it (comm, its
memory at the kill, the trigger, the limit that fired), not an empty drill-in."""

from __future__ import annotations

from pathlib import Path

from support.ui import settle
from textual.widgets import Static

from memtop.state.oom import OomState
from memtop.stream.replay import Recording, ReplaySource
from memtop.ui.app import MemtopApp
from memtop.ui.screens.process import ProcessScreen
from memtop.views import Options, get_view

PRESSURE = Path(__file__).resolve().parents[1] / "data" / "pressure.jsonl.gz"


async def test_enter_on_a_victim_shows_its_kill() -> None:
    app = MemtopApp(ReplaySource(Recording.load(PRESSURE), at_s=30.0), interval_s=1.0, initial_pane="oom")
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        app.redraw()
        await settle(pilot)
        kill = app.state.get(OomState).kills[0]
        await pilot.press("enter")
        for _ in range(40):
            if isinstance(app.screen, ProcessScreen):
                break
            await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProcessScreen) and screen.pid == kill.victim_pid
        app.redraw()
        await settle(pilot)
        header = str(screen.query_one("#proc-header", Static).render())
        assert kill.victim_comm in header and "OOM-KILLED" in header, header
        doc = get_view("process").document(app.state, Options(pid=kill.victim_pid))
        assert doc["comm"] == kill.victim_comm
        assert doc["oom_kill"]["anon_rss_bytes"] == kill.anon_rss_bytes
        assert doc["oom_kill"]["trigger_comm"] == kill.trigger_comm
