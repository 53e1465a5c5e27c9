"""Stand-in kernel headers are named in the help (`?`) as the state's host facts say (the UI never
looks at the host itself, nor asks the source), not in the header line, which they crowded."""

from __future__ import annotations

from pathlib import Path

from fakeproc import make_fake_proc
from support import DATA
from support.ui import settle

from memtop.probes.procfs import ProcfsProbe
from memtop.records import Batch
from memtop.records.host import HostFacts
from memtop.stream.bridge import Bridge
from memtop.stream.replay import Recording, ReplaySource
from memtop.ui.app import MemtopApp


async def test_help_names_standin_headers_from_the_state_the_header_does_not(tmp_path: Path) -> None:
    app = MemtopApp(Bridge([ProcfsProbe(make_fake_proc(tmp_path / "proc"))]))
    async with app.run_test(size=(200, 30)) as pilot:
        await settle(pilot)
        standin = HostFacts("6.18.0-test", "h", headers_kind="standin", headers_version="6.1.0-9-amd64")
        app.state.apply(Batch(app.state.ts_ns, (standin,)))
        app.redraw()
        await settle(pilot)
        assert "stand-in" not in str(app.query_one("#header").render())
        await pilot.press("question_mark")
        await settle(pilot)
        assert "headers: stand-in 6.1.0-9-amd64" in str(app.screen.query_one("#help-body").render())


async def test_replay_header_names_no_headers_of_this_host() -> None:
    source = ReplaySource(Recording.load(DATA / "recording-1.0.jsonl.gz"), at_s=0)
    app = MemtopApp(source)
    async with app.run_test(size=(200, 30)) as pilot:
        await settle(pilot)
        app.redraw()
        await settle(pilot)
        assert "headers:" not in str(app.query_one("#header").render())
