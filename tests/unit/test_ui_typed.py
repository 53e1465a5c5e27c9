"""The UI reaches the app, its source and its widgets through types (issue 36, item 2): no
``getattr``/``hasattr``/``setattr`` anywhere in memtop/ui (a missing attribute is a type error
mypy sees, not a silent default), except memtop/ui/textual_compat.py, the one module that
probes Textual's private API; and a chart's memo lives in its typed ``ChartMemo``, nothing is
stashed on the chart widget."""

from __future__ import annotations

import ast
from pathlib import Path

UI = Path(__file__).resolve().parents[2] / "memtop" / "ui"
#: the one module that may look Textual's internals up by name
COMPAT = UI / "textual_compat.py"


def calls_by_name(tree: ast.AST, names: set[str]) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names
    ]


def test_no_attribute_lookups_by_name_in_the_ui() -> None:
    found = []
    for path in sorted(UI.rglob("*.py")):
        if path == COMPAT:
            continue
        for line in calls_by_name(ast.parse(path.read_text()), {"getattr", "hasattr", "setattr"}):
            found.append(f"{path.relative_to(UI.parent.parent)}:{line}")
    assert not found, found


def test_the_check_sees_a_lookup() -> None:
    """The check above can fail."""
    tree = ast.parse("src = getattr(self.app, 'source', None)\nok = hasattr(x, 'y')\n")
    assert calls_by_name(tree, {"getattr", "hasattr"}) == [1, 2]


def test_charts_stash_nothing_on_the_chart() -> None:
    """memtop/ui/charts.py writes attributes only of its ChartMemo (``memo.x = ...``)."""
    tree = ast.parse((UI / "charts.py").read_text())
    written = set()
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            for leaf in ast.walk(t):
                if isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name):
                    written.add(leaf.value.id)
    assert written <= {"memo"}, written
