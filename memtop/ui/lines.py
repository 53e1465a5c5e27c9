"""Setting a Static's text without needless work.

``Static.update`` re-renders the widget and asks for a layout pass of the whole screen every time
it is called; panes call it every tick for status lines and headers whose text is mostly the same.
``show_text`` skips an update whose text equals what is shown, and skips the layout pass when the
widget's box does not depend on its content (a height in cells or fractions, a width that is not
``auto``), or when its height is ``auto`` and the new text has as many lines, none wider than
the widget (the header): its size cannot change, only its characters."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.css.scalar import Unit
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from memtop.views.segments import Segment


def _fixed_box(widget: Static) -> bool:
    h, w = widget.styles.height, widget.styles.width
    return h is not None and h.unit in (Unit.CELLS, Unit.FRACTION) and (w is None or w.unit != Unit.AUTO)


def span_at(spans: list[tuple[int, int, str]], x: int) -> str:
    """The name of the (first cell, end cell, name) span that covers cell ``x`` ("" for none)."""
    return next((name for start, end, name in spans if start <= x < end), "")


#: what show_text last put in each widget (so the same text is not laid out again every tick)
_SHOWN: weakref.WeakKeyDictionary[Static, Text] = weakref.WeakKeyDictionary()


def segments_text(segments: Iterable[Segment], text: Text | None = None) -> Text:
    """A view's styled segments (memtop/views/segments.py) as a Text, appended to ``text`` when
    given: the one place a pane's sentence becomes something Rich draws (never markup)."""
    out = Text() if text is None else text
    for seg in segments:
        out.append(seg.text, style=seg.style)
    return out


def _same_height(widget: Static, text: Text) -> bool:
    """Whether ``text`` fills a widget of ``auto`` height (and a width of its own) exactly as
    many lines as it has now: each line fits its width (no wrapping) and there are as many as it
    is high. The header is such a widget: its text changes every tick, its height seldom."""
    w = widget.styles.width
    height, width = widget.content_size.height, widget.content_size.width
    if (w is not None and w.is_auto) or not height or not width:
        return False
    plain = text.plain
    if plain.endswith("\n") or "\t" in plain:  # lines Rich may count or expand otherwise
        return False
    lines = plain.split("\n")
    return len(lines) == height and all(cell_len(line) <= width for line in lines)


def segments_line(segments: Iterable[Segment]) -> Text:
    """A view's segments as lines that never wrap (each cut at the widget's edge, an ellipsis
    marking the cut): a pane's summary and detail boxes."""
    return segments_text(segments, Text(no_wrap=True, overflow="ellipsis"))


def show_text(widget: Static, text: Text) -> None:
    """Show ``text`` in ``widget`` (a Text: traced-system strings are never markup)."""
    if _SHOWN.get(widget) == text:
        return
    _SHOWN[widget] = text
    # a layout re-renders every widget on the screen: only when the widget's box may change
    widget.update(text, layout=not (_fixed_box(widget) or _same_height(widget, text)))


def shown_text(widget: Static) -> Text | None:
    """What show_text last put in ``widget``."""
    return _SHOWN.get(widget)


class KeyLine(Static):
    """The keys that work now, on one line at the bottom: what Textual's ``Footer`` shows, as one
    widget instead of one per key (fewer widgets to build before the first frame).
    Follows focus like the Footer (the screen's active bindings, one entry per action); a click
    on a key presses it."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"keyline--key", "keyline--description"}
    DEFAULT_CSS = """
    KeyLine {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        .keyline--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .keyline--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        #: (first cell, end cell, key) of each key shown, for clicks
        self.keys: list[tuple[int, int, str]] = []

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._show()

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[Any]) -> None:
        if self.is_attached and screen is self.screen:
            self._show()

    def _show(self) -> None:
        key_style = self.get_component_rich_style("keyline--key")
        desc_style = self.get_component_rich_style("keyline--description")
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        keys: list[tuple[int, int, str]] = []
        actions: set[str] = set()
        for _node, binding, enabled, _tooltip in self.screen.active_bindings.values():
            if not binding.show or binding.action in actions:
                continue
            actions.add(binding.action)
            start = text.cell_len
            text.append(
                f" {self.app.get_key_display(binding)} ",
                key_style if enabled else key_style + Style(dim=True),
            )
            text.append(f"{binding.description} ", desc_style if enabled else desc_style + Style(dim=True))
            keys.append((start, text.cell_len, binding.key))
        self.keys = keys
        show_text(self, text)

    def on_click(self, event: events.Click) -> None:
        key = span_at(self.keys, event.x)
        if key:
            self.app.simulate_key(key)


