"""Case: what the drill-in's per-pid fault events cost the process drilled into (issue 27: huge page
faults per process are counted on them, on demand, with their cost shown).

The fault-heavy workload (bench/workloads/refault.c, 64 MiB re-faulted 16x, waiting for a line on
stdin before its first fault) runs bare, or with the fault-stack probe the drill-in attaches
(perf software page-fault events on each of its threads, a BPF program taking the user stack and
the mapping of each fault) attached to its pid first; alternating, medians of the workload's own
ns per fault. The drill-in's fault sections quote this figure (memtop/views/process.py).

usage: sudo .venv/bin/python bench/drill_fault_cost.py [ROUNDS]"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from typing import Any

from harness import build, machine, parse_kv, save, summary

from memtop.probes.faultstack import FaultStackProbe


def run(exe: str, drill: bool) -> float:
    proc = subprocess.Popen(
        [exe, "64", "16"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, REFAULT_WAIT="1"),
    )
    assert proc.stdin is not None and proc.stdout is not None
    pid = int(proc.stdout.readline().split()[1])
    probe = FaultStackProbe(pid) if drill else None
    try:
        if probe is not None:
            probe.load()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out = proc.stdout.read()
        proc.wait()
        if probe is not None:
            probe.poll()
    finally:
        if probe is not None:
            probe.close()
    return parse_kv(out)["ns_per_fault"]


def main(rounds: int = 5) -> dict[str, Any]:
    exe = str(build("refault"))
    samples: dict[str, list[float]] = {"bare": [], "drill-in": []}
    for _ in range(rounds):
        for name in samples:
            samples[name].append(run(exe, name == "drill-in"))
    result: dict[str, Any] = {
        "machine": machine(),
        "rounds": rounds,
        "metric": "ns per fault (workload's own clock)",
        "summary": summary(samples, "bare"),
        "samples": samples,
    }
    save("drill_fault_cost", result)
    return result


if __name__ == "__main__":
    r = main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
    for k, v in r["summary"].items():
        print(
            f"{k:10} median {v['median']:.1f} ns/fault  ratio {v['ratio']:.3f}  (n={v['n']})", file=sys.stderr
        )
    print(statistics.median(r["samples"]["drill-in"]) / statistics.median(r["samples"]["bare"]))
