#!/usr/bin/env python3
"""The budgeted leaks tracer's windows, instrumented (issue 40's cost against its budget): is a
cost above the budget the controller's overshoot or the measurement's noise?

One run, in this process: the leaks probe on a budget (memtop.probes.leaks LeaksProbe, polled
every second as the live source does) tracing tests/workloads/budgetchurn.c at RATE malloc+free/s,
beside an untraced twin started with it. Per window it prints the slice and period planned, the
probes' time on, the attach and detach times, the calls counted and the targets' added CPU as
estimated and as the tracer measured it. At the end, side by side: the tracer's own account of
its cost (CostMeter: the targets' added CPU and memtop's), /proc's (the target's CPU less its
twin's, this process's CPU from /proc/self/stat), the BPF programs' run time as the kernel counts
it (BPF_ENABLE_STATS held for the run: the fd is closed at the end, which restores the
machine's setting) and the duty cycle, planned and actual. ``--jump-at S`` multiplies the
target's rate by ten after S seconds (SIGUSR1), the controller's rate-jump case.

usage: sudo .venv/bin/python bench/leaks_windows.py [--rate 100000] [--budget 1] [--duration 120]
           [--jump-at 0] [--json PATH] [--save]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import machine, save  # noqa: E402

from memtop.probes import bpfstats  # noqa: E402
from memtop.probes.leaks import LeaksProbe  # noqa: E402

WORKLOAD = ROOT / "tests" / "workloads" / "budgetchurn.c"
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int | str) -> float:
    """A process's CPU time (s): every thread's utime + stime, /proc/PID/stat (clock ticks)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    f = text[text.rindex(")") + 2 :].split()
    return (int(f[11]) + int(f[12])) / _CLK_TCK


def sched_s(pid: int) -> float:
    """A single-threaded process's time on CPU (s), /proc/PID/schedstat."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def start(exe: Path, rate: int, seconds: float, traced: bool) -> subprocess.Popen[str]:
    args = [str(exe), str(rate), "17476", "4096", str(seconds)] + ([] if traced else ["nowait"])
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("ready"), line
    return proc


def leak_program_stats(probe: LeaksProbe) -> tuple[int, int]:
    """(run_time_ns, run_cnt) summed over the leaks probe's uprobe programs."""
    ns = runs = 0
    assert probe.bpf is not None
    for fn in (getattr(probe.bpf, "funcs", None) or {}).values():
        st = bpfstats.run_stats(int(fn.fd))
        if st is not None:
            ns, runs = ns + st[0], runs + st[1]
    return ns, runs


def run(rate: int, budget_pct: float, duration: float, jump_at: float, tmp: Path) -> dict[str, Any]:
    exe = tmp / "budgetchurn"
    subprocess.run(
        ["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline", "-o", str(exe), str(WORKLOAD)],
        check=True,
    )
    target = start(exe, rate, duration + 120, traced=True)
    twin = start(exe, rate, duration + 120, traced=False)
    stats_fd = bpfstats.enable()
    probe = LeaksProbe([target.pid], budget=budget_pct / 100, calls_per_s=rate)
    try:
        probe.load()
        t0 = time.monotonic()
        c0 = (sched_s(target.pid), sched_s(twin.pid), cpu_s("self"))
        jumped = jump_at <= 0
        printed = 0
        while time.monotonic() - t0 < duration:
            if not jumped and time.monotonic() - t0 >= jump_at:
                for p in (target, twin):
                    p.send_signal(signal.SIGUSR1)
                jumped = True
                print(f"-- {time.monotonic() - t0:.1f} s: rate x10", flush=True)
            probe.poll()
            for w in list(probe.meter.log)[printed:]:
                print(
                    f"window {w.index}: planned {w.planned_on_s:.3f}/{w.planned_period_s:.1f} s, on "
                    f"{w.on_s:.3f} s (attach {w.attach_s:.3f}, detach {w.detach_s:.3f}), "
                    f"{w.calls} calls, target +{w.target_s:.3f} s "
                    f"({'measured' if w.measured else 'estimated'}; estimate {w.estimated_s:.3f}), "
                    f"memtop {w.own_s:.3f} s",
                    flush=True,
                )
                printed += 1
            time.sleep(1.0)
        span = time.monotonic() - t0
        c1 = (sched_s(target.pid), sched_s(twin.pid), cpu_s("self"))
        prog_ns, prog_runs = leak_program_stats(probe) if stats_fd is not None else (0, 0)
        m = probe.meter
        log = list(m.log)
        on = sum(w.on_s for w in log)
        planned_on = sum(w.planned_on_s for w in log)
        result = {
            "rate_pairs_per_s": rate,
            "budget_pct": budget_pct,
            "jump_at_s": jump_at,
            "span_s": span,
            "windows": len(log),
            "proc_target_added_pct": 100 * ((c1[0] - c0[0]) - (c1[1] - c0[1])) / span,
            "proc_memtop_pct": 100 * (c1[2] - c0[2]) / span,
            "meter_target_pct": 100 * m.target_s / span,
            "meter_own_pct": 100 * m.own_s / span,
            "bpf_run_time_pct": 100 * prog_ns / 1e9 / span,
            "bpf_ns_per_run": prog_ns / prog_runs if prog_runs else None,
            "duty_planned_pct": 100 * planned_on / span,
            "duty_actual_pct": 100 * on / span,
            "on_beyond_slice_s": on - planned_on,
            "attach_s_median": sorted(w.attach_s for w in log)[len(log) // 2] if log else None,
            "detach_s_median": sorted(w.detach_s for w in log)[len(log) // 2] if log else None,
            "cost_scale": m.scale(),
            "log": [dataclasses.asdict(w) for w in log],
        }
    finally:
        probe.close()
        bpfstats.disable(stats_fd)
        for p in (target, twin):
            p.kill()
            p.wait()
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=int, default=100_000)
    ap.add_argument("--budget", type=float, default=1.0, help="%% of a core")
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--jump-at", type=float, default=0.0, help="s: the rate x10 then (0: never)")
    ap.add_argument("--json", type=Path, help="write the result here")
    ap.add_argument("--save", action="store_true", help="into bench/results/leaks_windows.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix=f"memtop-leakwindows-{os.getpid()}-") as d:
        r = run(args.rate, args.budget, args.duration, args.jump_at, Path(d))
    print(json.dumps({k: v for k, v in r.items() if k != "log"}, indent=1))
    if args.json is not None:
        args.json.write_text(json.dumps(r, indent=1) + "\n")
    if args.save:
        save("leaks_windows", {"machine": machine(), "duration_s": args.duration, **r})
    return 0


if __name__ == "__main__":
    sys.exit(main())
