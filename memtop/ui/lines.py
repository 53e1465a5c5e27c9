"""Setting a Static's text without needless work.

``Static.update`` re-renders the widget and asks for a layout pass of the whole screen every time
it is called; panes call it every tick for status lines and headers whose text is mostly the same.
``show_text`` skips an update whose text equals what is shown, and skips the layout pass when the
widget's box does not depend on its content (a height in cells or fractions, a width that is not
``auto``): its size cannot change, only its characters."""

from __future__ import annotations

from rich.text import Text
from textual.css.scalar import Unit
from textual.widgets import Static


def _fixed_box(widget: Static) -> bool:
    h, w = widget.styles.height, widget.styles.width
    return h is not None and h.unit in (Unit.CELLS, Unit.FRACTION) and (w is None or w.unit != Unit.AUTO)


def show_text(widget: Static, text: Text) -> None:
    """Show ``text`` in ``widget`` (a Text: traced-system strings are never markup)."""
    if widget.__dict__.get("_memtop_text") == text:
        return
    widget.__dict__["_memtop_text"] = text
    widget.update(text, layout=not _fixed_box(widget))
