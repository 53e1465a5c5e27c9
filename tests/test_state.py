"""Pure state structures: what they keep must stay small without changing what they show."""

from __future__ import annotations

import random

from memtop.state.system import History, HistoryPoint


def _step_value(points: list[HistoryPoint], ts: int) -> tuple[int, ...]:
    """The values a plotted step series shows at ``ts`` (the last point at or before it)."""
    best = None
    for p in points:
        if p.ts_ns <= ts:
            best = p
    assert best is not None
    return (best.anon_bytes, best.file_bytes, best.swap_bytes, round(best.minflt_per_s * 1000))


def test_history_keeps_changes_only_and_shows_the_same_series() -> None:
    rng = random.Random(7)
    full: list[HistoryPoint] = []
    h = History(cap=10_000)
    anon = 1 << 20
    for i in range(2000):
        if rng.random() < 0.05:  # a change now and then, flat in between
            anon += rng.randrange(-4096, 8192)
        p = HistoryPoint(1_000_000_000 * (i + 1), anon, 4096, 0, 0, 0.0 if anon % 3 else 12.5, 0.0)
        full.append(p)
        h.append(p)
    kept = list(h)
    assert len(kept) == len(h)
    assert len(kept) < len(full) // 4, len(kept)  # mostly flat: few points stored
    assert kept[0].ts_ns == full[0].ts_ns and kept[-1].ts_ns == full[-1].ts_ns
    for p in full:
        assert _step_value(kept, p.ts_ns) == _step_value(full, p.ts_ns), p.ts_ns


def test_an_idle_process_adds_nothing_and_a_busy_one_is_capped() -> None:
    idle = History(cap=100)
    for i in range(5000):
        idle.append(HistoryPoint(i + 1, 8192, 4096, 0, 0, 0.0, 0.0))
    assert len(list(idle)) == 2  # the first tick and the newest
    size = idle.nbytes()
    busy = History(cap=100)
    for i in range(5000):
        busy.append(HistoryPoint(i + 1, 8192 + i, 4096, 0, 0, float(i), 0.0))
    pts = list(busy)
    assert len(pts) == 100 and pts[-1].anon_bytes == 8192 + 4999 and pts[0].anon_bytes == 8192 + 4900
    assert busy.nbytes() <= 2 * 100 * History.FIELDS * 8
    assert size <= 4 * History.FIELDS * 8
