"""The app tells its source which probes feed what is on screen (Source.watch): the pane's, the
drill-in's while it covers the pane, with those the header and the notices need, and everything
while a recording runs. The live source polls the others less often, and a pane shown again has
its probes polled before it is drawn."""

from __future__ import annotations

from pathlib import Path

from support import FakeSource, vmscan_batches
from support.fakes import CountedPolls
from support.ui import drive, settle, wait_until

from memtop.probes.base import UNWATCHED_EVERY
from memtop.records import Record
from memtop.stream.bridge import Bridge
from memtop.ui.app import MemtopApp
from memtop.ui.panes.base import DrillIn
from memtop.ui.screens.process import ProcessScreen
from memtop.views import ALWAYS_SHOWN_PROBES, get_view


def shown(view: str) -> frozenset[str]:
    return frozenset((*get_view(view).probes, *ALWAYS_SHOWN_PROBES))


async def test_the_pane_or_drill_in_shown_is_what_is_watched(tmp_path: Path) -> None:
    source = FakeSource(vmscan_batches())
    app = MemtopApp(source, initial_pane="reclaim", snapshot_dir=str(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        assert source.watched[-1] == shown("reclaim")
        await pilot.press("8")  # the Kernel pane
        await settle(pilot)
        assert source.watched[-1] == shown("kernel")
        assert "kernel" in source.watched[-1]
        app.post_message(DrillIn(101))
        await settle(pilot)
        assert isinstance(app.screen, ProcessScreen)
        app.redraw()  # the tick's redraw
        assert source.watched[-1] == shown("process")
        assert "kernel" not in source.watched[-1]
        await pilot.press("escape")
        await settle(pilot)
        app.redraw()
        assert source.watched[-1] == shown("kernel")
        await pilot.press("R")  # a recording is of every pane
        await settle(pilot)
        app.redraw()
        assert source.watched[-1] is None
        await pilot.press("R")
        await settle(pilot)
        app.redraw()
        assert source.watched[-1] == shown("kernel")


class CountedProcfs(CountedPolls):
    name = "procfs"  # the header's: watched on every pane


class CountedKernel(CountedPolls):
    name = "kernel"  # the Kernel pane's only


async def test_a_hidden_panes_probe_is_polled_less_often_and_at_once_when_shown(tmp_path: Path) -> None:
    """On the live source, through the app's own ticks: the Kernel pane's probe is polled every
    UNWATCHED_EVERY ticks while the Processes pane is shown (the header's procfs every tick),
    at once when its pane is shown (before the pane is drawn: no tick of the clock between),
    every tick while shown, and every tick while a recording runs, whatever pane is shown."""
    procfs, kernel = CountedProcfs(), CountedKernel()
    bridge = Bridge([procfs, kernel], allow_bpf=False)
    now = [1000.0]
    bridge.clock = lambda: now[0]
    app = MemtopApp(bridge, snapshot_dir=str(tmp_path))

    async def polled(ticks: int) -> tuple[int, int]:
        """``ticks`` of the app a (stepped) second apart: how many polls each probe had."""
        before = procfs.polls, kernel.polls
        for _ in range(ticks):
            now[0] += 1.0
            await drive(app, pilot)
        return procfs.polls - before[0], kernel.polls - before[1]

    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        assert app.active_name == "processes"
        # not in the first poll (the first frame does not draw it): at the first tick, then at
        # the 6th, 2 s behind at the 8th
        assert await polled(8) == (8, 1 + 7 // UNWATCHED_EVERY)
        ticks, before = app.ticks_done, kernel.polls
        await pilot.press("8")  # the Kernel pane: no second has passed since the last tick
        await wait_until(pilot, lambda: kernel.polls > before, "the kernel probe's poll")
        await settle(pilot)
        assert kernel.polls == before + 1 and app.ticks_done == ticks + 1
        assert await polled(6) == (6, 6)
        await pilot.press("1")
        await settle(pilot)
        assert await polled(10) == (10, 10 // UNWATCHED_EVERY)
        await pilot.press("R")  # a recording is of every pane: every probe every tick
        await settle(pilot)
        assert app.recorder is not None
        assert await polled(6) == (6, 6)
        await pilot.press("R")
        await settle(pilot)
    await bridge.stop()


class CountedCgroups(CountedPolls):
    """The cgroups probe: the notices' and the Processes pane's CGROUP column, not the header's.
    Notes at each poll whether the app's first frame was on screen."""

    name = "cgroups"

    def __init__(self, app: list[MemtopApp]) -> None:
        super().__init__()
        self.app = app
        self.after_first_frame: list[bool] = []

    def poll(self) -> list[Record]:
        self.after_first_frame.append(self.app[0].first_frame_s is not None)
        return super().poll()


async def test_the_first_frame_waits_only_for_the_probes_it_draws(tmp_path: Path) -> None:
    """The first frame on the Processes pane waits for the header's probe (procfs), not for the
    cgroups probe (the notices', the CGROUP column's): that one is read by a tick the app makes
    as soon as the frame is on screen, not a refresh later (the app's timer is off here, so no
    other tick comes), and every tick after."""
    holder: list[MemtopApp] = []
    procfs, cgroups = CountedProcfs(), CountedCgroups(holder)
    bridge = Bridge([procfs, cgroups], allow_bpf=False)
    app = MemtopApp(bridge, snapshot_dir=str(tmp_path))
    holder.append(app)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_until(pilot, lambda: cgroups.polls > 0, "the cgroups probe's first poll")
        await settle(pilot)
        assert procfs.polls >= 1 and cgroups.after_first_frame == [True]
        assert app.ticks_done == 1
        assert app._watched == shown("processes")  # the notices' probes watched from then on
    await bridge.stop()
