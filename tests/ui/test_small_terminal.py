"""At 80×24 every pane shows its most important row first and whole: the pressure recording's
workload (the top staller and swap waiter, the OOM victim, the leaker, the cgroup at its limit, the
only reclaiming origin) on the screen, with the columns that say it is in trouble on the same line,
without scrolling. What the line must hold comes from the pane's own view (its document and
columns), so the test follows the figures, not a copy of them."""

from __future__ import annotations

from typing import Any

import pytest
from support.ui import recording
from test_processes_pane import screen_lines
from test_snapshots import AT_S, HOG_PID, make_app, prepared

from memtop.ui.app import MemtopApp
from memtop.views import Options, get_view

SIZE = (80, 24)
LEAK_PID = 3622
#: the OOM victim of the pressure recording (its workload, re-started after the kill)
VICTIM_PID = 7651

#: pane -> (the row's key field, its value (None: the top row of the cgroup at its limit), the
#: columns that must show on its line)
WHAT: dict[str, tuple[str, Any, tuple[str, ...]]] = {
    "processes": (
        "pid",
        HOG_PID,
        ("pid", "comm", "swap_bytes", "major_faults_per_s", "reclaim_stall_ns", "swapin_wait_ns"),
    ),
    "reclaim": ("pid", HOG_PID, ("pid", "comm", "events", "total_ns", "max_ns")),
    "swapin": ("pid", HOG_PID, ("pid", "command", "swapins", "wait_ns_total", "wait_ns_avg", "wait_ns_max")),
    "vmscan": (
        "origin",
        "memcg",
        ("origin", "pages_scanned", "pages_reclaimed", "scanned_per_s", "efficiency_pct"),
    ),
    "oom": ("victim_pid", VICTIM_PID, ("age_ns", "victim_pid", "victim_comm", "scope", "anon_rss_bytes")),
    "leaks": ("pid", LEAK_PID, ()),
    "cgroups": ("path", None, ("tree", "usage_bytes", "limit_bar")),
}


def expected_cells(app: MemtopApp, pane: str) -> list[str]:
    """The cells of the workload's row, as the pane's columns format them, in column order."""
    key, value, wanted = WHAT[pane]
    view = get_view(pane)
    doc = view.document(app.state, view.default_options())
    rows = view.table_rows(doc)
    if value is None:  # the cgroup nearest its limit
        row = max((r for r in rows if r.get("limit_pct") is not None), key=lambda r: r["limit_pct"])
    else:
        row = next(r for r in rows if r.get(key) == value)
    cols = {c.key: c for c in view.columns}
    return [cols[k].cell(row) for k in cols if k in wanted]


@pytest.mark.parametrize("pane", list(WHAT))
async def test_the_workload_row_is_on_an_80x24_screen(pane: str) -> None:
    app = make_app(pane=pane)
    async with app.run_test(size=SIZE) as pilot:
        await prepared(pilot)
        lines = screen_lines(app)
        if pane == "leaks":  # a tree, not a table: the traced process is its root
            assert any(f"[pid {LEAK_PID}]" in line and "rec_leak" in line for line in lines), lines
            return
        cells = expected_cells(app, pane)
        assert cells and all(c.strip() for c in cells), cells

        def holds(line: str) -> bool:
            at = 0
            for cell in cells:
                at = line.find(cell.strip(), at)
                if at < 0:
                    return False
                at += len(cell.strip())
            return True

        assert any(holds(line) for line in lines[: SIZE[1] - 1]), (cells, lines)


def test_the_positions_hold_the_rows_looked_for() -> None:
    """The recording at AT_S has the rows this test looks for (else it would test nothing)."""
    rec = recording()
    state = rec.state_at(rec.ts_at(AT_S))
    doc = get_view("processes").document(state, Options())
    hog = next(r for r in doc["rows"] if r["pid"] == HOG_PID)
    assert hog["major_faults_per_s"] > 1000 and hog["reclaim_stall_ns"] and hog["swapin_wait_ns"]
    oom = get_view("oom")
    assert any(k["victim_pid"] == VICTIM_PID for k in oom.table_rows(oom.document(state, Options())))
