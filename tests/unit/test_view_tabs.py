"""The tab table the TUI draws without importing the views (memtop.views.TABS) says what the
views themselves say: every view, in their order, each with its tab's label."""

from __future__ import annotations

import subprocess
import sys

from memtop.views import TABS, views


def test_tabs_are_the_views_in_order_with_their_labels() -> None:
    assert list(TABS.items()) == [(name, cls.tab_title or cls.title) for name, cls in views().items()]


def test_each_view_lives_in_a_module_of_its_name() -> None:
    for name, cls in views().items():
        assert cls.__module__ == f"memtop.views.{name}"


def test_get_view_imports_only_its_own_view() -> None:
    code = (
        "import sys\n"
        "from memtop.views import get_view\n"
        "assert get_view('processes').name == 'processes'\n"
        "print(sorted(m for m in sys.modules if m in {"
        + ", ".join(f"'memtop.views.{n}'" for n in TABS)
        + "}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    # the processes view's module imports what its rows need (the cgroups' names, not their view)
    assert "memtop.views.leaks" not in out.stdout
    assert "memtop.views.kernel" not in out.stdout
    assert "'memtop.views.processes'" in out.stdout
