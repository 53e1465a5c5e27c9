"""Issue 5: what the swap-in probe costs where it must cost nothing.

Workloads (no swapping):
  refault  64 MiB re-faulted with MADV_DONTNEED, 32 rounds (~0.5 M minor faults): the budget case,
           <= 3 % slowdown allowed;
  pingpong two processes bouncing a byte over pipes: context-switch heavy, shows what the
           sched_switch program costs per switch (not part of the budget, reported for honesty).
Variants: bare; memtop's swapin probe (route b: major-fault perf event + sched_switch); route (a)
prototype (bench/route_a.bpf.c: page_fault_user + rss_stat + major-fault perf event).
Each figure is the median of ROUNDS (default 15, >= 5) alternating runs in one session: the
programs are compiled once and their attachments toggled between runs (bare, b, a, bare, ...).
Run as root: .venv/bin/python bench/swapin_overhead.py [ROUNDS]
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import alternate, build, machine, nothing, parse_kv, save, summary  # noqa: E402

from memtop import bcc_compat  # noqa: E402
from memtop.probes.swapin import SwapinProbe  # noqa: E402

ROUTE_A = Path(__file__).resolve().parent / "route_a.bpf.c"


class Toggle:
    """A compiled program whose attachments can be switched on and off cheaply, so variants
    alternate run by run (one compile each, not one per round)."""

    def __init__(self, bpf: Any, tracepoints: dict[str, str]) -> None:
        self.bpf = bpf
        self.tracepoints = tracepoints
        self.ev_type, _minor, self.major = bcc_compat.perf_sw_fault_ids()
        for tp in tracepoints:  # BCC attached TRACEPOINT_PROBEs at load: start detached
            self.bpf.detach_tracepoint(tp.encode())

    @contextmanager
    def on(self) -> Iterator[None]:
        for tp, fn in self.tracepoints.items():
            bcc_compat.attach_tracepoint(self.bpf, tp, fn)
        bcc_compat.attach_perf_event_system(self.bpf, self.ev_type, self.major, "on_major_fault", 1)
        try:
            yield None
        finally:
            for tp in self.tracepoints:
                self.bpf.detach_tracepoint(tp.encode())
            self.bpf.detach_perf_event(self.ev_type, self.major)


def main(rounds: int = 15) -> dict[str, object]:
    refault = build("refault")
    pingpong = build("pingpong")
    probe = SwapinProbe()
    probe.load()  # compiled and attached as memtop does; then toggled per run
    probe.bpf.detach_perf_event(*probe_perf_ids())
    route_b = Toggle(probe.bpf, {"sched:sched_switch": "tracepoint__sched__sched_switch"})
    route_a = Toggle(
        bcc_compat.compile_program(ROUTE_A),
        {"exceptions:page_fault_user": "tracepoint__exceptions__page_fault_user",
         "kmem:rss_stat": "tracepoint__kmem__rss_stat"},
    )
    variants = {"bare": nothing, "swapin probe (route b)": route_b.on, "route (a) prototype": route_a.on}

    def fault_once() -> dict[str, float]:
        out = subprocess.run([str(refault), "64", "32"], capture_output=True, text=True, check=True).stdout
        return parse_kv(out)

    def switch_once() -> dict[str, float]:
        out = subprocess.run([str(pingpong), "100000"], capture_output=True, text=True, check=True).stdout
        return parse_kv(out)

    try:
        faults = alternate(variants, fault_once, "ns_per_fault", rounds=rounds, per_round=1)  # type: ignore[arg-type]
        switches = alternate(variants, switch_once, "ns_per_roundtrip", rounds=rounds, per_round=1)  # type: ignore[arg-type]
    finally:
        probe.close()
        bcc_compat.cleanup(route_a.bpf)
    result = {
        "case": "swap-in probe overhead (no swapping)",
        "machine": machine(),
        "refault": {"metric": "ns per minor fault", "summary": summary(faults, "bare"), "samples": faults},
        "pingpong": {"metric": "ns per pipe round trip (2 switches)", "summary": summary(switches, "bare"),
                     "samples": switches},
    }
    save("swapin_overhead", result)
    return result


def probe_perf_ids() -> tuple[int, int]:
    ev_type, _minor, major = bcc_compat.perf_sw_fault_ids()
    return ev_type, major


if __name__ == "__main__":
    r = main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
    for case in ("refault", "pingpong"):
        print(case, r[case]["metric"])  # type: ignore[index]
        for k, v in r[case]["summary"].items():  # type: ignore[index]
            print(f"  {k:24} median {v['median']:9.1f}  ratio {v['ratio']:.3f}  (n={v['n']})")
