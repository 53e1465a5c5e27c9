#!/usr/bin/env python3
"""The leaks tracer's trap floor: what the probe points alone cost per malloc+free, two ways.

Issue 25 asks whether probes on malloc's ``ret`` instructions can replace its return probe and
lower the floor. Per malloc (or calloc) + free pair of bench/malloc_churn.c, in glibc:

    return probes (today)  malloc: a uprobe where its entry probe sits (past ``endbr64``, on an
                           emulated instruction) that hijacks the return address, then the
                           return through the uretprobe trampoline (sys_uretprobe since 6.11);
                           free: the same emulated entry probe
    ret probes             malloc: a uprobe on every ``ret`` of malloc and calloc (and on
                           calloc's tail call to memset, which leaves without a ret); free as above
    free only              free's entry probe alone: one emulated trap, the unit of the others

Each runs empty programs (the trap floor); around one running workload the configurations
alternate with bare phases, several rounds, and the medians are compared (as bench/leaks_cost.py
does). A counting pass then runs counting programs on malloc/calloc's entries and on each return
point at once: returns caught per call, to see what each way misses.

The ret and jmp instructions are found with objdump over each function's symbol range (a
measurement tool, not what memtop would ship).

Writes bench/results/leaks_traps.json (bench/report.py puts it in bench/RESULTS.md).

usage: sudo .venv/bin/python bench/leaks_traps.py [--rounds 5] [--phase 4]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from harness import machine, save, summary  # noqa: E402
from leaks_cost import Workload, phase_bare  # noqa: E402

from memtop.linux import bcc_compat  # noqa: E402
from memtop.probes import allocators, symbols  # noqa: E402
from memtop.probes.leaks import probe_offset  # noqa: E402

PROGRAM = r"""
#include <uapi/linux/ptrace.h>
BPF_PERCPU_ARRAY(hits, u64, 4);
int empty(struct pt_regs *ctx) { return 0; }
static __always_inline void hit(int k) { u64 *v = hits.lookup(&k); if (v) (*v)++; }
int count_call(struct pt_regs *ctx) { hit(0); return 0; }
int count_uret(struct pt_regs *ctx) { hit(1); return 0; }
int count_ret(struct pt_regs *ctx) { hit(2); return 0; }
int count_tail(struct pt_regs *ctx) { hit(3); return 0; }
"""


def _vaddr(path: str, sym: str) -> tuple[int, int]:
    """(address, size) of the default version of ``sym`` in ``path``'s dynamic symbols."""
    out = subprocess.run(["readelf", "-Ws", "--dyn-syms", path], capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) >= 8 and f[7] in (sym, f"{sym}@@GLIBC_2.2.5") and f[3] == "FUNC":
            return int(f[1], 16), int(f[2])
    raise LookupError(sym)


