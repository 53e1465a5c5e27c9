#!/usr/bin/env python3
"""Where the leaks program's time goes per malloc: the user-stack walk and its variants.

Issue 25: exact tracing at <= 0.2x bcc memleak's added cost. Around one running
bench/malloc_churn.c (malloc or calloc + free from an 11-frame stack) the leaks probe attaches in
each variant below, alternating with bare phases, several rounds. Each phase reads, with BPF
run-time stats held on (kernel.bpf_stats_enabled), the ns per run of malloc's return program
(``ret_hdr``, plus ``enter_stack`` where the stack is taken at entry) and of free's (``enter_free``),
and the workload's ns per malloc+free; medians are reported, and the frames the stacks held.

    own walk             the program's own frame-pointer walk (the default): one bulk copy of the
                         stack's top, stops where the chain stops going up
    kernel walk          bpf_get_stackid(BPF_F_USER_STACK), the stack map's value 32 frames
      depth 127 / 16 / = frames
                         the stack map's value size (the walk's max depth): 127 is the sysctl's
                         cap, "= frames" is exactly the frames there are, so the walk never reads
                         past the last one
      FAST_STACK_CMP, REUSE_STACKID
                         bpf_get_stackid's flags (compare by hash only; replace a colliding bucket)
      1024 / 262144 buckets
                         the stack map's size (hashing and collisions)
      at malloc entry    taken by an entry program on malloc/calloc, handed to the return program
                         through the per-thread slots (the return probe's context has the uretprobe
                         trampoline to fix up in the callchain, the entry's has not)
    no stack             the rest of the program (size, maps, time): what a free stack would leave
    empty programs       the trap floor
    no frame pointers    the same workload built with -fomit-frame-pointer (glibc has none either)

The end-to-end figures include the stats' own two clock reads per program run; compare variants
with each other, and take the cost against bcc memleak from bench/leaks_cost.py.

Writes bench/results/leaks_stacks.json (bench/report.py puts it in bench/RESULTS.md).

usage: sudo .venv/bin/python bench/leaks_stacks.py [--rounds 3] [--phase 2.5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from harness import machine, save  # noqa: E402
from leaks_cost import Workload, phase_bare  # noqa: E402

from memtop.linux import bcc_compat  # noqa: E402
from memtop.probes import bpfstats  # noqa: E402
from memtop.probes.leaks import LeaksProbe  # noqa: E402

BPF_F_FAST_STACK_CMP = 1 << 9
BPF_F_REUSE_STACKID = 1 << 10


class _Probe(LeaksProbe):
    """LeaksProbe with cflags only this bench sets (bpf/leaks.bpf.c: STACK_NONE, STACK_FLAGS)."""

    def __init__(self, pids: Sequence[int], extra: Sequence[str] = (), **kw: Any) -> None:
        super().__init__(pids, **kw)
        self.extra = list(extra)

    def cflags(self) -> list[str]:
        return super().cflags() + self.extra


Variant = tuple[str, list[str], dict[str, Any]]


def variants(frames: int) -> list[Variant]:
    k: dict[str, Any] = {"kernel_stacks": True}
    return [
        ("own walk (default)", [], {}),
        ("kernel walk, depth 32", [], k),
        ("kernel walk, depth 127", [], {**k, "stack_depth": 127}),
        ("kernel walk, depth 16", [], {**k, "stack_depth": 16}),
        (f"kernel walk, depth = frames ({frames})", [], {**k, "stack_depth": frames}),
        ("kernel walk, FAST_STACK_CMP", [f"-DSTACK_FLAGS={BPF_F_FAST_STACK_CMP}"], k),
        ("kernel walk, REUSE_STACKID", [f"-DSTACK_FLAGS={BPF_F_REUSE_STACKID}"], k),
        ("kernel walk, 1024 buckets", [], {**k, "max_stacks": 1024}),
        ("kernel walk, 262144 buckets", [], {**k, "max_stacks": 262144}),
        ("kernel walk at malloc entry", [], {**k, "stack_at_entry": True}),
        ("no stack", ["-DSTACK_NONE=1"], {}),
        ("empty programs (trap floor)", [], {"trap_floor": True}),
    ]


NO_FP: list[Variant] = [
    ("no frame pointers: own walk", [], {}),
    ("no frame pointers: kernel walk", [], {"kernel_stacks": True}),
]


def _ns(fn: Any) -> tuple[int, int]:
    return bpfstats.run_stats(int(fn.fd)) or (0, 0)


def phase(w: Workload, measure_s: float, extra: list[str], kw: dict[str, Any]) -> dict[str, float]:
    """One attach: the workload's ns per op, each program's ns per run, the deepest stack's frames."""
    probe = _Probe([w.proc.pid], extra, **kw)
    probe.load()
    try:
        time.sleep(0.5)
        assert probe.bpf is not None
        names = [n for n in (b"ret_hdr", b"enter_stack", b"enter_free") if n in probe.bpf.funcs]
        before = {n: _ns(probe.bpf.funcs[n]) for n in names}
        ns_op = w.ns_per_op(measure_s)
        after = {n: _ns(probe.bpf.funcs[n]) for n in names}
        run = {n.decode(): (after[n][0] - before[n][0]) / max(1, after[n][1] - before[n][1]) for n in names}
        probe.poll()
        frames = 0
        if not kw.get("trap_floor") and "-DSTACK_NONE=1" not in extra:
            for _k, v in probe.bpf["stacks"].items():
                frames = max(frames, sum(1 for ip in v.ip if ip))
        lost = probe.counters()["stacks (no stack id)"]
        return {
            "ns_op": ns_op,
            "malloc_prog_ns": run.get("ret_hdr", 0.0) + run.get("enter_stack", 0.0),
            "free_prog_ns": run.get("enter_free", 0.0),
            "frames": float(frames),
            "lost_stacks": float(lost),
        }
    finally:
        probe.close()
        time.sleep(0.3)


