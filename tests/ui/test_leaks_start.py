"""`memtop --leaks PID` opens on the Leaks pane and asks the source to trace PID (issue 22, item 10);
an explicit --pane still wins."""

from __future__ import annotations

from support import FakeSource

from memtop.ui.app import MemtopApp


async def test_leaks_opens_on_the_leaks_pane() -> None:
    source = FakeSource()
    app = MemtopApp(source, leak_pids=[4242])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.2)
        assert app.active_name == "leaks" and app.active_pane() is not None
        assert source.traced == [[4242]]


async def test_an_explicit_pane_wins() -> None:
    app = MemtopApp(FakeSource(), leak_pids=[4242], initial_pane="oom")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.2)
        assert app.active_name == "oom"
