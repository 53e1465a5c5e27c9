"""tests/programs.txt lists every program memtop and its tests call (setup installs their packages,
the suite checks them before its first test), and a missing one stops the run with one line."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

from support import PROGRAMS, ROOT, missing_programs

#: modules whose attributes start processes or look programs up (subprocess.run, shutil.which…)
MODULES = {"subprocess", "asyncio", "os", "shutil"}
CALLS = {"run", "Popen", "check_output", "check_call", "call", "create_subprocess_exec", "execv", "execvp"}


def listed() -> dict[str, str]:
    out = {}
    for line in PROGRAMS.read_text().splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            out[fields[0]] = fields[1]
    return out


def programs_called(path: Path) -> set[str]:
    """Programs named literally where ``path`` starts a process or looks one up: the first item of
    a list literal handed to subprocess/os.exec*, and shutil.which("x")."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", "") not in MODULES:
            continue  # helper.call("frames", …) is a method, not a process
        first = node.args[0]
        while isinstance(first, ast.BinOp):  # ["gcc", ...] + extra
            first = first.left
        if name in CALLS and isinstance(first, ast.List) and first.elts:
            first = first.elts[0]
        if name in CALLS | {"which"} and isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.add(first.value)
    return found


def test_every_program_called_is_listed() -> None:
    sources = [*(ROOT / "memtop").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    called = {prog: path for path in sources for prog in programs_called(path)}
    assert {"gcc", "bpftool", "mkswap", "addr2line"} <= set(called)  # the scan finds them at all
    unlisted = {prog: str(path.relative_to(ROOT)) for prog, path in called.items() if prog not in listed()}
    assert not unlisted, f"add these to tests/programs.txt with their package: {unlisted}"


def test_every_listed_program_is_here() -> None:
    assert missing_programs() == []


def test_a_missing_program_stops_the_run_with_one_line_naming_its_package(tmp_path: Path) -> None:
    """Every listed program but setpriv on PATH: the run ends before any test, exit 4 (usage error),
    with one line naming setpriv and util-linux."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for prog in listed():
        where = shutil.which(prog)
        if prog != "setpriv" and not prog.startswith("/") and where is not None:
            (bin_dir / prog).symlink_to(where)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(ROOT / "tests/unit/test_state.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=dict(os.environ, PATH=str(bin_dir)),
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("ERROR")]
    assert errors == [
        "ERROR: missing setpriv (package util-linux): run `make setup` as root (tests/programs.txt)"
    ], proc.stdout + proc.stderr
    assert "passed" not in proc.stdout
