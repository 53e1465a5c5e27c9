"""`memtop --leaks PID` opens on the Leaks pane and asks the source to count PID's allocation calls
first (issue 22, item 10; issue 25, item 3: nothing is traced before the user answers the
preflight); an explicit --pane still wins."""

from __future__ import annotations

from support import FakeSource
from support.ui import settle

from memtop.ui.app import MemtopApp


async def test_leaks_opens_on_the_leaks_pane() -> None:
    source = FakeSource()
    app = MemtopApp(source, leak_pids=[4242])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app.active_name == "leaks" and app.active_pane() is not None
        assert source.measured == [[4242]] and source.traced == []


async def test_an_explicit_pane_wins() -> None:
    app = MemtopApp(FakeSource(), leak_pids=[4242], initial_pane="oom")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app.active_name == "oom"
