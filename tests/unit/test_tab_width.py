"""Every pane's tab fits on the one tab line of an 80-column terminal (a wrapped tab line pushed
the bar, and a row of every pane, off the screen)."""

from __future__ import annotations

from rich.text import Text

from memtop.ui.panes import pane_names
from memtop.views import get_view


def test_the_tab_line_fits_80_columns() -> None:
    tabs = [get_view(name) for name in pane_names()]
    labels = [f" {i} {v.tab_title or v.title} " for i, v in enumerate(tabs, 1)]
    width = sum(Text(label).cell_len for label in labels) + len(labels) - 1
    assert width <= 80, (width, labels)
