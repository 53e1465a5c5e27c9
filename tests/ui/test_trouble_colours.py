"""Issue 22, item 5: a process in trouble does not look like idle bash. Cells past their thresholds
(memtop/views/levels.py) are coloured, NO_COLOR keeps only the weight, the sort column is marked in
the header, and the header's PSI takes its level too."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.text import Text
from support.ui import settle
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from memtop.stream.replay import Recording, ReplaySource
from memtop.ui.app import MemtopApp
from memtop.ui.levels import mono
from memtop.views.header import header_line

PRESSURE = Path(__file__).resolve().parents[1] / "data" / "pressure.jsonl.gz"
HOG_PID = 3620  # rec_hog: 5.3k major faults/s at 30 s


def majflt_cell(app: MemtopApp, pid: int) -> Text:
    table = app.query_one("#processes-table", DataTable)
    cell = table.get_cell(str(pid), "major_faults_per_s")
    assert isinstance(cell, Text)
    return cell


@pytest.mark.parametrize("no_color", [False, True])
async def test_trouble_is_coloured_and_the_sort_marked(
    monkeypatch: pytest.MonkeyPatch, no_color: bool
) -> None:
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    app = MemtopApp(ReplaySource(Recording.load(PRESSURE), at_s=30.0), interval_s=1.0)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        app.redraw()
        await settle(pilot)
        hog = majflt_cell(app, HOG_PID)
        idle = majflt_cell(app, 1)
        assert str(hog.style) == ("bold" if no_color else "bold red"), hog.style
        assert not str(idle.style)  # 0 faults/s: nothing to see
        table = app.query_one("#processes-table", DataTable)
        rss = table.columns[ColumnKey("rss_bytes")].label
        assert rss.plain == "RSS ▼" and any("underline" in str(s.style) for s in rss.spans)
        await pilot.press("P")  # by PID, smallest first: the mark moves and turns
        await settle(pilot)
        assert table.columns[ColumnKey("pid")].label.plain.endswith("▲") or any(
            "underline" in str(s.style) for s in table.columns[ColumnKey("pid")].label.spans
        )
        assert table.columns[ColumnKey("rss_bytes")].label.plain == "RSS"
        # the header's PSI: the recording's some avg10 is ~24 % (past the 10 % warning line)
        head = header_line(app.state)
        psi = [seg for seg in head.rest if seg.text.replace(".", "").isdigit()]
        assert psi and psi[0].style in ("yellow", "bold red"), psi
        assert mono(psi[0].style) == (
            "bold" if no_color and psi[0].style == "bold red" else "" if no_color else psi[0].style
        )
