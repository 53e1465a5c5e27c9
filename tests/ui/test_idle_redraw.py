"""What a tick that changed nothing on screen does (issue 36, "Performance": an idle tick should
cost almost nothing): nothing of the header is built again, and what did change is still
drawn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from rich.text import Text
from support.ui import drive, replay_app
from textual.widgets import DataTable, Static

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


async def test_exited_processes_unchanged_are_not_formatted_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The "Recently exited" rows are the same objects from redraw to redraw while their entries
    are (the view's and the pane's): the table neither formats nor compares them again. With
    processes coming and going on the machine that was up to 50 rows every tick."""
    from memtop.state.processes import ProcessesState
    from memtop.ui.panes import base
    from memtop.views.processes import ProcessesView

    looked_at: list[str] = []
    cells_for = base._Filler.cells_for

    def counted(self: base._Filler, row: Mapping[str, Any], k: str) -> list[str]:
        if ":" in k:  # an exited row's key (pid:exited_ns)
            looked_at.append(k)
        return cells_for(self, row, k)

    app = replay_app("processes", at_s=35.0)  # paused after the OOM kill: processes have exited
    async with app.run_test(size=(160, 45)) as pilot:
        await drive(app, pilot, ticks=2)
        assert app.main_screen.query_one("#processes-exited", DataTable).row_count > 0
        pane = app.active_pane()
        assert pane is not None
        view = pane.view
        assert isinstance(view, ProcessesView)
        first = view.document(app.state, view.default_options())["exited"]
        again = view.document(app.state, view.default_options())["exited"]
        assert first and all(a is b for a, b in zip(first, again, strict=True))
        monkeypatch.setattr(base._Filler, "cells_for", counted)
        await drive(app, pilot, ticks=2)
        assert looked_at == []
        # an entry whose lifetime was learnt later (its exit event after the poll): a new row
        entry = app.state.get(ProcessesState).exited[0]
        entry.lifetime_ns += 1_000_000_000
        later = view.document(app.state, view.default_options())["exited"]
        assert later[0] is not first[0] and later[0]["lifetime_ns"] == entry.lifetime_ns
        assert all(a is b for a, b in zip(first[1:], later[1:], strict=True))


async def test_the_sort_mark_is_not_built_again_while_it_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """mark_sort built every column's label each tick to find it the same; it now checks a column
    again only when the sort, the column's width or its label changed."""
    from memtop.ui.panes import base

    built: list[str] = []

    def counting(label: str = "", *args: Any, **kwargs: Any) -> Text:
        built.append(label)
        return Text(label, *args, **kwargs)

    app = replay_app("processes", at_s=20.0)  # paused: every tick the same rows
    async with app.run_test(size=(160, 45)) as pilot:
        await drive(app, pilot, ticks=2)
        monkeypatch.setattr(base, "Text", counting)
        await drive(app, pilot, ticks=3)
        assert built == []
        await pilot.press("P")  # sort by PID: the mark moves
        await drive(app, pilot)
        table = app.main_screen.query_one("#processes-table", DataTable)
        labels = {str(c.key.value): c.label for c in table.ordered_columns}
        assert labels["pid"].plain.startswith("PID") and "underline" in str(labels["pid"].spans)
        assert "underline" not in str(labels["rss_bytes"].spans)
