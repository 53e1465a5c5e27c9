"""The header line names stand-in kernel headers as the source reports them (the UI asks the
source; it never looks at the host itself)."""

from __future__ import annotations

from pathlib import Path

from fakeproc import make_fake_proc
from support import DATA

from memtop.bridge import Bridge
from memtop.probes.procfs import ProcfsProbe
from memtop.replay import Recording, ReplaySource
from memtop.ui.app import MemtopApp


class StandinBridge(Bridge):
    def standin_headers(self) -> str | None:
        return "6.1.0-9-amd64"


async def test_header_names_standin_headers_from_the_source(tmp_path: Path) -> None:
    app = MemtopApp(StandinBridge([ProcfsProbe(make_fake_proc(tmp_path / "proc"))]))
    async with app.run_test(size=(200, 30)) as pilot:
        await pilot.pause(0.3)
        app.redraw()
        await pilot.pause(0.1)
        assert "headers: stand-in 6.1.0-9-amd64" in str(app.query_one("#header").render())


async def test_replay_header_names_no_headers_of_this_host() -> None:
    source = ReplaySource(Recording.load(DATA / "recording-1.0.jsonl.gz"), at_s=0)
    assert source.standin_headers() is None
    app = MemtopApp(source)
    async with app.run_test(size=(200, 30)) as pilot:
        await pilot.pause(0.3)
        app.redraw()
        await pilot.pause(0.1)
        assert "headers:" not in str(app.query_one("#header").render())
