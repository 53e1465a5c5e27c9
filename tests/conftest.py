"""Shared fixtures. BPF tests carry @pytest.mark.bpf: they skip without root/bcc, and
MEMTOP_REQUIRE_BPF=1 turns each such skip into a failure.

The tree: tests/unit (pure Python, the CLI without BPF), tests/ui (Textual Pilot on recordings and
fakes), tests/kernel (real BPF and the real kernel). Every test in tests/kernel is marked `bpf`
here, and a `bpf` marker anywhere else is an error, so `-m "not bpf"` is exactly unit + ui."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
KERNEL = TESTS / "kernel"
sys.path.insert(0, str(TESTS))

from support import bpf_unavailable_reason, missing_programs  # noqa: E402
from support.workloads import leakers  # noqa: E402, F401 (the fixture, for every test)

from memtop.core.errors import NoPrivilege  # noqa: E402
from memtop.linux import bcc_compat  # noqa: E402

REQUIRE_BPF = os.environ.get("MEMTOP_REQUIRE_BPF") == "1"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Every program the suite calls is here, or the run stops before the first test with one
    line naming each missing one and its package (a test half-way through would fail obscurely,
    or a skip would hide it)."""
    missing = missing_programs()
    if missing:
        named = ", ".join(f"{prog} (package {package})" for prog, package in missing)
        raise pytest.UsageError(f"missing {named}: run `make setup` as root (tests/programs.txt)")


@pytest.hookimpl(tryfirst=True)  # before -m selects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    misplaced = []
    for item in items:
        in_kernel = KERNEL in item.path.resolve().parents
        if in_kernel and item.get_closest_marker("bpf") is None:
            item.add_marker(pytest.mark.bpf)
        elif not in_kernel and item.get_closest_marker("bpf") is not None:
            misplaced.append(item.nodeid)
    if misplaced:
        raise pytest.UsageError(f"bpf-marked tests belong in tests/kernel/: {', '.join(misplaced)}")
    reason = bpf_unavailable_reason()
    if reason is None:
        return
    if REQUIRE_BPF:
        return  # the autouse fixture below fails each BPF test with the reason
    for item in items:
        if "bpf" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=f"needs BPF: {reason}"))


@pytest.fixture(autouse=True)
def _require_bpf(request: pytest.FixtureRequest) -> None:
    if "bpf" in request.keywords and REQUIRE_BPF:
        reason = bpf_unavailable_reason()
        if reason is not None:
            pytest.fail(f"MEMTOP_REQUIRE_BPF=1 but BPF is unavailable: {reason}")


@pytest.fixture
def no_bpf(monkeypatch: pytest.MonkeyPatch) -> None:
    """memtop as an unprivileged user would run it: loading BPF is refused."""

    def refuse() -> None:
        raise NoPrivilege("not running as root (test)", "run: sudo memtop")

    monkeypatch.setattr(bcc_compat, "check_can_load", refuse)
