"""`?` explains the marks and counts of what is shown (the Swap-in pane's `†`, the status line's
`lost N`, Reclaim's `not listed`): a legend under the keys, the pane's own marks first, wrapped
to the width and never cut."""

from __future__ import annotations

import pytest
from support import FakeSource

from memtop.ui.app import HelpScreen, MemtopApp
from memtop.ui.help import legend_lines
from memtop.views import LEGEND, View


def help_lines(app: MemtopApp) -> list[str]:
    assert isinstance(app.screen, HelpScreen)
    return str(app.screen.query_one("#help-body").render()).splitlines()


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
@pytest.mark.parametrize(("pane", "mark"), [("swapin", "†"), ("reclaim", "not listed"), ("processes", "Σ")])
async def test_help_has_the_panes_legend(size: tuple[int, int], pane: str, mark: str) -> None:
    app = MemtopApp(FakeSource(), initial_pane=pane)
    async with app.run_test(size=size) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        lines = help_lines(app)
        legend = lines[lines.index("Legend") + 1 :]
        legend = legend[: legend.index("")] if "" in legend else legend  # the notes follow
        assert any(line.startswith(mark + " ") for line in legend), legend
        assert any(line.startswith("lost N ") for line in legend)  # every pane's marks follow
        # wrapped, never cut: the box is 8 cells narrower than the screen
        assert all(len(line) <= size[0] - 8 and not line.endswith("…") for line in legend), legend


def test_every_meaning_is_whole_after_wrapping() -> None:
    for view in View.registry.values():
        entries = [*view.legend, *LEGEND]
        for width in (30, 72, 150):
            text = legend_lines(entries, width).plain
            assert all(len(line) <= width for line in text.splitlines()), (view.name, width)
            words = " ".join(text.split())
            for mark, meaning in entries:
                assert " ".join(meaning.split()) in words, (view.name, mark)
