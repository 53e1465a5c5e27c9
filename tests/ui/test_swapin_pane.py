"""Swap-in pane on a fake source (Pilot): sorting, drill-in, the system line, untrusted names."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from support.ui import settle

from memtop.core.text import clean
from memtop.probes.base import Probe
from memtop.records import Record
from memtop.records.host import VmStat
from memtop.records.swapin import SwapInfo, SwapinHistogram, SwapinProc
from memtop.stream.bridge import Bridge
from memtop.views import Options, get_view


class FakeSwapin(Probe):
    """Replays scripted records: one list per poll."""

    name = "swapin"
    needs_bpf = False
    cadence_s = 0.0
    script: ClassVar[list[list[Record]]] = []

    def __init__(self) -> None:
        self.i = 0

    def load(self) -> None:
        pass

    def poll(self) -> list[Record]:
        if self.i < len(self.script):
            recs = self.script[self.i]
        else:  # like the real probe: unchanged rows are not sent again
            recs = [r for r in self.script[-1] if not isinstance(r, SwapinProc)] if self.script else []
        self.i += 1
        return list(recs)


def _proc(pid: int, comm: str, n: int, wait: int, wmax: int, files: int = 0) -> SwapinProc:
    return SwapinProc(
        pid=pid,
        comm=comm,
        swapins=n,
        swapin_wait_ns=wait,
        swapin_wait_max_ns=wmax,
        file_major_faults=files,
        swapin_hist=((10, n),) if n else (),
    )


def _script() -> list[list[Record]]:
    hist = SwapinHistogram(swapin_counts=tuple([0] * 10 + [350]), file_counts=(0, 0, 7))
    info = SwapInfo(devices=(("/dev/vdb", "partition", 1 << 30, 1 << 20, -2),))
    vm1 = VmStat(counters=(("pswpin", 1000), ("pswpout", 5000)))
    vm2 = VmStat(counters=(("pswpin", 1400), ("pswpout", 5100)))
    evil = clean("[bold red]x\x1b[2J")  # as the probe hands it over
    first: list[Record] = [
        _proc(11, "alpha", 100, 10**6, 10**5),
        _proc(22, evil, 50, 9 * 10**6, 8 * 10**6, 7),
        hist,
        info,
        vm1,
    ]
    second: list[Record] = [_proc(11, "alpha", 300, 3 * 10**6, 10**5), hist, info, vm2]
    return [first, second]


async def test_pane_sorts_drills_in_and_shows_system_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.widgets import DataTable, Static

    from memtop.ui.app import MemtopApp
    from memtop.ui.panes.base import DrillIn
    from memtop.ui.panes.swapin import SwapinPane

    FakeSwapin.script = _script()
    fake = FakeSwapin()
    source = Bridge([fake])
    app = MemtopApp(source, initial_pane="swapin")
    drilled: list[int] = []
    async with app.run_test(size=(170, 45)) as pilot:
        await settle(pilot)
        fake.i = 0  # the app's start polled it: replay the script from the start
        for _ in range(2):  # two polls, stamped apart by the time they take
            source.publish(source.poll_sync(force=True))
        rate = {r["pid"]: r for r in get_view("swapin").document(app.state, Options())["rows"]}[11][
            "swapins_per_s"
        ]
        assert rate > 0  # 200 more between the two polls
        assert get_view("swapin").document(app.state, Options())["system"]["pswpin_per_s"] > 0
        app.redraw()
        await settle(pilot)
        table = app.query_one("#swapin-table", DataTable)
        keys = [str(r.key.value) for r in table.ordered_rows]
        assert keys == ["22", "11"]  # by total wait, descending
        # untrusted comm shown as plain text, never as markup
        cell = table.get_row("22")[1]
        assert str(cell) == "[bold red]x\\x1b[2J"
        await pilot.press("S")  # by swap-ins
        assert [str(r.key.value) for r in table.ordered_rows] == ["11", "22"]
        await pilot.press("r")
        assert [str(r.key.value) for r in table.ordered_rows] == ["22", "11"]
        system = str(app.query_one("#swapin-system", Static).render())
        assert "/dev/vdb" in system and "pswpin" in system
        hist = str(app.query_one("#swapin-hist", Static).render())
        assert "350" in hist
        pane = app.query_one(SwapinPane)
        orig = pane.post_message

        def capture(msg: Any) -> bool:
            if isinstance(msg, DrillIn):
                drilled.append(msg.pid)
                return True
            return orig(msg)

        monkeypatch.setattr(pane, "post_message", capture)
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("enter")
        await settle(pilot)
        app.paused = True  # no redraw from a timer tick while the app tears down
    assert drilled == [22]
    doc = get_view("swapin").document(app.state, Options())
    row = {r["pid"]: r for r in doc["rows"]}[11]
    assert row["swapins"] == 300 and row["wait_ns_total"] == 3 * 10**6
    assert set(doc) >= {"pane", "rows", "histogram"} and doc["pane"] == "swapin"
    assert set(row) >= {"pid", "comm", "swapins", "wait_ns_total", "wait_ns_max", "file_major_faults"}
    assert doc["histogram"][-1] == {"le_ns": 2**11 - 1, "count": 350}
    txt = get_view("swapin").text(app.state, Options())
    assert "alpha" in txt and "/dev/vdb" in txt
