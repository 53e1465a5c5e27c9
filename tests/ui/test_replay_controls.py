"""The TUI on a recording (Pilot): play/pause, step, jump, go to a time, the position indicator,
drill-in and snapshots on replayed data; `R` records a live session to a file that replays."""

from __future__ import annotations

import json
from pathlib import Path

from fakeproc import make_fake_proc
from support import DATA, force_tick
from support.ui import settle, tick_until

from memtop.probes.procfs import ProcfsProbe
from memtop.stream.bridge import Bridge
from memtop.stream.replay import Recording, ReplaySource
from memtop.ui.app import MemtopApp
from memtop.ui.recplay import GotoScreen
from memtop.views import Options, get_view

COMPAT = DATA / "recording-1.0.jsonl.gz"


def header_text(app: MemtopApp) -> str:
    return str(app.query_one("#header").render())


async def test_replay_controls(tmp_path: Path) -> None:
    rec = Recording.load(COMPAT)
    src = ReplaySource(rec, speed=1000)
    app = MemtopApp(src, interval_s=0.25, snapshot_dir=str(tmp_path), snapshot_format="json")
    async with app.run_test(size=(160, 30)) as pilot:
        # at ×1000 a few ticks play it all
        await tick_until(app, pilot, lambda: src.at_end, "the replay at its end")
        assert src.at_end and not src.playing
        assert app.state.batches == len(rec.index) and app.state.ts_ns == rec.last_ts_ns
        assert "REPLAY" in header_text(app) and "end" in header_text(app)
        assert app.state.mode == "replay"

        await pilot.press("left_square_bracket")  # −1 min: back to the start, state rebuilt
        assert app.state.batches == 1 and app.state.ts_ns == rec.first_ts_ns
        await pilot.press("right")
        await pilot.press("right")
        assert app.state.batches == 3 and app.state.ts_ns == rec.index[2]
        await pilot.press("left")
        assert app.state.batches == 2 and app.state.ts_ns == rec.index[1]
        assert not src.playing
        # the state after stepping back equals one built straight to that point
        view = get_view("processes")
        assert view.document(app.state, Options()) == view.document(rec.state_at(rec.index[1]), Options())

        await pilot.press("right_square_bracket")  # +1 min: clamps to the end
        assert app.state.ts_ns == rec.last_ts_ns

        await pilot.press("G")
        await settle(pilot)
        for ch in "2.5":
            await pilot.press({".": "full_stop"}.get(ch, ch))
        await pilot.press("enter")
        await settle(pilot)
        target = rec.ts_at(2.5)
        assert src.pos_ns == target
        assert app.state.ts_ns == max(ts for ts in rec.index if ts <= target)
        assert "0:02.5" in header_text(app)

        src.speed = 1
        await pilot.press("space")
        assert src.playing
        await tick_until(app, pilot, lambda: src.pos_ns > target, "the replay playing on")
        assert src.pos_ns > target
        await pilot.press("space")
        assert not src.playing

        # R does nothing on a replay (nothing live to record)
        await pilot.press("R")
        assert app.recorder is None

        # g on the leaks pane is its growth sort, not the replay's go-to-time (G)
        await pilot.press("6")
        await settle(pilot)
        leaks = app.query_one("#pane-leaks")
        assert leaks.opts.sort == "outstanding_bytes"
        await pilot.press("g")
        await settle(pilot)
        assert leaks.opts.sort == "growth_bytes_per_s" and not isinstance(app.screen, GotoScreen)
        await pilot.press("1")
        await settle(pilot)

        # snapshot on replayed data
        await pilot.press("s")
        await settle(pilot)
        assert app.last_snapshot is not None
        doc = json.loads(app.last_snapshot.read_text())
        assert doc["source"] == "replay" and doc["taken_at_ns"] == app.state.ts_ns


async def test_drill_in_on_replay(tmp_path: Path) -> None:
    rec = Recording.load(COMPAT)
    pid = rec.header["workloads"]["hog"]
    src = ReplaySource(rec, at_s=rec.duration_s)
    app = MemtopApp(src, interval_s=0.25, initial_pid=pid, snapshot_dir=str(tmp_path), snapshot_format="json")
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot)
        from memtop.ui.screens.process import ProcessScreen

        assert isinstance(app.screen, ProcessScreen)
        path = app.write_snapshot("json")
        doc = json.loads(path.read_text())
        assert doc["pid"] == pid
        await pilot.press("left")  # replay keys work on the drill-in screen too
        assert app.state.ts_ns == rec.index[-2]


async def test_R_records_the_live_session(tmp_path: Path) -> None:
    fake = make_fake_proc(tmp_path / "proc")
    bridge = Bridge([ProcfsProbe(fake)])
    app = MemtopApp(bridge, interval_s=0.2, snapshot_dir=str(tmp_path))
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot)
        before = app.state.batches
        await pilot.press("R")
        assert app.recorder is not None
        recorder = app.recorder
        assert "REC" in header_text(app)
        for _ in range(2):  # two polls of every probe, recorded (the timer polls each when due)
            force_tick(app)
        await settle(pilot)
        await pilot.press("R")
        assert app.recorder is None and recorder.closed
        during = recorder.batches
        assert during >= 2 and app.state.batches >= before + during
        files = list(tmp_path.glob("memtop-*.jsonl.gz"))
        assert files == [recorder.path]
        assert not list(tmp_path.glob(".memtop-*.tmp"))
    rec = Recording.load(files[0])
    assert len(rec.index) == during
    # the prelude: probe statuses known before R are in the first batch
    state = rec.state_at(rec.last_ts_ns)
    assert state.statuses["procfs"].state == "attached"
    pids = {r["pid"] for r in get_view("processes").document(state, Options())["rows"]}
    assert pids == {r["pid"] for r in get_view("processes").document(app.state, Options())["rows"]}
