"""`+` and `-` change the refresh interval where it lives, in the Runner: the timer that ticks it,
the header and a recording started afterwards all read the same value there (the app keeps no copy
of its own that the runner would not see)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakeproc import make_fake_proc

from memtop.probes.procfs import ProcfsProbe
from memtop.stream.bridge import Bridge
from memtop.stream.replay import Recording
from memtop.stream.runner import STEP_MAX_S, STEP_MIN_S
from memtop.ui.app import MemtopApp


async def test_plus_and_minus_change_the_runner_s_interval(tmp_path: Path) -> None:
    source: Any = Bridge([ProcfsProbe(make_fake_proc(tmp_path / "proc"))])  # Any: Bridge's read-only mode
    app = MemtopApp(source, interval_s=1.0, snapshot_dir=str(tmp_path))
    async with app.run_test(size=(200, 30)) as pilot:
        await pilot.press("plus")
        assert app.runner.interval_s == 1.5
        assert "every 1.5s" in str(app.query_one("#header").render())
        assert not hasattr(app, "interval_s")  # one owner
        await pilot.press("R")  # a recording made now says how often its batches came
        rec_obj = app.recorder
        assert rec_obj is not None
        await pilot.press("R")
        for _ in range(10):
            await pilot.press("minus")
        assert app.runner.interval_s == STEP_MIN_S
        assert "every 0.25s" in str(app.query_one("#header").render())
    assert Recording.load(rec_obj.path).interval_s == 1.5


def test_keys_keep_the_interval_within_their_range() -> None:
    from support import FakeSource

    from memtop.stream.runner import Runner

    runner = Runner(FakeSource([]), interval_s=60.0)  # `--interval 60`: beyond what the keys reach
    assert runner.change_interval(-0.5) == STEP_MAX_S
    assert runner.change_interval(+0.5) == STEP_MAX_S
    runner = Runner(FakeSource([]), interval_s=0.1)
    assert runner.change_interval(+0.5) == 0.6
    assert runner.change_interval(-1.0) == STEP_MIN_S
