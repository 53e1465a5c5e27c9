"""The README stays a page a user reads: at most 12 KB, every relative link in it and in docs/
leads to a file of the repository (and a heading, when it names one), its text capture is the
accepted 80×24 snapshot of the processes pane, and its keys table is the app's: every key in it is
bound where the table says, every key memtop binds is in it, and so is every key the help (`?`)
shows."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Tree

from memtop.ui import help as help_text
from memtop.ui import recplay
from memtop.ui.app import HelpScreen, MemtopApp
from memtop.ui.panes import pane_class, pane_names
from memtop.ui.panes.base import FilterablePane, Pane, SortableTablePane
from memtop.ui.screens.cgroup import CgroupScreen
from memtop.ui.screens.process import ProcessScreen

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")

#: how the README writes a key -> Textual's name for it
KEY_NAMES = {
    "↑": "up",
    "↓": "down",
    "←": "left",
    "→": "right",
    "Enter": "enter",
    "PgUp": "pageup",
    "PgDn": "pagedown",
    "Esc": "escape",
    "Space": "space",
    "Tab": "tab",
    "Shift-Tab": "shift+tab",
    "Ctrl-C": "ctrl+c",
    "<": "less_than_sign",
    ">": "greater_than_sign",
    "/": "slash",
    "?": "question_mark",
    "+": "plus",
    "-": "minus",
    "[": "left_square_bracket",
    "]": "right_square_bracket",
    "Home": "home",
    "End": "end",
    **{f"F{n}": f"f{n}" for n in range(1, 13)},
}
PANE = {name: pane_class(name) for name in pane_names()}
#: the README's "where" -> the classes whose bindings work there
WHERE: dict[str, list[type]] = {
    "everywhere": [
        MemtopApp,
        Screen,
        HelpScreen,
        recplay.GotoScreen,
        ProcessScreen,
        CgroupScreen,
        FilterablePane,
    ],
    "tables": [SortableTablePane, DataTable, Tree, ProcessScreen],
    "processes": [PANE["processes"]],
    "reclaim": [PANE["reclaim"]],
    "swap-in": [PANE["swapin"]],
    "leaks": [PANE["leaks"]],
    "cgroups": [PANE["cgroups"]],
    "kernel": [PANE["kernel"]],
    "shared": [PANE["shared"]],
    "page cache": [PANE["pagecache"]],
    "drill-in": [ProcessScreen],
    "live": [MemtopApp],
    "replay": [MemtopApp],
}
#: memtop's own classes with bindings: each of their keys must be in the table
OWN: list[type] = [
    MemtopApp,
    recplay.RecordReplay,
    HelpScreen,
    recplay.GotoScreen,
    ProcessScreen,
    CgroupScreen,
    FilterablePane,
    SortableTablePane,
    *PANE.values(),
]


def own_bindings(cls: type) -> set[str]:
    """Keys in ``cls``'s own BINDINGS (not its bases')."""
    keys: set[str] = set()
    for b in cls.__dict__.get("BINDINGS", ()):
        key = b.key if isinstance(b, Binding) else b[0]
        keys.update(k.strip() for k in key.split(","))
    return keys


def bindings(cls: type) -> set[str]:
    return set().union(*(own_bindings(c) for c in cls.__mro__))


def key_name(token: str) -> str:
    return KEY_NAMES.get(token, token)


def keys_table() -> list[tuple[set[str], list[str], str]]:
    """(Textual key names, where, action) per row of the README's keys table."""
    text = README.read_text()
    section = text.split("\n## Keys\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        keys_cell, where, action = (c.strip() for c in line.strip().strip("|").split(" | "))
        span = re.fullmatch(r"`(\d)`–`(\d)`(?: `(\d)`)?", keys_cell)  # `1`–`9` `0`: pane 10 is `0`
        if span:
            keys = {str(i) for i in range(int(span[1]), int(span[2]) + 1)} | ({span[3]} if span[3] else set())
        else:
            keys = {key_name(t) for t in re.findall(r"`([^`]+)`", keys_cell)}
        rows.append((keys, [w.strip() for w in where.split(",")], action))
    assert len(rows) > 10, "the README's keys table was not found"
    return rows


def help_keys() -> set[str]:
    """The keys the help screen (`?`) names on any pane or drill-in: the key column of its entries
    (memtop/ui/help.py, from the bindings and the panes' own entries)."""
    classes: list[type] = [*PANE.values(), ProcessScreen, CgroupScreen, MemtopApp, HelpScreen]
    entries = [e for cls in classes for e in help_text.entries(help_text.class_bindings(cls))]
    entries += [("1-9", ""), ("0", ""), ("Tab Shift-Tab", ""), ("Enter", "")]  # the app's own entries
    entries += [e for name in PANE for e in PANE[name].help_entries()]
    entries += ProcessScreen.help_entries(ProcessScreen.__new__(ProcessScreen))
    keys: set[str] = set()
    for cell, _ in entries:
        keys |= help_cell(cell)
    return keys


def help_cell(cell: str) -> set[str]:
    span = re.fullmatch(r"(\d)-(\d)", cell)
    if span:
        return {str(i) for i in range(int(span[1]), int(span[2]) + 1)}
    tokens = cell.split()
    return {key_name(t) for t in tokens}


def test_readme_is_short() -> None:
    assert README.stat().st_size <= 12 * 1024


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings."""
    out = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_leads_to_a_file_of_the_repository(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
    targets = LINK.findall(text)
    broken = []
    for target in targets:
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if ROOT not in dest.parents or not dest.is_file() or ".venv" in dest.parts:
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links that lead nowhere"


def test_docs_link_every_pane_page_and_the_readme_every_doc() -> None:
    readme_links = {(README.parent / t.partition("#")[0]).resolve() for t in LINK.findall(README.read_text())}
    docs = {p.resolve() for p in (ROOT / "docs").rglob("*.md")}
    assert docs - readme_links == set(), "docs pages the README does not link"


def load_screenshots() -> ModuleType:
    spec = importlib.util.spec_from_file_location("screenshots_script", ROOT / "scripts" / "screenshots.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_text_capture_is_the_accepted_snapshot() -> None:
    shots = load_screenshots()
    capture = shots.svg_text(shots.README_CAPTURE.read_text())
    readme = README.read_text()
    assert readme == shots.readme_with_capture(readme, capture), (
        "the README's capture is stale: .venv/bin/python scripts/screenshots.py --readme"
    )
    lines = capture.splitlines()
    assert len(lines) == 24 and max(len(line) for line in lines) <= 80
    assert "PID" in capture and "Processes" in capture


def test_every_key_in_the_table_is_bound_where_it_says() -> None:
    unbound = []
    for keys, where, action in keys_table():
        assert all(w in WHERE for w in where), f"unknown 'where' in {where}"
        bound = set().union(*(bindings(c) for w in where for c in WHERE[w]))
        unbound += [(k, where, action) for k in sorted(keys - bound)]
    assert not unbound


def test_every_key_memtop_binds_is_in_the_table() -> None:
    rows = keys_table()
    missing = []
    for owner in OWN:
        for key in sorted(own_bindings(owner)):
            if not any(
                key in keys and any(issubclass(c, owner) for w in where for c in WHERE[w])
                for keys, where, _ in rows
            ):
                missing.append((owner.__name__, key))
    assert not missing


def test_every_key_the_help_shows_is_in_the_table() -> None:
    shown = help_keys()
    assert {"1", "9", "tab", "shift+tab", "up", "j", "enter", "slash", "escape", "space", "G"} <= shown
    in_table = set().union(*(keys for keys, _, _ in keys_table()))
    assert shown - in_table == set()


def test_panes_table_lists_every_pane() -> None:
    text = README.read_text()
    section = text.split("\n## Panes\n", 1)[1].split("\n## ", 1)[0]
    linked = set(re.findall(r"\(docs/panes/(\w+)\.md\)", section))
    assert linked == set(pane_names()) | {"process"}
    assert not set(PANE) - set(pane_names()) and all(issubclass(c, Pane) for c in PANE.values())
