"""show_text lays the screen out only when a widget's box may change: the header's text changes
every tick (rates, the clock of a replay), its number of lines seldom (swap and pressure go to
a second line on a narrow terminal). A layout re-renders every widget on the screen."""

from __future__ import annotations

import asyncio
from typing import Any

from rich.text import Text
from support.ui import count_layouts, settle
from textual.app import App, ComposeResult
from textual.widgets import Static

from memtop.ui.lines import show_text


class HeaderApp(App[None]):
    CSS = "#h { height: auto; } #below { height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield Static(id="h")
        yield Static("below", id="below")


def test_a_header_of_as_many_lines_is_shown_without_a_layout(monkeypatch: Any) -> None:
    layouts = count_layouts(monkeypatch)

    async def run() -> list[tuple[int, int, str]]:
        app = HeaderApp()
        out = []
        async with app.run_test(size=(40, 10)) as pilot:
            h = app.query_one("#h", Static)
            show_text(h, Text("one line"))
            await settle(pilot)
            for text in ("another line", "two\nlines", "two\nlines, again", "x" * 50, "back to one"):
                layouts.n = 0
                show_text(h, Text(text))
                await settle(pilot)
                below = app.query_one("#below", Static)
                out.append((layouts.n, h.size.height, f"{below.region.y}"))
        return out

    got = asyncio.run(run())
    # same height: no layout; a second line, a line wrapped, and back to one: laid out, and the
    # widget below moved
    assert [g[0] > 0 for g in got] == [False, True, False, True, True]
    assert [(g[1], g[2]) for g in got] == [(1, "1"), (2, "2"), (2, "2"), (2, "2"), (1, "1")]
