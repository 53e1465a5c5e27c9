"""Textual's private API: only memtop/ui/textual_compat.py uses it, and the installed Textual still
has the shape that module expects (a new Textual fails here first, with what changed)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import sys
import textwrap
from pathlib import Path

from support import ROOT

import memtop.ui
from memtop.ui import textual_compat

COMPAT = "memtop.ui.textual_compat"


def test_private_textual_api_has_the_shape_memtop_expects() -> None:
    problems = textual_compat.problems()
    assert not problems, (
        f"Textual {textual_compat.textual_version()} is not what memtop/ui/textual_compat.py expects: "
        + "; ".join(problems)
    )


def private_imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] in ("textual", "rich") and any(
                p.startswith("_") and not p.startswith("__") for p in parts
            ):
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    return out


def test_no_private_textual_import_outside_the_compat_module() -> None:
    found = [
        hit
        for path in (ROOT / "memtop").rglob("*.py")
        if path.name != "textual_compat.py"
        for hit in private_imports(path)
    ]
    assert not found, f"import these through memtop/ui/textual_compat.py: {found}"


_ATTRIBUTES: dict[type, tuple[set[str], set[str]]] = {}


def self_attributes(cls: type) -> tuple[set[str], set[str]]:
    """(names ``cls``'s own source stores on self or defines, names it reads from self)."""
    if cls not in _ATTRIBUTES:
        _ATTRIBUTES[cls] = _self_attributes(cls)
    return _ATTRIBUTES[cls]


def _self_attributes(cls: type) -> tuple[set[str], set[str]]:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return set(), set()
    stored: set[str] = set()
    read: set[str] = set()
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for item in body:  # methods and class attributes written in the class itself
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            stored.add(item.name)
        elif isinstance(item, ast.Assign | ast.AnnAssign):
            for target in item.targets if isinstance(item, ast.Assign) else [item.target]:
                if isinstance(target, ast.Name):
                    stored.add(target.id)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            (stored if isinstance(node.ctx, ast.Store) else read).add(node.attr)
    return stored, read


def textual_private(cls: type, name: str) -> str | None:
    """The Textual class among ``cls``'s bases that has ``name`` of its own, if any."""
    for base in cls.__mro__[1:]:
        if base.__module__.split(".")[0] == "textual" and name in self_attributes(base)[0]:
            return f"{base.__module__}.{base.__qualname__}"
    return None


def test_no_private_textual_attribute_outside_the_compat_module() -> None:
    """Every class of memtop.ui built on a Textual class: a private name it reads that only Textual
    sets, or a private name of its own that a Textual base also has (an override, or a clash)."""
    for info in pkgutil.walk_packages(memtop.ui.__path__, "memtop.ui."):
        importlib.import_module(info.name)
    found = []
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("memtop.ui.") or module_name == COMPAT:
            continue
        for cls in vars(module).values():
            if not (inspect.isclass(cls) and cls.__module__ == module_name):
                continue
            if not any(b.__module__.split(".")[0] == "textual" for b in cls.__mro__[1:]):
                continue
            memtop_stored = set().union(
                *(self_attributes(b)[0] for b in cls.__mro__ if b.__module__.startswith("memtop."))
            )
            stored, read = self_attributes(cls)
            for name in sorted(stored | read):
                if not name.startswith("_") or name.startswith("__"):
                    continue
                owner = textual_private(cls, name)
                if owner is None:
                    continue
                if name in stored or name in memtop_stored:
                    found.append(f"{cls.__qualname__}.{name} shadows {owner}'s")
                else:
                    found.append(f"{cls.__qualname__} uses {owner}.{name}")
    assert not found, f"reach these through memtop/ui/textual_compat.py: {found}"
