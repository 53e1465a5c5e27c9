"""scripts/module_moves.txt (where the root modules went, issue 36) is true of the package, and
scripts/apply_module_moves.py brings code written against the old layout over to it."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MOVES = ROOT / "scripts" / "module_moves.txt"
SCRIPT = ROOT / "scripts" / "apply_module_moves.py"


def moves() -> list[tuple[str, str]]:
    out = []
    for line in MOVES.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            old, new = line.split()
            out.append((old, new))
    return out


def test_every_old_module_is_gone_and_every_new_one_is_there() -> None:
    modules = [(o, n) for o, n in moves() if ":" not in o]
    assert len(modules) == 24  # the 25 root modules but cli
    for old, new in modules:
        spec = importlib.util.find_spec(old)
        # gone, or a room now (memtop.headless: a package of its own modules, no re-exports)
        assert spec is None or spec.submodule_search_locations is not None, f"{old} still exists"
        assert importlib.util.find_spec(new) is not None, f"{new} is not a module"


def test_every_moved_name_is_where_the_map_says() -> None:
    names = [(o, n) for o, n in moves() if ":" in o]
    assert names
    for old, new in names:
        module, name = new.split(":")
        assert hasattr(importlib.import_module(module), name), new
        old_module, old_name = old.split(":")
        if importlib.util.find_spec(old_module) is not None and hasattr(
            importlib.import_module(old_module), old_name
        ):
            # a name that moved out of a module that stayed (cli) may be imported there, not copied
            assert getattr(importlib.import_module(old_module), old_name) is getattr(
                importlib.import_module(module), name
            ), old


def rewrite(tmp_path: Path, text: str) -> tuple[str, str]:
    src = tmp_path / "old.py"
    src.write_text(text)
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(src)], capture_output=True, text=True, check=True, timeout=60
    )
    return src.read_text(), proc.stderr


OLD = '''\
"""See memtop/bridge.py and memtop.replay.Recording."""
import memtop.runner
from memtop import bcc_compat, fmt, headless  # noqa: E402
from memtop.cli import main, run_export
from memtop.replay import Recording, ReplaySource, parse_time
from memtop.headless import snapshot

CODE = "import os; from memtop import lifecycle; lifecycle.ensure_std_fds()"


def f(monkeypatch):
    monkeypatch.setattr("memtop.doctor.report", None)
    return memtop.runner.Runner
'''

NEW = '''\
"""See memtop/stream/bridge.py and memtop.stream.recfile.Recording."""
import memtop.stream.runner
from memtop.linux import bcc_compat  # noqa: E402
from memtop.core import fmt  # noqa: E402
from memtop.headless import frontends as headless  # noqa: E402
from memtop.cli import main
from memtop.commands.export import run_export
from memtop.stream.recfile import Recording
from memtop.stream.replay import ReplaySource, parse_time
from memtop.headless.frontends import snapshot

CODE = "import os; from memtop.runtime import lifecycle; lifecycle.ensure_std_fds()"


def f(monkeypatch):
    monkeypatch.setattr("memtop.headless.doctor.report", None)
    return memtop.stream.runner.Runner
'''


def test_old_code_is_rewritten(tmp_path: Path) -> None:
    text, warnings = rewrite(tmp_path, OLD)
    assert text == NEW
    assert warnings == ""
    assert rewrite(tmp_path, text)[0] == NEW  # a second run changes nothing


def test_a_module_whose_names_moved_imported_whole_is_reported(tmp_path: Path) -> None:
    text, warnings = rewrite(tmp_path, "from memtop import cli\ncli.run_snapshot(args)\n")
    assert text == "from memtop import cli\ncli.run_snapshot(args)\n"
    assert "memtop.cli imported as a module" in warnings


def test_the_tree_is_already_rewritten() -> None:
    """Nothing in the repository still names an old module (the script finds nothing to do)."""
    files = [
        p
        for top in ("memtop", "tests", "bench", "scripts", "docs")
        for p in (ROOT / top).rglob("*")
        if p.suffix in (".py", ".md")
        and "__pycache__" not in p.parts
        and p != SCRIPT
        and p != Path(__file__).resolve()
    ]
    files += [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "Makefile"]
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout


def test_a_module_added_under_a_moved_modules_name_is_left_alone(tmp_path: Path) -> None:
    """memtop.headless was a module (now memtop.headless.frontends); memtop.headless.start came
    after the moves: naming it is the new layout already, while the old module's names still move."""
    text, _ = rewrite(
        tmp_path,
        "from memtop.headless.start import begin\nimport memtop.headless.start\n"
        "from memtop.headless import run_batch\n",
    )
    assert "from memtop.headless.start import begin\n" in text
    assert "import memtop.headless.start\n" in text
    assert "from memtop.headless.frontends import run_batch\n" in text
