"""How memtop looks: every pane and the drill-in screen, drawn by the real app replaying
tests/data/pressure.jsonl.gz (made under real memory pressure: reclaim, swap-ins, an OOM kill, a
leaking process), compared with the SVGs in __snapshots__/ at 80×24, 100×30 and 160×45 (every pane and every
section of the drill-in).

The position is fixed and paused (``--at`` AT_S), so nothing on screen depends on the clock. After
a change that is meant to alter the look, review the new pictures and accept them with
``.venv/bin/python -m pytest tests/ui/test_snapshots.py --snapshot-update``; the report of a failing
run (snapshot_report.html) shows old and new side by side."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from support.ui import recording, replay_app, settle, wait_for_screen
from textual.pilot import Pilot

from memtop.ui.app import MemtopApp
from memtop.ui.panes import pane_names
from memtop.views.process import SECTIONS

DATA = Path(__file__).resolve().parents[1] / "data"
PRESSURE = DATA / "pressure.jsonl.gz"
#: seconds into the recording: after the OOM kill (24.8 s), with reclaim and swap-ins going on
AT_S = 30.0
#: the workload the recording's header names (the process with the most swap), for the drill-in
HOG_PID = 3620
SIZES = [(80, 24), (100, 30), (160, 45)]
SIZE_IDS = [f"{w}x{h}" for w, h in SIZES]

SnapCompare = Callable[..., bool]


def own_recording(pane: str | None) -> Path | None:
    """A pane newer than the pressure recording is drawn from its own, tests/data/<pane>.jsonl.gz
    (made by scripts/make_recording.py), at its end."""
    p = DATA / f"{pane}.jsonl.gz"
    return p if pane and p.exists() else None


def make_app(pane: str | None = None, pid: int | None = None) -> MemtopApp:
    own = own_recording(pane)
    if own is not None:
        rec = recording(own)
        return replay_app(pane, rec.duration_s, rec=rec, initial_pid=pid)
    return replay_app(pane, AT_S, initial_pid=pid)


async def prepared(pilot: Pilot[Any], screen: str | None = None) -> None:
    """Once the screen asked for is up, drop the OOM kill's notice (the first tick would show it
    for 10 s) and draw the state as it is, all messages handled: the picture to compare."""
    app = pilot.app
    assert isinstance(app, MemtopApp)
    if screen is not None:
        await wait_for_screen(pilot, screen)
    for sub in app.state.subs.values():
        pop = getattr(sub, "pop_notices", None)
        if callable(pop):
            pop()
    app.clear_notifications()
    app.redraw()
    await settle(pilot)


def run_before(screen: str | None = None) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def before(pilot: Pilot[Any]) -> None:
        await prepared(pilot, screen)

    return before


def test_the_recording_holds_what_the_pictures_show() -> None:
    """The fixed position shows an OOM kill, reclaim, swap-ins and leaks, and the drill-in pid."""
    rec = recording()
    assert rec.header.get("workloads", {}).get("hog") == HOG_PID
    state = rec.state_at(rec.ts_at(AT_S))
    from memtop.state.leaks import LeaksState
    from memtop.state.oom import OomState
    from memtop.state.reclaim import ReclaimState
    from memtop.state.swapin import SwapinState

    assert state.get(OomState).kills
    assert state.get(ReclaimState).pids
    assert HOG_PID in state.get(SwapinState).rows
    assert state.get(LeaksState).stacks


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("pane", pane_names())
def test_pane(snap_compare: SnapCompare, pane: str, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(pane=pane), terminal_size=size, run_before=run_before())


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("section", SECTIONS)
def test_drill_in(snap_compare: SnapCompare, section: str, size: tuple[int, int]) -> None:
    app = make_app(pid=HOG_PID)

    async def before(pilot: Pilot[Any]) -> None:
        await prepared(pilot, "ProcessScreen")
        await pilot.press(str(SECTIONS.index(section) + 1))
        await prepared(pilot, "ProcessScreen")

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_the_cgroups_recording_holds_what_its_pictures_show() -> None:
    """A memcg at its limit with reclaim, swap and PSI, and an OOM kill in another."""
    path = own_recording("cgroups")
    assert path is not None
    rec = recording(path)
    from memtop.views import Options, get_view

    doc = get_view("cgroups").document(rec.state_at(rec.ts_at(rec.duration_s)), Options())
    limited = [r for r in doc["rows"] if r["limit_bytes"] is not None]
    assert any(r["limit_pct"] > 95 and r["reclaim_episodes"] and r["psi_some_total_us"] for r in limited)
    assert any(r["oom_kills"] for r in limited)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_cgroup_drill_in(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    from memtop.ui.screens.cgroup import CgroupScreen
    from memtop.views import Options, get_view

    app = make_app(pane="cgroups")

    async def before(pilot: Pilot[Any]) -> None:
        await prepared(pilot)
        rows = get_view("cgroups").document(app.state, Options())["rows"]
        target = max((r for r in rows if r["limit_pct"] is not None), key=lambda r: r["limit_pct"])["path"]
        app.push_screen(CgroupScreen(target, app.state))
        await prepared(pilot, "CgroupScreen")

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_the_kernel_recording_holds_what_its_pictures_show() -> None:
    """The dentry cache growing, traced: its call site, and page allocations by order."""
    path = own_recording("kernel")
    assert path is not None
    rec = recording(path)
    from memtop.views import Options, get_view

    doc = get_view("kernel").document(rec.state_at(rec.ts_at(rec.duration_s)), Options())
    dentry = next(r for r in doc["rows"] if r["name"] == "dentry")
    assert dentry["delta_bytes"] > 0 and dentry["top_site"]
    assert doc["breakdown"]["sum_bytes"] == doc["breakdown"]["total_bytes"]
    assert doc["pages"]["page_alloc"]["orders"]


def test_the_shared_recording_holds_what_its_pictures_show() -> None:
    """A segment attached and one orphaned, memfds and a /dev/shm file, hugetlb and THP pages, a
    madvise for huge pages and a compaction's migrations."""
    path = own_recording("shared")
    assert path is not None
    rec = recording(path)
    from memtop.views import Options, get_view

    doc = get_view("shared").document(rec.state_at(rec.ts_at(rec.duration_s)), Options())
    assert sorted(r["orphan"] for r in doc["rows"]) == [False, True]
    assert doc["posix"]["memfds"] and doc["posix"]["files"]
    assert any(p["hugetlb_bytes"] and p["anon_huge_bytes"] for p in doc["huge"]["processes"])
    assert doc["huge"]["madvise"] and doc["migrate"]["reasons"]
