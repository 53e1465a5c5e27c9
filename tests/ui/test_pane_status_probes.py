"""Each pane's status line names the probes its view declares (``View.probes``), in that order, and
no other: the panes keep no list of their own."""

from __future__ import annotations

from typing import Any

import pytest

from memtop.probes.registry import PROBES
from memtop.records import Batch, ProbeStatus
from memtop.state import State
from memtop.ui.panes import pane_class, pane_names
from memtop.views import View, views


def every_probe_attached() -> State:
    state = State(mode="replay")
    state.apply(Batch(ts_ns=1, records=tuple(ProbeStatus(probe=name, state="attached") for name in PROBES)))
    return state


def named(line: str) -> list[str]:
    return [part.split(":")[0] for part in line.split("  ") if part.endswith(": attached")]


@pytest.mark.parametrize("name", pane_names())
def test_status_line_names_the_views_probes(name: str) -> None:
    pane = pane_class(name)()
    assert named(pane.status_text(every_probe_attached()).plain) == list(views()[name].probes)


def test_status_line_follows_the_view(monkeypatch: pytest.MonkeyPatch) -> None:
    view: type[View[Any]] = views()["vmscan"]
    monkeypatch.setattr(view, "probes", ("oom", "swapinfo"))
    pane = pane_class("vmscan")()
    assert named(pane.status_text(every_probe_attached()).plain) == ["oom", "swapinfo"]
