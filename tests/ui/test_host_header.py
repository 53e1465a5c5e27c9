"""The header line and the BPF banner show the host facts in the state: in a replay, the recorded
machine's (here made to differ from this one), never the viewer's; and `R` started mid-session
puts the facts the state holds into the recording."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from fakeproc import make_fake_proc
from support import RECORDED_FACTS as RECORDED
from support.ui import drive, settle

from memtop.probes.procfs import ProcfsProbe
from memtop.records import Batch
from memtop.records.host import MemInfo
from memtop.state.host import HostState
from memtop.stream.bridge import Bridge
from memtop.stream.recording import open_recorder
from memtop.stream.replay import Recording, ReplaySource
from memtop.ui.app import MemtopApp


def write_recording(path: Path) -> Path:
    rec = open_recorder(path, interval_s=1.0, mode="procfs")
    mem = MemInfo(8 << 30, 1 << 30, 4 << 30, 0, 0, 0, 0)
    for i in range(3):
        rec.write(Batch(ts_ns=(i + 1) * 10**9, records=((RECORDED, mem) if i == 0 else (mem,))))
    rec.close()
    return path


def shown(app: MemtopApp, selector: str) -> str:
    return str(app.query_one(selector).render())


async def test_replay_header_shows_the_recorded_host(tmp_path: Path) -> None:
    assert RECORDED.hostname != socket.gethostname()
    source = ReplaySource(Recording.load(write_recording(tmp_path / "r.jsonl.gz")), at_s=1)
    app = MemtopApp(source)
    async with app.run_test(size=(250, 30)) as pilot:
        await settle(pilot)
        app.redraw()
        await settle(pilot)
        header = shown(app, "#header")
        assert "host recorded-host (5.10.0-recorded)" in header
        assert "stand-in" not in header  # in the help: it crowded the header
        assert os.uname().release not in header
        assert not app.query_one("#banner").has_class("hidden")
        banner = shown(app, "#banner")
        assert "BPF unavailable: no BPF on the recorded host" in banner and "Fix: it was a test" in banner


async def test_R_mid_session_records_the_facts_in_state(tmp_path: Path) -> None:
    source: Any = Bridge([ProcfsProbe(make_fake_proc(tmp_path / "proc"))])  # Any: Bridge's read-only mode
    app = MemtopApp(source, interval_s=0.2, snapshot_dir=str(tmp_path))
    async with app.run_test(size=(200, 30)) as pilot:
        await settle(pilot)
        assert app.state.get(HostState).facts is not None  # the live source's, at start
        app.state.apply(Batch(app.state.ts_ns, (RECORDED,)))  # what the state knows now
        await pilot.press("R")
        await settle(pilot)
        rec_obj = app.recorder
        assert rec_obj is not None
        await drive(app, pilot)
        await pilot.press("R")
        await settle(pilot)
    rec = Recording.load(rec_obj.path)
    assert rec.synthetic_facts is None
    assert RECORDED in next(rec.batches()).records
