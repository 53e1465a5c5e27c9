"""A view's sort keys are said once, as a Literal (``SortKey``), and the tuple the panes step
through (``SORT_KEYS``) is read from it (issue 36): a key added to one and not the other cannot
happen."""

from __future__ import annotations

import importlib
import pkgutil
import typing

import pytest

import memtop.views

#: (module, the tuple, its Literal): the main tables' sorts, and the drill-in's mappings'
SORTS = [
    (f"memtop.views.{info.name}", "SORT_KEYS", "SortKey")
    for info in pkgutil.iter_modules(memtop.views.__path__)
    if hasattr(importlib.import_module(f"memtop.views.{info.name}"), "SORT_KEYS")
] + [("memtop.views.process", "MAPPING_SORT_KEYS", "MappingSortKey")]


def test_the_views_that_sort_are_found() -> None:
    assert {m.rsplit(".", 1)[1] for m, _, _ in SORTS} >= {
        "processes",
        "cgroups",
        "kernel",
        "leaks",
        "process",
    }


@pytest.mark.parametrize(("module", "keys", "literal"), SORTS)
def test_sort_keys_are_their_literal(module: str, keys: str, literal: str) -> None:
    mod = importlib.import_module(module)
    lit = getattr(mod, literal)
    assert typing.get_origin(lit) is typing.Literal, f"{module}.{literal} is not a Literal"
    assert getattr(mod, keys) == typing.get_args(lit)
