"""OOM pane on a fake source (Pilot): one notice per kill on any screen, the untrusted victim name
shown literally, the pane's table and document."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from support import OOM_KILL
from support.ui import drive, settle

from memtop.probes.base import Probe
from memtop.records import Record
from memtop.stream.bridge import Bridge
from memtop.views import Options, get_view


class FakeOom(Probe):
    name = "oom"
    needs_bpf = False
    cadence_s = 0.0
    pending: ClassVar[list[Record]] = []

    def load(self) -> None:
        pass

    def poll(self) -> list[Record]:
        out, FakeOom.pending = list(FakeOom.pending), []
        return out


async def test_notice_on_any_screen_and_pane(monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.widgets import DataTable

    from memtop.ui.app import MemtopApp

    source = Bridge([FakeOom()])
    app = MemtopApp(source, initial_pane="processes")
    shown: list[tuple[str, bool]] = []
    orig = app.notify

    def spy(message: str, **kw: Any) -> None:
        shown.append((message, bool(kw.get("markup", True))))
        orig(message, **kw)

    monkeypatch.setattr(app, "notify", spy)
    async with app.run_test(size=(170, 40)) as pilot:
        await settle(pilot)
        FakeOom.pending = [OOM_KILL]
        await drive(app, pilot)  # the app's own timer path, on the processes pane
        assert any("evil" in m and "4242" in m and not markup for m, markup in shown), shown
        n = len(shown)
        await drive(app, pilot)
        assert len(shown) == n  # once per kill
        app.show_pane("oom")
        await settle(pilot)
        app.redraw()
        await settle(pilot)
        table = app.query_one("#oom-table", DataTable)
        assert table.row_count == 1
        row = [str(c) for c in table.get_row_at(0)]
        assert "4242" in row and "global" in row and "[red]evil\\x07" in row
        app.paused = True  # no redraw from a timer tick while the app tears down
    doc = get_view("oom").document(app.state, Options())
    assert doc["pane"] == "oom" and doc["total"] == 1
    assert set(doc["events"][0]) >= {
        "ts_ns",
        "victim_pid",
        "victim_comm",
        "trigger_pid",
        "trigger_comm",
        "scope",
        "total_vm_bytes",
        "anon_rss_bytes",
        "file_rss_bytes",
        "shmem_rss_bytes",
        "uid",
        "oom_score_adj",
    }


async def test_systemd_oomd_line_says_why_or_what_it_watches() -> None:
    """With oomctl installed, the pane says in one line why systemd-oomd's account is missing, then
    (once it answers) what it watches; the text file gives its monitored cgroups."""
    from textual.widgets import Static

    from memtop.records.oom import OomdMonitored
    from memtop.ui.app import MemtopApp
    from memtop.views.oom import OomView

    source = Bridge([FakeOom()])
    app = MemtopApp(source, initial_pane="oom")
    why = "oomctl dump failed (systemd-oomd not running?): Failed to connect system bus: No such file or directory"
    async with app.run_test(size=(170, 40)) as pilot:
        await settle(pilot)
        FakeOom.pending = [OomdMonitored(status=why)]
        await drive(app, pilot)
        app.redraw()
        await settle(pilot)
        risk = app.query_one("#oom-risk", Static)
        assert str(risk.render()) == f"systemd-oomd (oomctl): {why}"
        FakeOom.pending = [
            OomdMonitored(
                status="",
                swap_used_limit_percent=90.0,
                pressure_limit_percent=60.0,
                pressure_duration_s=20.0,
                monitored=(("/[b]app.slice", "pressure", 50.0, 30.0), ("/user.slice", "swap", None, None)),
            )
        ]
        await drive(app, pilot)
        app.redraw()
        await settle(pilot)
        assert str(app.query_one("#oom-risk", Static).render()) == (
            "systemd-oomd (oomctl) kills on swap used over 90.00%, memory pressure over 60.00% for 20s "
            "by default; 2 cgroups monitored:"
        )
        app.paused = True
    view = OomView()
    text = view.text(app.state, Options())
    assert "  /[b]app.slice: memory pressure over 50.00% for 30s\n" in text  # literal, not markup
    assert "  /user.slice: swap (killed first when swap use is over the limit)\n" in text
