"""Where the tests' own files are: the repository, the C workloads, the fixtures and the
list of programs the suite calls."""

from __future__ import annotations

from pathlib import Path

_TESTS = Path(__file__).resolve().parent.parent
ROOT = _TESTS.parent
WORKLOADS = _TESTS / "workloads"
DATA = _TESTS / "data"
PROGRAMS = _TESTS / "programs.txt"
