"""What a tick that changed nothing on screen does (issue 36, "Performance": an idle tick should
cost almost nothing): nothing of the header is built again, and what did change is still
drawn."""

from __future__ import annotations

import pytest
from rich.text import Text
from support.ui import drive, replay_app
from textual.widgets import Static

import memtop.ui.app as app_module
from memtop.ui.lines import show_text


def count_header_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts memtop.ui.app writes into the header widget from now on."""
    written: list[str] = []

    def counting(widget: Static, text: Text) -> None:
        if widget.id == "header":
            written.append(text.plain)
        show_text(widget, text)

    monkeypatch.setattr(app_module, "show_text", counting)
    return written


async def test_an_unchanged_header_is_not_built_again(monkeypatch: pytest.MonkeyPatch) -> None:
    app = replay_app("processes", at_s=20.0)  # paused at 20 s: every tick the same state
    async with app.run_test(size=(160, 45)) as pilot:
        await drive(app, pilot, ticks=2)
        written = count_header_writes(monkeypatch)
        await drive(app, pilot, ticks=3)
        assert written == []
        # what the header shows still follows: a step of the replay, a narrower terminal
        replay = app.source.replay
        assert replay is not None
        for n in (1, 2):
            replay.step(1)
            await drive(app, pilot)
            assert len(written) == n
        await pilot.resize_terminal(100, 30)
        await drive(app, pilot)
        assert len(written) == 3
        assert len(set(written)) == 3
        assert str(app.main_screen.query_one("#header", Static).render()) == written[-1]
