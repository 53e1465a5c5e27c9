"""Histograms drawn to fit a box (memtop/ui/hist.py): never wider than the box, never more lines,
merged buckets keep every count, percentiles from the buckets' bounds."""

from __future__ import annotations

import pytest
from rich.cells import cell_len

from memtop.ui import hist

# a log2 latency histogram: 15 buckets from 16 µs to 268 ms
BUCKETS = hist.from_log2([(2**i, 0 if i < 14 else (i * 37) % 1000 + 1) for i in range(0, 29)])


def test_leading_empty_buckets_say_nothing() -> None:
    assert BUCKETS[0].count and BUCKETS[0].hi_ns == 2**14 and len(BUCKETS) == 15


@pytest.mark.parametrize("width", [20, 38, 76, 120])
@pytest.mark.parametrize("lines", [1, 2, 5, 8, 15, 40])
def test_fits_its_box(width: int, lines: int) -> None:
    text = hist.render(BUCKETS, width, lines)
    rows = text.plain.split("\n")
    assert len(rows) <= max(1, lines)
    assert all(cell_len(r) <= width for r in rows), rows


def test_merged_buckets_keep_every_count_and_the_range() -> None:
    for lines in (1, 2, 3, 7, 8, 14, 15):
        merged = hist.merge(BUCKETS, lines)
        assert len(merged) <= lines
        assert sum(b.count for b in merged) == sum(b.count for b in BUCKETS)
        assert merged[0].lo_ns == BUCKETS[0].lo_ns and merged[-1].hi_ns == BUCKETS[-1].hi_ns


def test_percentiles_are_bucket_bounds() -> None:
    b = [hist.Bucket(0, 0, 50), hist.Bucket(1, 2000, 49), hist.Bucket(2001, 4000, 1)]
    assert hist.percentile(b, 50) == 0  # half never waited
    assert hist.percentile(b, 99) == 2000
    assert hist.percentile(b, 100) == 4000
    line = hist.summary(b, 80).plain
    assert line.startswith("p50 0 p99 ≤2.0µs max ≤4.0µs"), line
    assert hist.summary([], 80).plain == "none yet"
