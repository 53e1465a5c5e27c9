"""Case: the Kernel pane's cost (issue 26).

* **pane shown, no tracing** (target ≤ 2 % of a core): one tick of the pane in process, as the app
  runs it once a second: the kernel probe's poll (meminfo, vmstat, slabinfo, buddyinfo every tick;
  vmallocinfo and allocinfo every 5th), the state's apply and the view's document; ms per tick
  at 1 tick/s is % of a core (ms / 10).
* **on-demand slab tracing** (target ≤ 10 % slower with sampling): two slab-heavy workloads
  (bench/workloads/pipe_churn.c: pipe() + close() x2 per op, ~9 allocations and as many frees;
  bench/workloads/stat_missing.c: stat() of missing names, a names_cache allocation and free per
  op) timed bare and with each slab tracer attached, alternated over rounds, medians, ratios (by
  wall clock, and by the workloads' own CPU time, which leaves out the time other load on a
  shared machine preempted them):
  the default (`sampled`: the slabtrace probe, the two allocation hooks, 1 in 64 sampled; and
  `exact`, 1 in 1, for comparison), `frees` (the slabfrees probe, `f`: the free hooks too, for
  per call site net growth) and `stacks` (slabstacks, `k`: a stack walk per sampled allocation);
  and the floors: the same hooks with programs that return at once (what the hooks cost before
  any program work: no sampling can go below it), `floor_allocs` the two allocation hooks,
  `floor` all four. The tracers run on raw tracepoints where the kernel's BTF allows (here it
  does); the default on the regular tracepoints (the perf tracepoint path: a record built per
  event, the fallback without BTF) and its floor are timed in the same rounds, for comparison.
  The tracers' own cost as the kernel measured it (BPF_ENABLE_STATS: ns per event, share of a
  CPU) is what the pane shows; it is recorded here, per tracer.

usage: sudo .venv/bin/python bench/kernel_cost.py [ROUNDS]"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from harness import QUIET_S, build, machine, pane_tick_ms, parse_kv, save, summary

from memtop.probes.kernel import KernelProbe
from memtop.probes.slabtrace import SlabFreesProbe, SlabStacksProbe, SlabTraceProbe
from memtop.records.kernel import SlabTrace

OPS = 200_000


def tick_ms(ticks: int = 30) -> dict[str, float]:
    probe = KernelProbe()
    probe.load()
    try:
        return pane_tick_ms(probe, "kernel", ticks, pause_s=0.05)[0]
    finally:
        probe.close()


class Floor(SlabTraceProbe):
    """The two allocation hooks with programs that return at once: what attaching costs."""

    def cflags(self) -> list[str]:
        return [*super().cflags(), "-DFLOOR"]


class FloorFrees(SlabFreesProbe):
    """The four hooks (allocations and frees) with programs that return at once."""

    def cflags(self) -> list[str]:
        return [*super().cflags(), "-DFLOOR"]


class Traced:
    """A slab tracer (``cls``) attached for a phase; its own measured cost read at the end."""

    def __init__(self, cls: type[SlabTraceProbe], sample: int = 64, raw: bool = True) -> None:
        self.cls = cls
        self.sample = sample
        self.raw = raw
        self.costs: list[dict[str, float]] = []
        self.ns: list[float] = []

    @contextmanager
    def __call__(self) -> Iterator[None]:
        probe = self.cls(sample=self.sample, raw=self.raw)
        probe.load()
        assert probe.raw == self.raw, probe.note()
        first = probe.poll()[0]
        t0 = time.monotonic()
        try:
            yield
        finally:
            last = probe.poll()[0]
            dt = time.monotonic() - t0
            probe.close()
            assert isinstance(first, SlabTrace) and isinstance(last, SlabTrace)
            self.costs.append(
                {"events_per_s": (last.events - first.events) / dt, "dropped": float(last.dropped)}
            )


@contextmanager
def bare() -> Iterator[None]:
    yield


def main(rounds: int = 5) -> dict[str, Any]:
    pipes, stats = build("pipe_churn"), build("stat_missing")
    tmp = Path(tempfile.mkdtemp(prefix="memtop-bench-"))

    def run_once() -> dict[str, float]:
        a = subprocess.run([str(pipes), str(OPS)], check=True, capture_output=True, text=True).stdout
        b = subprocess.run([str(stats), str(OPS * 5), str(tmp)], check=True, capture_output=True, text=True)
        pipe, stat = parse_kv(a), parse_kv(b.stdout)
        return {
            "pipe": pipe["ns_per_op"],
            "stat": stat["ns_per_op"],
            "pipe_cpu": pipe["cpu_ns_per_op"],
            "stat_cpu": stat["cpu_ns_per_op"],
        }

    sampled, exact, frees = Traced(SlabTraceProbe), Traced(SlabTraceProbe, 1), Traced(SlabFreesProbe)
    floor_allocs, floor = Traced(Floor), Traced(FloorFrees)
    variants: dict[str, Callable[[], AbstractContextManager[None]]] = {
        "bare": bare,
        "floor_allocs": floor_allocs,
        "sampled": sampled,
        "floor": floor,
        "frees": frees,
        "exact": exact,
        "stacks": Traced(SlabStacksProbe),
        "floor_tracepoints": Traced(Floor, raw=False),
        "sampled_tracepoints": Traced(SlabTraceProbe, raw=False),
    }
    samples: dict[str, list[float]] = {k: [] for k in variants}
    stat_samples: dict[str, list[float]] = {k: [] for k in variants}
    # the workloads' own CPU time: what the hooks add to them, without the time other load on this
    # shared machine preempted them (the wall-clock figures' main noise)
    cpu_samples: dict[str, list[float]] = {k: [] for k in variants}
    cpu_stat_samples: dict[str, list[float]] = {k: [] for k in variants}
    time.sleep(QUIET_S)
    try:
        for _ in range(rounds):
            for name, ctx in variants.items():
                with ctx():
                    for _ in range(3):
                        got = run_once()
                        samples[name].append(got["pipe"])
                        stat_samples[name].append(got["stat"])
                        cpu_samples[name].append(got["pipe_cpu"])
                        cpu_stat_samples[name].append(got["stat_cpu"])
    finally:
        tmp.rmdir()
    # what the pane shows as the tracer's cost: BPF stats held while the workload runs once (the
    # timed phases above ran without them: they poll at once, which closes the first window); the
    # empty programs' figure is what the stats' own clock reads add to every program's
    for tr in (sampled, exact, frees, floor_allocs, floor):
        for _ in range(3):
            probe = tr.cls(sample=tr.sample)
            probe.load()
            try:
                run_once()
                last = probe.poll()[0]
            finally:
                probe.close()
            assert isinstance(last, SlabTrace) and last.runs
            tr.ns.append(last.run_ns / last.runs)
    ticks = [tick_ms() for _ in range(3)]
    tick = {k: statistics.median(t[k] for t in ticks) for k in ticks[0]}

    def med(tr: Traced) -> dict[str, float]:
        out = {k: statistics.median(c[k] for c in tr.costs) for k in tr.costs[0]}
        out["ns_per_event"] = statistics.median(tr.ns)
        out["cpu_pct"] = out["events_per_s"] * out["ns_per_event"] / 1e7
        return out

    result: dict[str, Any] = {
        "machine": machine(),
        "pane_tick": tick,
        "pane_cpu_pct": tick["tick_ms"] / 10,
        "workload": "pipe_churn: pipe() + 2 close() per op",
        "ns_per_op": summary(samples, "bare"),
        "workload_stat": "stat_missing: stat() of 1000 missing names, over and over",
        "ns_per_stat": summary(stat_samples, "bare"),
        "cpu_ns_per_op": summary(cpu_samples, "bare"),
        "cpu_ns_per_stat": summary(cpu_stat_samples, "bare"),
        "tracer_cost": {
            "sampled": med(sampled),
            "exact": med(exact),
            "frees": med(frees),
            "floor_allocs": med(floor_allocs),
            "floor": med(floor),
        },
        "floor_ratio": statistics.median(samples["floor"]) / statistics.median(samples["bare"]),
        "floor_allocs_ratio": statistics.median(samples["floor_allocs"]) / statistics.median(samples["bare"]),
        "sampled_vs_floor": statistics.median(samples["sampled"])
        / statistics.median(samples["floor_allocs"]),
        "frees_vs_floor": statistics.median(samples["frees"]) / statistics.median(samples["floor"]),
        "floor_ratio_tracepoints": statistics.median(samples["floor_tracepoints"])
        / statistics.median(samples["bare"]),
        "hook": "raw tracepoints (regular tracepoints: the *_tracepoints variants)",
        "modes": {
            "sampled": "the default (slabtrace): the two allocation hooks, 1 in 64 sampled",
            "exact": "the default, 1 in 1",
            "frees": "slabfrees (f): the four hooks, allocations 1 in 64 sampled, every free looked up",
            "stacks": "slabstacks (k): the allocation hooks, a kernel stack per sampled allocation",
            "floor_allocs": "the two allocation hooks, programs that return at once",
            "floor": "the four hooks, programs that return at once",
        },
        "sample": 64,
        "rounds": rounds,
    }
    save("kernel_cost", result)
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5), indent=1))
