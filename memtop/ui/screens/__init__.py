"""Drill-in screens pushed over the panes (Esc returns to where the user was).

``DrillScreen`` is what the app knows of one (cheap to import: a screen module itself loads when
the user first drills in): it shows one view, redraws from the state on the app's timer and can
be snapshotted like a pane."""

from __future__ import annotations

from typing import Any

from memtop.state import State
from memtop.ui.textual_compat import LeanScreen
from memtop.views import Options, View


class DrillScreen(LeanScreen):
    """A drill-in: its partial updates, as the main screen's, render only the lines they send
    (memtop/ui/textual_compat.py ``LeanCompositor``)."""

    view: View[Any]

    def help_entries(self) -> list[tuple[str, str]]:
        """The help's entries for keys the screen's widgets handle (not in its bindings)."""
        return [("↑ ↓ PgUp PgDn", "move")]

    def options(self) -> Options:
        """What the screen shows now (its snapshot is taken with these)."""
        raise NotImplementedError

    @property
    def snapshot_name(self) -> str:
        raise NotImplementedError

    def refresh_from(self, state: State) -> None:
        """Redraw from ``state`` (the app's timer)."""
