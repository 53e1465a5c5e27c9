"""Case 1: fault-heavy workload (64 MiB re-faulted 32x): bare vs memtop headless with all default
panes attached vs a bpftrace one-liner counting faults by comm. The targets (memtop's slowdown, and
no worse than the one-liner) are in bench/report.py."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from harness import alternate, background, build, machine, memtop_headless, nothing, parse_kv, save, summary

BPFTRACE = ["bpftrace", "-e", "tracepoint:exceptions:page_fault_user { @[comm] = count(); }"]


def main(rounds: int = 5) -> dict[str, Any]:
    exe = build("refault")

    def once() -> dict[str, float]:
        out = subprocess.run([str(exe), "64", "32"], capture_output=True, text=True, check=True).stdout
        return parse_kv(out)

    samples = alternate(
        {"bare": nothing, "memtop": memtop_headless, "bpftrace one-liner": lambda: background(BPFTRACE)},
        once,
        "ns_per_fault",
        rounds=rounds,
    )
    result: dict[str, Any] = {
        "case": "fault-heavy",
        "machine": machine(),
        "metric": "ns per fault (workload's own clock)",
        "summary": summary(samples, "bare"),
        "samples": samples,
    }
    save("fault_overhead", result)
    return result


if __name__ == "__main__":
    r = main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
    for k, v in r["summary"].items():
        print(f"{k:20} median {v['median']:.1f} ns/fault  ratio {v['ratio']:.3f}  (n={v['n']})")