def run_set(
    w: Workload, vs: list[Variant], rounds: int, measure_s: float, out: dict[str, list[dict[str, float]]]
) -> list[float]:
    bare: list[float] = []
    for r in range(rounds):
        for name, extra, kw in vs:
            bare.append(phase_bare(w, measure_s))
            got = phase(w, measure_s, extra, kw)
            out.setdefault(name, []).append(got)
            print(
                f"round {r + 1}: bare {bare[-1]:.1f} ns/op  {name:34s} {got['ns_op']:7.1f} ns/op  "
                f"malloc prog {got['malloc_prog_ns']:6.1f} ns  free prog {got['free_prog_ns']:5.1f} ns  "
                f"frames {got['frames']:.0f}",
                flush=True,
            )
    bare.append(phase_bare(w, measure_s))
    return bare


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--phase", type=float, default=2.5, help="seconds measured per phase")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (BPF)", file=sys.stderr)
        return 2
    bcc_compat.ensure_headers()
    stats_fd = bpfstats.enable()
    if stats_fd is None:
        print("the kernel refused BPF run-time stats", file=sys.stderr)
        return 2
    samples: dict[str, list[dict[str, float]]] = {}
    bare: dict[str, list[float]] = {}
    try:
        w = Workload(seconds=3600)
        try:
            frames = int(phase(w, 0.5, [], {})["frames"])  # what the own walk finds: the real depth
            bare["frame pointers"] = run_set(w, variants(frames), args.rounds, args.phase, samples)
        finally:
            w.stop()
        w = Workload(seconds=3600, frame_pointers=False)
        try:
            bare["no frame pointers"] = run_set(w, NO_FP, args.rounds, args.phase, samples)
        finally:
            w.stop()
    finally:
        bpfstats.disable(stats_fd)
    med_bare = {k: statistics.median(v) for k, v in bare.items()}
    result: dict[str, dict[str, float]] = {}
    print(f"\nmedians of {args.rounds} rounds (BPF stats on):")
    for name, runs in samples.items():
        base = med_bare["no frame pointers" if name.startswith("no frame pointers") else "frame pointers"]
        m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        m["added_ns"] = m["ns_op"] - base
        result[name] = m
        print(
            f"  {name:34s} added {m['added_ns']:7.1f} ns/op  malloc prog {m['malloc_prog_ns']:6.1f} ns  "
            f"free prog {m['free_prog_ns']:5.1f} ns  frames {m['frames']:.0f}  lost stacks {m['lost_stacks']:.0f}"
        )
    save(
        "leaks_stacks",
        {
            "case": "leaks program cost by stack walk variant",
            "machine": machine(),
            "metric": "ns per malloc+free (end to end, BPF stats on) and ns per program run",
            "rounds": args.rounds,
            "bare_ns": med_bare,
            "variants": result,
            "samples": samples,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
