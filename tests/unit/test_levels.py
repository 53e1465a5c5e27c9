"""Levels: one table of thresholds, coloured by the UI, by weight alone under NO_COLOR."""

from __future__ import annotations

import pytest

from memtop.ui.levels import style
from memtop.views.levels import THRESHOLDS, level


def test_bounds_take_their_level_and_unmeasured_is_not_trouble() -> None:
    warn, bad = THRESHOLDS["psi_some_avg10"]
    assert level("psi_some_avg10", warn - 0.01) == ""
    assert level("psi_some_avg10", warn) == "warn"
    assert level("psi_some_avg10", bad) == "bad"
    assert level("psi_some_avg10", None) == ""
    assert all(w < b for w, b in THRESHOLDS.values())


def test_no_color_shows_levels_by_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert "red" in style("bad") and style("warn") == "yellow"
    monkeypatch.setenv("NO_COLOR", "1")
    assert style("bad") == "bold" and style("warn") == "" and "red" not in style("bad")


def test_plural() -> None:
    from memtop.core import fmt

    assert fmt.plural(1, "process", "processes") == "1 process"
    assert fmt.plural(0, "process", "processes") == "0 processes"
    assert fmt.plural(2, "kill") == "2 kills"


def test_clock_h(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from memtop.core import fmt

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        assert fmt.clock_h(1_795_268_592_328_500_000) == "13:43:12.328"
        assert fmt.clock_h(None) == "-"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_bytes_switch_units_before_four_digits() -> None:
    """Issue 22, item 11: `1012.0K` read as a typo; from 1000 of a unit on, the next unit."""
    from memtop.core import fmt

    assert fmt.bytes_h(999) == "999B"
    assert fmt.bytes_h(1012 * 1024) == "0.99M"
    assert fmt.bytes_h(1023 * 1024) == "1.0M"
    assert fmt.bytes_h(1536) == "1.5K"
    assert all(len(fmt.bytes_h(v).rstrip("BKMGT").split(".")[0]) <= 3 for v in range(0, 1 << 24, 977))


def test_doctor_shows_swap_in_human_units() -> None:
    """Issue 22, item 11: doctor printed /proc/swaps' raw KiB."""
    from memtop.headless.doctor import _swap_line

    assert _swap_line("/swapfile file 4194300 230656 -2") == "/swapfile (file) 4.0G, 225.2M used"
    assert _swap_line("/dev/zram0 partition 1048572 0 100") == "/dev/zram0 (partition) 1.0G, 0B used"
    assert "\x1b" not in _swap_line("/evil\x1b[31m file 1 1 -2")


def test_a_total_of_nothing_is_blank_and_unmeasured_is_a_dash() -> None:
    """Issue 22, item 11: RECLAIM and SWAPWAIT showed 0ns on every idle row."""
    from memtop.core import fmt

    assert fmt.ns_total(0) == "" and fmt.ns_total(None) == "-" and fmt.ns_total(1_500_000) == "1.50ms"
