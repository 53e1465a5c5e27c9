"""`memtop export --replay REC --openmetrics OUT --step S`: every recorded sample at the recording's
own interval comes out, one point per step at coarser steps, though a live recording's ticks are
never exactly one interval apart (a tick lands a few ms early or late)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from support import RECORDED_FACTS

from memtop.export.backfill import backfill
from memtop.export.metrics import Options
from memtop.records import Batch, ProbeStatus
from memtop.records.host import MemInfo
from memtop.stream.recording import open_recorder

POINTS = 31


def jittered_recording(path: Path) -> Path:
    """31 samples taken about 1 s apart, as a live 1 s recording has them: each tick up to 15 ms
    early or late (a 0.985 s gap, then 1.03 s, ...), the first tick's gap shorter still."""
    facts = dataclasses.replace(RECORDED_FACTS, wall_minus_monotonic_ns=1_700_000_000 * 10**9)
    rec = open_recorder(path, interval_s=1.0, mode="procfs")
    mem = MemInfo(8 << 30, 1 << 30, 4 << 30, 0, 0, 0, 0)
    jitter_ms = [0, -150, 12, -15, 9, -14, 15, -3, -12, 14, 0]
    for i in range(POINTS):
        ts = 5 * 10**9 + i * 10**9 + jitter_ms[i % len(jitter_ms)] * 10**6
        rec.write(
            Batch(ts_ns=ts, records=((facts, ProbeStatus("procfs", "attached")) if i == 0 else ()) + (mem,))
        )
    rec.close()
    return path


def stamps(om: Path) -> list[float]:
    """The distinct timestamps of one series of the OpenMetrics file, in order."""
    out = []
    for line in om.read_text().splitlines():
        m = re.match(r'memtop_probe_up\{probe="procfs",.*\} \S+ (\S+)$', line)
        if m:
            out.append(float(m.group(1)))
    return out


@pytest.mark.parametrize(("step_s", "expected"), [(1.0, POINTS), (2.0, 16), (15.0, 3)])
def test_every_sample_at_the_recordings_step(tmp_path: Path, step_s: float, expected: int) -> None:
    rec = jittered_recording(tmp_path / "r.jsonl.gz")
    om = tmp_path / "out.om"
    points, _ = backfill(rec, om, Options(), step_s=step_s)
    assert points == expected
    seen = stamps(om)
    assert len(seen) == expected, seen
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    # a point per step: none closer than half a step (jitter aside) to the one before
    gaps = [b - a for a, b in zip(seen, seen[1:], strict=False)]
    assert min(gaps[:-1], default=step_s) >= step_s - 0.2, gaps
