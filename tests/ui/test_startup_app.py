"""Start-up of the app (Pilot): BPF probes compile after the first frame, and the garbage
collector held from start-up runs again once it is on screen."""

from __future__ import annotations

from typing import Any

import pytest
from support.ui import settle

from memtop.linux import bcc_compat
from memtop.probes.base import BpfProbe
from memtop.records import Record
from memtop.stream.bridge import Bridge


class Recorder(BpfProbe):
    """Notes whether the app had drawn its first frame when it was asked to load."""

    name = "recorder"
    app: Any = None

    def __init__(self) -> None:
        super().__init__()
        self.drawn_at_load: bool | None = None

    def load(self) -> None:
        self.drawn_at_load = self.app.first_frame_s is not None

    def poll(self) -> list[Record]:
        return []


async def test_app_compiles_after_its_first_frame_and_collects_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """As `memtop` starts: BPF probes wait for the first frame (compiling competed with drawing
    it), and the garbage collector, held from start-up, runs again once it is on screen."""
    import gc

    from memtop.probes.procfs import ProcfsProbe
    from memtop.runtime import startup_gc
    from memtop.ui.app import MemtopApp

    monkeypatch.setattr(bcc_compat, "check_can_load", lambda: None)
    probe = Recorder()
    bridge = Bridge([ProcfsProbe(), probe], defer_bpf=True)
    app = MemtopApp(bridge)
    probe.app = app
    startup_gc.hold()
    try:
        assert not gc.isenabled()
        async with app.run_test(size=(160, 40)) as pilot:
            assert await bridge.wait_settled(10)
            await settle(pilot)
            assert probe.drawn_at_load is True
            assert gc.isenabled()
            assert bridge.statuses()["recorder"].state == "attached"
    finally:
        startup_gc.release()
        gc.enable()
