"""`memtop export --replay FILE --openmetrics OUT`: a recording as timestamped OpenMetrics, for
``promtool tsdb create-blocks-from openmetrics OUT DIR`` (history into Prometheus).

The recording is played through the same Runner and the same metric families as a live scrape,
one point every ``step_s`` of recorded time, stamped with the recorded wall-clock time. OpenMetrics
wants each family's samples together and each series' points in time order, a histogram's buckets,
count and sum of one point side by side: samples are gathered per family and sorted so."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memtop.core.errors import MemtopError
from memtop.export.families import Metric, Sample
from memtop.export.metrics import Accumulators, Budget, Options, families
from memtop.linux import files
from memtop.stream.runner import Runner
from memtop.views import wall_ns


class _Merged:
    """The merged families, for prometheus_client's encoder (its ``Collector`` protocol)."""

    def __init__(self, merged: list[Metric]) -> None:
        self.merged = merged

    def collect(self) -> Iterator[Any]:
        yield from self.merged


def _slack_ns(index: list[int], step_s: float) -> int:
    """How early a sample may come and still stand for its point: half the smaller of the step
    and the recording's typical gap between samples. A live recording's ticks are never exactly
    one interval apart (a tick lands some ms early or late, a slow poll absorbs one), so a sample
    0.99 s after the last is still the next second's, and at a 15 s step the sample nearest each
    15 s mark is taken, not the first one past it."""
    gaps = sorted(b - a for a, b in zip(index, index[1:], strict=False) if b > a)
    typical = gaps[len(gaps) // 2] if gaps else int(step_s * 1e9)
    return min(int(step_s * 1e9), typical) // 2


def backfill(
    recording: str | Path, output: str | Path, opts: Options, *, step_s: float = 15.0, force: bool = False
) -> tuple[int, int]:
    """Write ``output``; (points, samples) written. MemtopError when the recording has no
    wall-clock time to stamp the points with (a recording made before memtop recorded it)."""
    # prometheus_client here only: its timestamps and OpenMetrics encoder (with timestamps, which
    # memtop's own writer leaves to it), imported by this one-shot command, not by the exporter
    from prometheus_client.registry import CollectorRegistry
    from prometheus_client.samples import Timestamp

    from memtop.stream.recfile import Recording
    from memtop.stream.replay import ReplaySource

    files.check_target(output, force)
    source = ReplaySource(Recording.load(recording), at_s=0)
    runner = Runner(source, interval_s=step_s, checkpoints=False)
    acc = Accumulators()
    merged: dict[str, Metric] = {}
    order: dict[str, int] = {}
    points = 0
    index = source.recording.index
    slack_ns = _slack_ns(index, step_s)
    step_ns = int(step_s * 1e9)
    due_ns: int | None = None  # the next point's time on the grid of steps from the first sample
    for ts in index:
        source.seek_ns(ts)
        if due_ns is not None and ts < due_ns - slack_ns and ts != index[-1]:
            continue
        # the grid, not this sample's own time, sets the next point: a tick a few ms late must
        # not push every later point back and make the next on-time tick look early
        due_ns = index[0] + ((ts + slack_ns - index[0]) // step_ns + 1) * step_ns
        wall = wall_ns(runner.state, ts)
        if wall is None:
            raise MemtopError(
                f"{recording}: no wall-clock time in the recording to stamp the points with",
                "record it again with this memtop (its host facts carry the clock)",
            )
        stamp = Timestamp(wall // 1_000_000_000, wall % 1_000_000_000)
        budget = Budget(opts.max_series)
        for fam in families(runner.state, opts, acc):
            fam = budget.take(fam)
            target = merged.get(fam.name)
            if target is None:
                target = merged[fam.name] = Metric(fam.name, fam.documentation, fam.type, fam.unit)
                order[fam.name] = len(order)
            target.samples.extend(Sample(s.name, s.labels, s.value, stamp) for s in fam.samples)
        points += 1
    source.close()
    samples = 0
    for fam in merged.values():
        # one series' points in time order; within a point, its samples as the family gave them
        # (a histogram's buckets by le, then count and sum)
        keyed = [
            (tuple(sorted((k, v) for k, v in s.labels.items() if k != "le")), s.timestamp, i, s)
            for i, s in enumerate(fam.samples)
        ]
        keyed.sort(key=lambda t: (t[0], float(t[1]) if t[1] is not None else 0.0, t[2]))
        fam.samples = [t[3] for t in keyed]
        samples += len(fam.samples)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Merged([merged[name] for name in sorted(order, key=lambda n: order[n])]))
    # (its OpenMetrics encoder is untyped: taken as the callable it is)
    encode: Callable[[CollectorRegistry], bytes] = importlib.import_module(
        "prometheus_client.openmetrics.exposition"
    ).generate_latest
    files.write_atomic(output, encode(registry), force=force)
    return points, samples
