"""The colour of a level (memtop/views/levels.py). With NO_COLOR set (https://no-color.org) a level
is shown by weight, not hue: bold for bad, nothing for warn."""

from __future__ import annotations

import os

from memtop.views.levels import Level

COLOUR: dict[Level, str] = {"": "", "warn": "yellow", "bad": "bold red"}
MONO: dict[Level, str] = {"": "", "warn": "", "bad": "bold"}


def style(level: Level) -> str:
    """A Rich style string for a cell at ``level``."""
    return (MONO if os.environ.get("NO_COLOR") else COLOUR)[level]


def mono(style_name: str) -> str:
    """A Rich style string as NO_COLOR wants it: only its weight (bold) kept."""
    if not os.environ.get("NO_COLOR") or not style_name:
        return style_name
    return "bold" if "bold" in style_name.split() else ""
