"""Pane widgets, one per pane; each registers itself by subclassing ``Pane`` with a view name."""

from __future__ import annotations

import importlib
import pkgutil

from memtop.ui.panes.base import Pane


def panes() -> list[type[Pane]]:
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")
    return sorted(Pane.registry, key=lambda cls: cls.order)
