"""Honest when blind (issue 22, item 8): a pane whose probe is not running says so, in the TUI and
in text, and shows what /proc/vmstat gives instead; the leaks pane, whose probe runs only when
asked, does not complain."""

from __future__ import annotations

from support import FakeSource
from support.ui import drive, settle

from memtop.records import Batch, ProbeStatus
from memtop.records.host import VmStat
from memtop.ui.app import MemtopApp
from memtop.ui.lines import shown_text
from memtop.ui.panes.base import StatusLine
from memtop.views import get_view


def vmstat(ts_s: int, pswpin: int, oom_kill: int) -> Batch:
    counters = (("pswpin", pswpin), ("pgmajfault", pswpin * 2), ("oom_kill", oom_kill))
    return Batch(ts_s * 10**9, (ProbeStatus("procfs", "attached"), VmStat(counters)))


BATCHES = [vmstat(1, 1000, 3), vmstat(2, 8500, 4)]  # 7.5k swap-ins in a second, one OOM kill


async def test_a_blind_pane_says_so_and_shows_what_proc_gives() -> None:
    app = MemtopApp(FakeSource(list(BATCHES), mode="procfs"), initial_pane="swapin")
    async with app.run_test(size=(160, 30)) as pilot:
        await drive(app, pilot, ticks=len(BATCHES))
        line = str(shown_text(app.query_one("#swapin-status", StatusLine)))
        assert "swapin: not running in this session" in line
        assert "from /proc/vmstat (machine-wide): swap-ins 7500/s, major faults 15k/s" in line
        assert "0 swap-ins" not in line  # nothing measured is not zero
        app.show_pane("oom")
        await settle(pilot)
        app.redraw()
        await settle(pilot)
        line = str(shown_text(app.query_one("#oom-status", StatusLine)))
        assert "oom: not running" in line and "OOM kills 1 since start" in line
        app.show_pane("leaks")
        await settle(pilot)
        app.redraw()
        await settle(pilot)
        assert "not running" not in str(shown_text(app.query_one("#leaks-status", StatusLine)))


def test_text_says_it_too() -> None:
    from memtop.state import State

    state = State(mode="procfs")
    for b in BATCHES:
        state.apply(b)
    view = get_view("swapin")
    text = view.text(state, view.default_options())
    assert "note: swapin absent" in text and "swap-ins 7500/s" in text
    state.apply(Batch(3 * 10**9, (ProbeStatus("swapin", "attached"),)))
    assert view.blind_note(state) == ""  # measuring: nothing to stand in for
