#!/usr/bin/env python3
"""The leaks preflight's expected cost against the cost measured once tracing runs (issue 25, item 3).

A program doing malloc+free pairs at a steady rate (tests/workloads/paced.c; not CPU-bound, so
what tracing costs it shows as CPU time it spends, not as a slower loop) runs for the whole bench.
Its CPU time is read from /proc/PID/schedstat (ns on CPU) every 20 ms. Around it, in alternation,
several rounds at each rate:

    bare · preflight (memtop.probes.leakrate: 1 s count, then detached) · bare · exact tracing
    (the leaks probe) · bare · byte sampling (512 KiB) · bare · …

The preflight's document gives the expected cost of exact and of sampled tracing (CPU s/s) and
its own cost; the measured cost of each is the target's CPU s/s in that phase minus the median of
its bare phases. Each tracing phase skips its first second. Medians per rate.

Writes bench/results/leaks_preflight.json (bench/report.py puts it in bench/RESULTS.md).

usage: sudo .venv/bin/python bench/leaks_preflight.py [--rounds 3] [--rates 20000,100000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import machine, polled, save  # noqa: E402

from memtop.linux import bcc_compat  # noqa: E402
from memtop.probes.leakrate import LeakRateProbe  # noqa: E402
from memtop.probes.leaks import LeaksProbe  # noqa: E402
from memtop.records.leaks import LeakPreflight  # noqa: E402
from memtop.views.leaks import PreflightDoc, preflight_doc  # noqa: E402

PHASE_S = 3.0
SAMPLE_BYTES = 524288


class Paced:
    """The workload, with its CPU time sampled (CLOCK_MONOTONIC ns, CPU ns) every 20 ms."""

    def __init__(self, per_s: int) -> None:
        src = ROOT / "tests" / "workloads" / "paced.c"
        exe = Path(tempfile.gettempdir()) / "memtop-bench-paced"
        subprocess.run(["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(exe), str(src)], check=True)
        self.proc = subprocess.Popen([str(exe), str(per_s), "3600"], stdout=subprocess.PIPE, text=True)
        self.per_s = per_s
        self.cpu: list[tuple[int, int]] = []
        self.pairs: list[tuple[int, int]] = []
        self._stop = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()
        threading.Thread(target=self._read, daemon=True).start()
        time.sleep(0.5)

    def _sample(self) -> None:
        path = f"/proc/{self.proc.pid}/schedstat"
        while not self._stop.wait(0.02):
            try:
                ns = int(Path(path).read_text().split()[0])
            except (OSError, ValueError, IndexError):
                return
            self.cpu.append((time.monotonic_ns(), ns))

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if len(parts) == 2:
                self.pairs.append((int(parts[0]), int(parts[1])))

    @staticmethod
    def _at(points: list[tuple[int, int]], t: int) -> float:
        pts = list(points)
        for (t0, v0), (t1, v1) in zip(pts, pts[1:], strict=False):
            if t0 <= t <= t1:
                return v0 + (v1 - v0) * (t - t0) / max(1, t1 - t0)
        raise RuntimeError("no sample around that time")

    def rates(self, t0: int, t1: int) -> tuple[float, float]:
        """(CPU s/s, pairs/s) between two CLOCK_MONOTONIC times (both already sampled)."""
        time.sleep(0.1)  # the samples after t1
        s = (t1 - t0) / 1e9
        cpu = (self._at(self.cpu, t1) - self._at(self.cpu, t0)) / 1e9 / s
        return cpu, (self._at(self.pairs, t1) - self._at(self.pairs, t0)) / s

    def window(self, seconds: float) -> tuple[float, float]:
        t0 = time.monotonic_ns()
        time.sleep(seconds)
        return self.rates(t0, time.monotonic_ns())

    def stop(self) -> None:
        self._stop.set()
        self.proc.kill()
        self.proc.wait()


def traced(w: Paced, sample_bytes: int) -> tuple[float, float]:
    with polled(LeaksProbe([w.proc.pid], sample_bytes=sample_bytes)):
        return w.window(PHASE_S)


def preflight(w: Paced) -> tuple[PreflightDoc, float, float]:
    probe = LeakRateProbe([w.proc.pid], sample_bytes=SAMPLE_BYTES)
    try:
        probe.load()
    finally:
        probe.close()
    (rec,) = probe.poll()
    assert isinstance(rec, LeakPreflight) and rec.state == "measured", rec
    doc = preflight_doc(rec)
    assert doc is not None
    cpu, pairs = w.rates(*probe.window)
    time.sleep(0.5)
    return doc, cpu, pairs


def run_rate(per_s: int, rounds: int) -> dict[str, Any]:
    w = Paced(per_s)
    bare: list[float] = []
    phases: dict[str, list[float]] = {"preflight": [], "exact": [], "sampled": []}
    achieved: dict[str, list[float]] = {"bare": [], "preflight": [], "exact": [], "sampled": []}
    predicted: dict[str, list[float]] = {"exact": [], "sampled": [], "preflight": [], "trap_ns": []}
    counted: list[float] = []
    try:
        for r in range(rounds):
            for phase in ("preflight", "exact", "sampled"):
                cpu, pairs = w.window(PHASE_S)
                bare.append(cpu)
                achieved["bare"].append(pairs)
                if phase == "preflight":
                    doc, cpu, pairs = preflight(w)
                    exact, sampled, own = (
                        doc["exact_cost_cpu"],
                        doc["sampled_cost_cpu"],
                        doc["own_cost_cpu_s"],
                    )
                    window, trap, calls = doc["window_s"], doc["trap_ns"], doc["allocation_calls_per_s"]
                    # a measured preflight (preflight() checked) has every figure
                    assert exact is not None and sampled is not None and own is not None
                    assert window is not None and trap is not None and calls is not None
                    predicted["exact"].append(exact)
                    predicted["sampled"].append(sampled)
                    predicted["preflight"].append(own / window)
                    predicted["trap_ns"].append(trap)
                    counted.append(calls)
                else:
                    cpu, pairs = traced(w, SAMPLE_BYTES if phase == "sampled" else 0)
                phases[phase].append(cpu)
                achieved[phase].append(pairs)
                print(
                    f"{per_s}/s round {r + 1}: bare {bare[-1]:.3f}, {phase} {cpu:.3f} CPU s/s "
                    f"({pairs:,.0f} pairs/s)",
                    flush=True,
                )
        w.window(PHASE_S)
    finally:
        w.stop()
    base = statistics.median(bare)
    med = {k: statistics.median(v) for k, v in phases.items()}
    return {
        "rate_pairs_per_s": per_s,
        "counted_allocations_per_s": statistics.median(counted),
        "achieved_pairs_per_s": {k: statistics.median(v) for k, v in achieved.items()},
        "bare_cpu": base,
        "measured_added_cpu": {k: v - base for k, v in med.items()},
        "predicted_cpu": {k: statistics.median(v) for k, v in predicted.items() if k != "trap_ns"},
        "trap_ns": statistics.median(predicted["trap_ns"]),
        "samples": {"bare": bare, **phases, **{f"predicted {k}": v for k, v in predicted.items()}},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rates", default="20000,100000", help="malloc+free pairs per second, comma-separated")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (BPF)", file=sys.stderr)
        return 2
    bcc_compat.ensure_headers()
    results = [run_rate(int(r), args.rounds) for r in args.rates.split(",")]
    print("\nexpected (preflight) vs measured added CPU s/s, medians:")
    for res in results:
        p, m = res["predicted_cpu"], res["measured_added_cpu"]
        print(
            f"  {res['rate_pairs_per_s']:>7}/s: exact {p['exact']:.3f} vs {m['exact']:.3f}, sampled "
            f"{p['sampled']:.3f} vs {m['sampled']:.3f}, the count itself {p['preflight']:.3f} vs "
            f"{m['preflight']:.3f} (trap {res['trap_ns']:.0f} ns)"
        )
    save(
        "leaks_preflight",
        {
            "case": "leaks preflight: expected vs measured cost",
            "machine": machine(),
            "metric": "the target's CPU s/s added (schedstat), paced malloc+free pairs",
            "rounds": args.rounds,
            "rates": results,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
