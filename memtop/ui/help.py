"""The help screen's text (`?`, F1): the keys of what is shown first (the pane, or the drill-in),
then the keys that work everywhere, laid out in as many columns as the terminal's width holds,
never wrapped mid-entry. Keys come from the bindings themselves (their ``tooltip``, else their
description), so a key added to a pane is in its help without another list to keep."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence

from rich.text import Text
from textual.binding import Binding, BindingType

#: Textual key names as a user types them
KEY_NAMES = {
    "less_than_sign": "<",
    "greater_than_sign": ">",
    "slash": "/",
    "question_mark": "?",
    "plus": "+",
    "minus": "-",
    "space": "Space",
    "escape": "Esc",
    "enter": "Enter",
    "tab": "Tab",
    "shift+tab": "Shift-Tab",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
    "left": "←",
    "right": "→",
    "up": "↑",
    "down": "↓",
    "home": "Home",
    "end": "End",
    "ctrl+c": "Ctrl-C",
    **{f"f{n}": f"F{n}" for n in range(1, 13)},
}

Entry = tuple[str, str]  # (keys as typed, what they do)
Section = tuple[str, Sequence[Entry]]


def class_bindings(cls: type) -> list[Binding]:
    """The bindings ``cls`` and its memtop bases declare, the class's own first (Textual's order of
    precedence), each key once (Textual's own classes' bindings are Textual's to document)."""
    out: list[Binding] = []
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("memtop."):
            continue
        for b in Binding.make_bindings(klass.__dict__.get("BINDINGS", ())):
            if b.key not in seen:
                seen.add(b.key)
                out.append(b)
    return out


def entries(bindings: Iterable[BindingType]) -> list[Entry]:
    """One entry per thing done (its keys together: ``> F6``), in the bindings' order; bindings
    without a description (the number keys) are the caller's to describe."""
    return merge(
        (KEY_NAMES.get(b.key, b.key), b.tooltip or b.description)
        for b in Binding.make_bindings(bindings)
        if b.tooltip or b.description
    )


def merge(entries: Iterable[Entry]) -> list[Entry]:
    """Entries that do the same thing as one (``↑ ↓ j k PgUp PgDn  move``), first place kept; the
    keys the widgets handle (arrows) first, then single keys, then named ones."""
    by_text: dict[str, list[str]] = {}
    for keys, text in entries:
        have = by_text.setdefault(text, [])
        have += [k for k in keys.split(" ") if k not in have]
    return [
        (" ".join(sorted(keys, key=lambda k: (k.isascii(), len(k) > 1))), text)
        for text, keys in by_text.items()
    ]


def layout(
    sections: Sequence[Section], width: int, notes: Sequence[str] = (), legend: Sequence[Entry] = ()
) -> Text:
    """The sections' entries in columns ``width`` cells wide at most (one column when only one
    fits), each section under its bold title; then the ``legend`` (mark, meaning), the meanings
    wrapped at word boundaries under themselves; then ``notes``, one per line, cut (never
    wrapped) at the width."""
    out = Text(no_wrap=True, overflow="ellipsis")
    all_entries = [e for _, es in sections for e in es]
    key_w = max((len(k) for k, _ in all_entries), default=1)
    cell_w = max((key_w + 2 + len(t) for _, t in all_entries), default=10)
    gap = 3
    columns = max(1, (width + gap) // (cell_w + gap))
    for i, (title, es) in enumerate(sections):
        if i:
            out.append("\n")
        out.append(title, style="bold")
        out.append("\n")
        rows = -(-len(es) // columns)  # column-major, as `ls` lists: read down, then across
        for r in range(rows):
            line = Text()
            for c in range(columns):
                k = c * rows + r
                if k >= len(es):
                    break
                key, text = es[k]
                if c:
                    line.append(" " * gap)
                line.append(key.ljust(key_w), style="bold")
                line.append("  " + text.ljust(cell_w - key_w - 2))
            line.rstrip()
            line.truncate(width, overflow="ellipsis")
            out.append_text(line)
            out.append("\n")
    if legend:
        out.append("\n")
        out.append_text(legend_lines(legend, width))
    if notes:
        out.append("\n")
        for note in notes:
            line = Text(note, style="dim")
            line.truncate(width, overflow="ellipsis")
            out.append_text(line)
            out.append("\n")
    out.rstrip()
    return out


def legend_lines(legend: Sequence[Entry], width: int) -> Text:
    """``Legend`` in bold, then each mark in bold with its meaning beside it, wrapped under itself
    (a mark longer than half the width stands on a line of its own, its meaning indented below)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append("Legend", style="bold")
    out.append("\n")
    mark_w = min(max(len(m) for m, _ in legend), width // 2)
    indent = mark_w + 2
    for mark, meaning in legend:
        lines = textwrap.wrap(meaning, max(10, width - indent)) or [""]
        if len(mark) > mark_w:
            out.append(mark[:width] + "\n", style="bold")
            lead = " " * indent
        else:
            out.append(mark, style="bold")
            lead = " " * (indent - len(mark))
        for line in lines:
            out.append(lead + line + "\n")
            lead = " " * indent
    return out
