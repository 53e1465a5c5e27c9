"""docs/architecture.md names every module of the package (issue 36: a room for every module), and
the layers contract it describes is the one pyproject.toml holds.

A module is named by its path (``memtop/stream/replay.py``), or by its file name on a line that
names its room (a table row of ``memtop/stream/`` listing ``replay.py``); a package by its room's
path (``memtop/stream/``)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memtop"
DOC = ROOT / "docs" / "architecture.md"


def modules() -> list[str]:
    """Every module of the package as a path from the repository top (memtop/x/y.py)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if "__pycache__" in rel.parts or "_data" in rel.parts:
            continue
        found.append(rel.as_posix())
    return found


def named(doc: str) -> set[str]:
    """What the page names: full paths, rooms, and file names on a line that names their room."""
    names = set(re.findall(r"memtop/(?:[\w]+/)*[\w]+\.py", doc))
    for line in doc.splitlines():
        rooms = re.findall(r"`(memtop/(?:[\w]+/)*)`", line)
        names.update(rooms)
        if len(rooms) == 1:  # a room's row: its files by name
            names.update(rooms[0] + f for f in re.findall(r"`([\w]+\.py)`", line))
    return names


def missing(doc: str) -> list[str]:
    names = named(doc)
    out = []
    for module in modules():
        if module.endswith("/__init__.py"):
            room = module[: -len("__init__.py")]
            if room != "memtop/" and room not in names:
                out.append(room)
        elif module not in names:
            out.append(module)
    return out


def test_every_module_is_named_in_the_architecture_page() -> None:
    assert missing(DOC.read_text(encoding="utf-8")) == []


def test_a_module_left_out_is_found() -> None:
    """The check can fail: the page without its stream row misses that room's modules."""
    doc = DOC.read_text(encoding="utf-8")
    row = next(line for line in doc.splitlines() if line.startswith("| `memtop/stream/` |"))
    gone = missing(doc.replace(row, ""))
    assert "memtop/stream/" in gone and "memtop/stream/recording.py" in gone


def test_the_front_ends_table_has_every_subcommand() -> None:
    """Each module of memtop/commands/ that runs a command is a row of the front ends table."""
    doc = DOC.read_text(encoding="utf-8")
    table = doc[doc.index("## Front ends") : doc.index("## Adding a pane")]
    assert "`memtop export" in table
    commands = {p.stem for p in (PACKAGE / "commands").glob("*.py")} - {"__init__", "args", "common"}
    listed = set(re.findall(r"`(\w+)\.py`", table))
    assert commands <= listed, sorted(commands - listed)


def test_the_layers_on_the_page_are_the_contract() -> None:
    """The order the page shows is pyproject.toml's layers contract over the whole package."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layered = [c for c in contracts if c["type"] == "layers" and c.get("containers") == ["memtop"]]
    assert len(layered) == 1 and layered[0].get("exhaustive") is True
    doc = DOC.read_text(encoding="utf-8")
    shown = re.search(r"^__main__ > .*$", doc, re.MULTILINE)
    assert shown is not None
    assert shown.group(0) == " > ".join(layered[0]["layers"])


def test_the_root_holds_only_the_entry_points() -> None:
    """No module at an old path (no re-exporting shim): the root keeps __init__, __main__, cli."""
    assert {p.name for p in PACKAGE.glob("*.py")} == {"__init__.py", "__main__.py", "cli.py"}
