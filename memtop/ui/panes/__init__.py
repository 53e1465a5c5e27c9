"""Pane widgets, one per pane; each registers itself by subclassing ``Pane`` with a view name.

A pane's module is named after its view (``processes.py`` shows the ``processes`` view) and its
tab takes the view's place in the views' order. Modules are imported when their pane is first
built: importing the ones a session does not show at start would cost CPU before the first
frame."""

from __future__ import annotations

import importlib
import pkgutil

from memtop.ui.panes.base import Pane
from memtop.views import TABS


def pane_names() -> list[str]:
    """The panes, in tab order, without importing their modules (nor their views')."""
    modules = {info.name for info in pkgutil.iter_modules(__path__)} - {"base"}
    return [name for name in TABS if name in modules]


def pane_class(name: str) -> type[Pane]:
    """The pane class showing the view ``name`` (its module imported on first use)."""
    importlib.import_module(f"{__name__}.{name}")
    for cls in Pane.registry:
        if cls.view_name == name:
            return cls
    raise LookupError(f"memtop/ui/panes/{name}.py defines no pane with view_name {name!r}")
