"""`?` shows the keys of what is on screen first (issue 22, item 4): the pane's own keys (Reclaim's
K T X E P, Leaks' b c g a z i x), the drill-in's sections and `m`, then the keys of everywhere;
laid out to the terminal's width, never wrapped mid-entry nor cut at 80 columns."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fakeproc import make_fake_proc
from support import force_tick
from support.ui import settle

from memtop.probes.procfs import ProcfsProbe
from memtop.stream.bridge import Bridge
from memtop.ui.app import HelpScreen, MemtopApp
from memtop.ui.screens.process import ProcessScreen


def help_lines(app: MemtopApp) -> list[str]:
    assert isinstance(app.screen, HelpScreen)
    return str(app.screen.query_one("#help-body").render()).splitlines()


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
@pytest.mark.parametrize(
    ("pane", "title", "keys"),
    [
        ("processes", "Processes pane", ["M", "C", "E", "/ F3", "Enter"]),
        ("reclaim", "Reclaim pane", ["K", "T", "X", "E", "P"]),
        ("leaks", "Leaks pane", ["b", "c", "g", "a", "z", "i", "x"]),
        ("cgroups", "Cgroups pane", ["h", "l", "c", "D", "L"]),
    ],
)
async def test_help_shows_the_panes_keys_first_in_the_width(
    tmp_path: Path, no_bpf: None, size: tuple[int, int], pane: str, title: str, keys: list[str]
) -> None:
    app = MemtopApp(Bridge([ProcfsProbe(make_fake_proc(tmp_path / "proc"))]), initial_pane=pane)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        lines = help_lines(app)
        assert lines[0] == title
        everywhere = lines.index("Everywhere")
        # entries are "KEYS  what they do", two spaces or more between any two cells
        shown = {cell for line in lines[1:everywhere] for cell in re.split(r"\s{2,}", line.strip())}
        for key in keys:
            assert key in shown, (key, lines[:everywhere])
        assert any(line.startswith("q") or " q " in line for line in lines[everywhere:])
        body = app.screen.query_one("#help-body")
        assert body.region.right <= size[0] and all(len(line) <= size[0] - 8 for line in lines)
        assert not any(line.endswith("…") for line in lines if not line.startswith(("Snapshots", "Kernel")))


async def test_help_on_the_drill_in_lists_its_sections(tmp_path: Path, no_bpf: None) -> None:
    app = MemtopApp(Bridge([ProcfsProbe(make_fake_proc(tmp_path / "proc"))]))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        force_tick(app)
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, ProcessScreen)
        await pilot.press("question_mark")
        await settle(pilot)
        lines = help_lines(app)
        assert lines[0].startswith("process ")
        cells = [re.split(r"\s{2,}", line.strip()) for line in lines[1 : lines.index("Everywhere")]]
        pairs = {(c[i], c[i + 1]) for c in cells for i in range(0, len(c) - 1, 2)}
        for pair in (
            ("1", "RSS and faults over time"),
            ("5", "Mappings (pmap -x)"),
            ("m", "trace its allocations (Leaks pane)"),
        ):
            assert pair in pairs, (pair, lines)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, ProcessScreen)


async def test_help_at_once_after_switching_pane_shows_the_new_panes_keys(
    tmp_path: Path, no_bpf: None
) -> None:
    """`3` then `?` at once: the Reclaim pane is still being built; its keys are in the help."""
    app = MemtopApp(Bridge([ProcfsProbe(make_fake_proc(tmp_path / "proc"))]))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("3", "question_mark")
        await settle(pilot)
        lines = help_lines(app)
        assert lines[0] == "Reclaim pane" and lines[1].startswith("K ")
