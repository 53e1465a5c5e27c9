"""Every pane's tab fits on the one tab line of an 80-column terminal (a wrapped tab line pushed
the bar, and a row of every pane, off the screen): padded when they fit, closer together, then
the tabs not shown shortened; the active tab's title and every number always show."""

from __future__ import annotations

import pytest
from rich.text import Text

from memtop.ui.lines import tab_labels
from memtop.ui.panes import pane_names
from memtop.views import get_view

LABELS = [f"{i} {get_view(n).tab_title or get_view(n).title}" for i, n in enumerate(pane_names(), 1)]


@pytest.mark.parametrize("width", [60, 80, 100, 160])
@pytest.mark.parametrize("active", range(len(LABELS)))
def test_the_tab_line_fits_and_names_the_active_tab(width: int, active: int) -> None:
    labels, gap = tab_labels(LABELS, active, width)
    assert sum(Text(label).cell_len for label in labels) + gap * (len(labels) - 1) <= width
    assert labels[active].strip() == LABELS[active]
    for i, label in enumerate(labels, 1):
        assert label.strip().split(" ")[0] == str(i)


def test_a_wide_terminal_shows_every_title_in_full() -> None:
    labels, gap = tab_labels(LABELS, 0, 160)
    assert [label.strip() for label in labels] == LABELS and gap == 1
