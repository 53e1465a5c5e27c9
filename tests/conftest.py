"""Shared fixtures. BPF tests carry @pytest.mark.bpf: they skip without root/bcc, and
MEMTOP_REQUIRE_BPF=1 turns each such skip into a failure."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support import bpf_unavailable_reason  # noqa: E402

REQUIRE_BPF = os.environ.get("MEMTOP_REQUIRE_BPF") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