def tab_labels(labels: list[str], active: int, width: int) -> tuple[list[str], int]:
    """The tab labels ("1 Processes") as drawn in ``width`` cells, and the gap between them: padded
    (" 1 Processes ", one cell apart) when they fit, else unpadded two cells apart, then one; then
    the tabs not shown lose letters ("2 vms…") until the line fits; the active tab and every
    number always show. ``width`` 0: no limit."""

    def total(ls: list[str], gap: int) -> int:
        return sum(Text(label).cell_len for label in ls) + gap * (len(ls) - 1)

    padded = [f" {label} " for label in labels]
    if not width or total(padded, 1) <= width:
        return padded, 1
    for gap in (2, 1):
        if total(labels, gap) <= width:
            return labels, gap
    numbers = [label.split(" ", 1)[0] for label in labels]
    titles = [label.split(" ", 1)[1] if " " in label else "" for label in labels]
    longest = max((len(t) for i, t in enumerate(titles) if i != active), default=0)
    for keep in range(longest - 1, 0, -1):
        cut = [
            label if i == active or len(t) <= keep else f"{n} {t[:keep]}…"
            for i, (label, n, t) in enumerate(zip(labels, numbers, titles, strict=True))
        ]
        if total(cut, 1) <= width:
            return cut, 1
    return [label if i == active else n for i, (label, n) in enumerate(zip(labels, numbers, strict=True))], 1


class TabLine(Widget):
    """The panes' tabs: a label per pane and, under it, a bar marking the pane shown. One widget
    instead of Textual's TabbedContent (a tab, a tab pane and their containers per pane: most of
    the widgets on screen at start, each styled and laid out before the first frame). A
    click on a label asks for its pane (:class:`TabLine.Selected`); the number keys do the same. The
    label under the mouse is lit, as Textual's tabs do."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {
        "tabline--tab",
        "tabline--hover",
        "tabline--active",
        "tabline--bar",
        "tabline--highlight",
    }
    DEFAULT_CSS = """
    TabLine {
        width: 1fr;
        height: 2;
        .tabline--tab {
            color: $foreground 50%;
        }
        .tabline--hover {
            color: $foreground;
        }
        .tabline--active {
            color: $foreground;
            text-style: bold;
        }
        .tabline--bar {
            color: $foreground 10%;
        }
        .tabline--highlight {
            color: $block-cursor-background;
        }
    }
    """

    #: the name of the tab marked as shown
    active: reactive[str] = reactive("")
    #: the name of the tab under the mouse ("" for none)
    hovered: reactive[str] = reactive("")

    class Selected(Message):
        """A click on the label of the tab ``name``."""

        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def __init__(self, tabs: Sequence[tuple[str, str]], active: str, **kwargs: Any) -> None:
        """``tabs``: (name, label) per tab, in order; labels are memtop's own, never traced text."""
        super().__init__(**kwargs)
        self.tabs = list(tabs)
        self.set_reactive(TabLine.active, active)
        #: (first cell, end cell, name) of each label as last laid out
        self._spans: list[tuple[int, int, str]] = []
        self._lay_out(0)

    def spans(self) -> list[tuple[int, int, str]]:
        """(first cell, end cell, name) of each label."""
        return list(self._spans)

    def _lay_out(self, width: int) -> list[str]:
        """The labels as drawn in ``width`` cells (0: no limit) and their spans (``tab_labels``)."""
        labels, gap = tab_labels(
            [label for _, label in self.tabs],
            [n for n, _ in self.tabs].index(self.active) if self.active in [n for n, _ in self.tabs] else -1,
            width,
        )
        self._spans = []
        start = 0
        for (name, _), label in zip(self.tabs, labels, strict=True):
            end = start + Text(label).cell_len
            self._spans.append((start, end, name))
            start = end + gap
        self._gap = gap
        return labels

    def render(self) -> Text:
        styles = {
            "tab": self.get_component_rich_style("tabline--tab"),
            "hover": self.get_component_rich_style("tabline--hover"),
            "active": self.get_component_rich_style("tabline--active"),
        }
        labels = Text(no_wrap=True, overflow="ellipsis", end="")
        for (name, _), label in zip(self.tabs, self._lay_out(self.size.width), strict=True):
            kind = "active" if name == self.active else "hover" if name == self.hovered else "tab"
            labels.append(label, styles[kind])
            labels.append(" " * self._gap)
        bar = Text(
            "━" * max(self.size.width, labels.cell_len),
            self.get_component_rich_style("tabline--bar"),
            no_wrap=True,
            end="",
        )
        for start, end, name in self._spans:
            if name == self.active:
                bar.stylize(self.get_component_rich_style("tabline--highlight"), start, end)
        return Text("\n", no_wrap=True, end="").join([labels, bar])

    def on_click(self, event: events.Click) -> None:
        name = span_at(self._spans, event.x)
        if name:
            self.post_message(self.Selected(name))

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self.hovered = span_at(self._spans, event.x)

    def on_leave(self, _event: events.Leave) -> None:
        self.hovered = ""
