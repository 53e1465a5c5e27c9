"""`s` and `R` on a full disk (a real 64 KiB tmpfs as --snapshot-dir): a notice, the dashboard
keeps running, no temporary file is left; with room again the same keys work."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeproc import add_proc, make_fake_proc
from support import fill, small_tmpfs
from support.ui import drive, settle, tick_until

from memtop.probes.procfs import ProcfsProbe
from memtop.stream.bridge import Bridge
from memtop.stream.replay import Recording, ReplaySource
from memtop.ui.app import MemtopApp

COMPAT = Path(__file__).resolve().parent.parent / "data" / "recording-1.0.jsonl.gz"


@pytest.fixture
def small() -> Iterator[Path]:
    with small_tmpfs("64k") as mnt:
        yield mnt


def capture_notices(app: MemtopApp, monkeypatch: Any) -> list[tuple[str, str]]:
    notices: list[tuple[str, str]] = []
    real = app.notify

    def notify(message: str, **kw: Any) -> None:
        notices.append((message, str(kw.get("severity", "information"))))
        real(message, **kw)

    monkeypatch.setattr(app, "notify", notify)
    return notices


def live(proc: Path) -> Any:
    """A live source on a fake /proc (Any: Bridge's read-only ``mode`` vs the Source protocol)."""
    return Bridge([ProcfsProbe(proc)])


def names(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


async def test_snapshot_on_full_disk_is_a_notice(small: Path, monkeypatch: Any) -> None:
    fill(small)
    src = ReplaySource(Recording.load(COMPAT), speed=1000)
    app = MemtopApp(src, interval_s=0.25, snapshot_dir=str(small), snapshot_format="json")
    notices = capture_notices(app, monkeypatch)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        assert app.is_running and app.last_snapshot is None
        assert any("snapshot failed" in m and "No space left" in m and sev == "error" for m, sev in notices)
        assert names(small) == {"filler"}
        (small / "filler").unlink()  # room again: the same key writes the file
        await pilot.press("s")
        await settle(pilot)
        assert app.last_snapshot is not None and app.last_snapshot.parent == small
        assert names(small) == {app.last_snapshot.name}


async def test_R_on_full_disk_is_a_notice(small: Path, tmp_path: Path, monkeypatch: Any) -> None:
    fill(small)
    app = MemtopApp(live(make_fake_proc(tmp_path / "proc")), interval_s=0.2, snapshot_dir=str(small))
    notices = capture_notices(app, monkeypatch)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot)
        await pilot.press("R")
        await settle(pilot)
        assert app.is_running and app.recorder is None
        assert any("cannot record" in m and "No space left" in m for m, _ in notices)
        assert names(small) == {"filler"}
        batches = app.state.batches
        await drive(app, pilot)
        assert app.state.batches > batches  # the dashboard goes on


async def test_R_when_the_disk_fills_keeps_the_samples(small: Path, tmp_path: Path, monkeypatch: Any) -> None:
    proc = make_fake_proc(tmp_path / "proc")
    app = MemtopApp(live(proc), interval_s=0.1, snapshot_dir=str(small))
    notices = capture_notices(app, monkeypatch)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot)
        await pilot.press("R")
        recorder = app.recorder
        assert recorder is not None
        await tick_until(app, pilot, lambda: recorder.batches >= 3, "three batches recorded")
        fill(small)  # the disk fills up while memtop records
        for i in range(100):  # bounded wait for a sample's write to fail
            # new processes with random names: samples that do not compress away in a page's slack
            for j in range(20):
                add_proc(proc, 1000 + 20 * i + j, os.urandom(6).hex(), (100, 0, 0), 0, 1, 0)
            await drive(app, pilot)
            if app.recorder is None:
                break
        assert app.recorder is None and app.is_running
        assert any("stopped after" in m and "--salvage" in m for m, _ in notices)
        assert names(small) == {"filler", recorder.path.name}
        await pilot.press("R")  # and R again says why it cannot record, the app goes on
        await settle(pilot)
        assert app.recorder is None and app.is_running
        assert names(small) == {"filler", recorder.path.name}
    kept = Recording.load(recorder.path, salvage=True)
    assert len(kept.index) == recorder.batches >= 3