def exits(path: str, sym: str) -> tuple[list[int], list[int]]:
    """(addresses of ``ret``, of ``jmp`` out of the function) inside ``sym``'s symbol range."""
    lo, size = _vaddr(path, sym)
    out = subprocess.run(
        [
            "objdump",
            "-d",
            "--no-show-raw-insn",
            f"--start-address={lo:#x}",
            f"--stop-address={lo + size:#x}",
            path,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    rets, tails = [], []
    for line in out.stdout.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(\S+)\s*(\S*)", line)
        if not m:
            continue
        addr, op, arg = int(m[1], 16), m[2], m[3]
        if op.startswith("ret"):
            rets.append(addr)
        elif op == "jmp" and re.fullmatch(r"[0-9a-f]+", arg) and not lo <= int(arg, 16) < lo + size:
            tails.append(addr)
    return rets, tails


class Points:
    """The workload's probe points: file offsets in the libc it maps."""

    def __init__(self, pid: int) -> None:
        alloc = allocators.find_allocator(pid)
        assert alloc.lane == "glibc", alloc
        self.path = alloc.path
        found = symbols.resolve_functions(pid, alloc.path, ["malloc", "calloc", "free"])
        self.entry: dict[str, int] = {}  # where memtop puts the entry probe
        self.ret: dict[str, list[int]] = {}
        self.tail: dict[str, list[int]] = {}
        for sym, where in found.items():
            assert not isinstance(where, str), where
            mod_path, off, code, base = where
            self.path = mod_path
            delta, _how = probe_offset(code, base)
            self.entry[sym] = off + delta
            vaddr, _size = _vaddr(mod_path, sym)
            rets, tails = exits(mod_path, sym)
            self.ret[sym] = [a - vaddr + off for a in rets]
            self.tail[sym] = [a - vaddr + off for a in tails]


def attach(bpf: Any, pid: int, path: str, where: list[tuple[str, int, bool]]) -> list[str]:
    return [bcc_compat.attach_uprobe_at(bpf, fn, path, off, pid, ret) for fn, off, ret in where]


def layouts(p: Points, empty: bool) -> dict[str, list[tuple[str, int, bool]]]:
    e = "empty" if empty else None
    free = [(e or "count_call", p.entry["free"], False)]
    return {
        "return probes (today)": [(e or "count_uret", p.entry[s], True) for s in ("malloc", "calloc")] + free,
        "ret probes": [(e or "count_ret", o, False) for s in ("malloc", "calloc") for o in p.ret[s]]
        + [(e or "count_tail", o, False) for s in ("malloc", "calloc") for o in p.tail[s]]
        + free,
        "free only": free,
    }


def phase_probes(
    w: Workload, measure_s: float, bpf: Any, path: str, where: list[tuple[str, int, bool]]
) -> float:
    evs = attach(bpf, w.proc.pid, path, where)
    try:
        time.sleep(1.0)
        return w.ns_per_op(measure_s)
    finally:
        for ev in evs:
            bcc_compat.detach_uprobe_event(bpf, ev)
        time.sleep(0.5)


def coverage(w: Workload, bpf: Any, p: Points, seconds: float) -> dict[str, int]:
    """Calls of malloc/calloc (entry), and returns seen by return probes, ret probes, tail calls."""
    where = [("count_call", p.entry[s], False) for s in ("malloc", "calloc")]
    where += [("count_uret", p.entry[s], True) for s in ("malloc", "calloc")]
    where += [("count_ret", o, False) for s in ("malloc", "calloc") for o in p.ret[s]]
    where += [("count_tail", o, False) for s in ("malloc", "calloc") for o in p.tail[s]]
    hits = bpf["hits"]
    evs = attach(bpf, w.proc.pid, p.path, where)
    try:
        time.sleep(0.5)  # every point attached: count over a window inside the attach
        before = [sum(hits[hits.Key(k)]) for k in range(4)]
        time.sleep(seconds)
        got = [sum(hits[hits.Key(k)]) - before[k] for k in range(4)]
    finally:
        for ev in evs:
            bcc_compat.detach_uprobe_event(bpf, ev)
    return {"calls": got[0], "uretprobe": got[1], "ret": got[2], "tail": got[3]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--phase", type=float, default=4.0, help="seconds measured per phase")
    ap.add_argument("--coverage-only", action="store_true", help="only the counting pass")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (BPF)", file=sys.stderr)
        return 2
    bcc_compat.ensure_headers()
    bpf = bcc_compat.compile_text(PROGRAM)
    w = Workload(seconds=3600)
    try:
        p = Points(w.proc.pid)
        print(f"{p.path}: entry {p.entry}, ret {p.ret}, tail {p.tail}", flush=True)
        lay = layouts(p, empty=True)
        results: dict[str, list[float]] = {"bare": [], **{c: [] for c in lay}}
        for r in range(0 if args.coverage_only else args.rounds):
            for c, where in lay.items():
                results["bare"].append(phase_bare(w, args.phase))
                results[c].append(phase_probes(w, args.phase, bpf, p.path, where))
                print(
                    f"round {r + 1}: bare {results['bare'][-1]:.1f} ns/op, {c} {results[c][-1]:.1f} ns/op",
                    flush=True,
                )
        if args.coverage_only:
            print(coverage(w, bpf, p, 2.0))
            return 0
        results["bare"].append(phase_bare(w, args.phase))
        cov = coverage(w, bpf, p, 2.0)
    finally:
        w.stop()
        bpf.cleanup()
    med = {c: statistics.median(v) for c, v in results.items()}
    added = {c: med[c] - med["bare"] for c in lay}
    trap = added["free only"]
    print(f"\nper op (malloc or calloc + free), medians of {args.rounds} rounds, empty programs:")
    for c in lay:
        print(f"  {c:24s} added {added[c]:7.0f} ns/op = {added[c] / trap:4.2f} emulated traps")
    print(f"coverage (malloc/calloc): {cov}")
    save(
        "leaks_traps",
        {
            "case": "trap floor per malloc+free",
            "machine": machine(),
            "metric": "ns per op (malloc or calloc + free), empty BPF programs",
            "rounds": args.rounds,
            "summary": summary(results, "bare"),
            "added_ns": added,
            "in_traps": {c: added[c] / trap for c in lay},
            "points": {"entry": p.entry, "ret": p.ret, "tail": p.tail},
            "coverage": cov,
            "samples": results,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
