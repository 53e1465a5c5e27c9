#!/usr/bin/env python3
"""Per-op cost of allocation tracing: bare vs bcc memleak vs memtop's memleak probe.

One malloc-heavy workload (bench/malloc_churn.c: malloc or calloc + free per op, from a stack a
dozen frames deep) runs for the whole bench and reports its op count every 100 ms. Around that
same running process the tracers attach and detach in alternation, several rounds:

    bare · bcc memleak (/usr/sbin/memleak-bpfcc -p PID) · bare · memtop · bare · …

Each phase skips its first second (attach, warm-up) and measures ns per op over the rest. The
result is the median per configuration, the added cost (median − median bare) and the ratio of
memtop's added cost to bcc memleak's. Other load on the machine moves all phases alike; the
alternation and the medians keep it from favouring either tracer.

Writes bench/results/leaks_cost.json (bench/report.py puts it in bench/RESULTS.md).

usage: sudo .venv/bin/python bench/leaks_cost.py [--rounds 3] [--phase 6] [--variants] [--stacks]
       --sampling adds memtop with byte sampling (512 KiB) and the trap floor (the same probe
       points with programs that return at once);
       --stacks adds memtop with bpf_get_stackid's stack walk instead of the program's own;
       --variants adds memtop with probes at function entry (as bcc places them) and with
       requested sizes kept by entry probes (the non-glibc mode), to show what each choice buys.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import machine, polled, save, summary  # noqa: E402

from memtop.linux import bcc_compat  # noqa: E402
from memtop.probes.leaks import LeaksProbe  # noqa: E402

BCC_MEMLEAK = "/usr/sbin/memleak-bpfcc"


class Workload:
    def __init__(self, seconds: float, frame_pointers: bool = True) -> None:
        src = ROOT / "bench" / "malloc_churn.c"
        fp = "-fno-omit-frame-pointer" if frame_pointers else "-fomit-frame-pointer"
        exe = Path(tempfile.gettempdir()) / f"memtop-bench-malloc_churn{fp}"
        subprocess.run(["gcc", "-O1", "-g", fp, "-o", str(exe), str(src)], check=True)
        self.proc = subprocess.Popen([str(exe), str(seconds)], stdout=subprocess.PIPE, text=True)
        self.samples: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        while not self.samples:
            time.sleep(0.05)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            t, n = line.split()
            with self._lock:
                self.samples.append((int(t), int(n)))

    def last(self) -> tuple[int, int]:
        with self._lock:
            return self.samples[-1]

    def ns_per_op(self, seconds: float) -> float:
        a = self.last()
        time.sleep(seconds)
        b = self.last()
        return (b[0] - a[0]) / max(1, b[1] - a[1])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def phase_bare(w: Workload, measure_s: float) -> float:
    time.sleep(0.5)
    return w.ns_per_op(measure_s)


def phase_bcc(w: Workload, measure_s: float) -> float:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [BCC_MEMLEAK, "-p", str(w.proc.pid)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # compiles, then prints this just before attaching
            if line.startswith("Attaching"):
                break
        else:
            raise RuntimeError("bcc memleak did not start")
        threading.Thread(target=lambda: [None for _ in proc.stdout or []], daemon=True).start()
        time.sleep(2.0)  # its ~20 attaches, then warm-up
        return w.ns_per_op(measure_s)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        time.sleep(0.5)


def phase_memtop(
    w: Workload,
    measure_s: float,
    *,
    place_probes: bool = True,
    exact_sizes: bool | None = None,
    sample_bytes: int = 0,
    trap_floor: bool = False,
    kernel_stacks: bool = False,
) -> float:
    probe = LeaksProbe(
        [w.proc.pid],
        place_probes=place_probes,
        exact_sizes=exact_sizes,
        sample_bytes=sample_bytes,
        trap_floor=trap_floor,
        kernel_stacks=kernel_stacks,
    )
    with polled(probe):
        return w.ns_per_op(measure_s)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--phase", type=float, default=5.0, help="seconds measured per phase")
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--sampling", action="store_true", help="add byte sampling and the trap floor")
    ap.add_argument("--stacks", action="store_true", help="add the kernel's stack walk (bpf_get_stackid)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (BPF)", file=sys.stderr)
        return 2
    bcc_compat.ensure_headers()  # also points BCC_KERNEL_SOURCE at the header tree for memleak-bpfcc
    configs: dict[str, Callable[[Workload, float], float]] = {
        "bare": phase_bare,
        "bcc memleak": phase_bcc,
        "memtop": phase_memtop,
    }
    if args.variants:
        configs["memtop, probes at entry"] = lambda w, s: phase_memtop(w, s, place_probes=False)
        configs["memtop, requested sizes"] = lambda w, s: phase_memtop(w, s, exact_sizes=True)
    if args.sampling:
        # issue 25: byte sampling against the traps' own cost on the same probe points
        configs["memtop, byte sampling 512 KiB"] = lambda w, s: phase_memtop(w, s, sample_bytes=524288)
        configs["memtop, trap floor (empty programs)"] = lambda w, s: phase_memtop(w, s, trap_floor=True)
    if args.stacks:
        configs["memtop, kernel's stack walk"] = lambda w, s: phase_memtop(w, s, kernel_stacks=True)
    order = [c for c in configs if c != "bare"]
    w = Workload(seconds=3600)
    results: dict[str, list[float]] = {c: [] for c in configs}
    try:
        for r in range(args.rounds):
            for c in order:
                results["bare"].append(phase_bare(w, args.phase))
                results[c].append(configs[c](w, args.phase))
                print(
                    f"round {r + 1}: bare {results['bare'][-1]:.1f} ns/op, {c} {results[c][-1]:.1f} ns/op",
                    flush=True,
                )
            results["bare"].append(phase_bare(w, args.phase))
    finally:
        w.stop()
    med = {c: statistics.median(v) for c, v in results.items()}
    bare = med["bare"]
    print(f"\nper op (malloc or calloc + free), medians of {args.rounds} rounds:")
    for c in configs:
        added = med[c] - bare
        line = f"  {c:28s} {med[c]:9.1f} ns/op"
        if c != "bare":
            line += f"   added {added / 1000:7.2f} µs/op   ({med[c] / bare:,.0f}× bare)"
        print(line)
    added_bcc = med["bcc memleak"] - bare
    for c in configs:
        if c.startswith("memtop"):
            print(f"  {c} added cost / bcc memleak added cost = {(med[c] - bare) / added_bcc:.2f}")
    save(
        "leaks_cost",
        {
            "case": "malloc+free cost",
            "machine": machine(),
            "metric": "ns per op (malloc or calloc + free, 12-frame stack)",
            "rounds": args.rounds,
            "summary": summary(results, "bare"),
            "added_ns": {c: med[c] - bare for c in configs if c != "bare"},
            "added_vs_bcc": {c: (med[c] - bare) / added_bcc for c in configs if c.startswith("memtop")},
            "samples": results,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
