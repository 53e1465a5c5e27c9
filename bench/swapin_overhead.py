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

from memtop.linux import bcc_compat  # noqa: E402
from memtop.probes.swapin import SwapinProbe  # noqa: E402
from memtop.probes.unit import Section, Unit  # noqa: E402

ROUTE_A = Path(__file__).resolve().parent / "route_a.bpf.c"


class Toggle:
    """A compiled program whose hooks can be switched on and off cheaply, so variants alternate
    run by run (one compile each, not one per round)."""

    def __init__(self, view: Any) -> None:
        self.view = view  # a memtop.probes.unit.ProgramView
        self.ev_type, _minor, self.major = bcc_compat.perf_sw_fault_ids()
        self.view.detach()  # start detached

    @contextmanager
    def on(self) -> Iterator[None]:
        self.view.attach_tracepoints()
        self.view.attach_perf_event_system(self.ev_type, self.major, "on_major_fault", 1)
        try:
            yield None
        finally:
            self.view.detach()


def main(rounds: int = 15) -> dict[str, Any]:
    refault = build("refault")
    pingpong = build("pingpong")
    probe = SwapinProbe()
    probe.load()  # compiled and attached as memtop does; then toggled per run
    route_b = Toggle(probe.bpf)
    route_a = Toggle(Unit.compile([Section.from_file("route_a", ROUTE_A)]).view("route_a"))
    variants = {"bare": nothing, "swapin probe (route b)": route_b.on, "route (a) prototype": route_a.on}

    def fault_once() -> dict[str, float]:
        out = subprocess.run([str(refault), "64", "32"], capture_output=True, text=True, check=True).stdout
        return parse_kv(out)

    def switch_once() -> dict[str, float]:
        out = subprocess.run([str(pingpong), "100000"], capture_output=True, text=True, check=True).stdout
        return parse_kv(out)

    try:
        faults = alternate(variants, fault_once, "ns_per_fault", rounds=rounds, per_round=1)
        switches = alternate(variants, switch_once, "ns_per_roundtrip", rounds=rounds, per_round=1)
    finally:
        probe.close()
        route_a.view.release()
    result: dict[str, Any] = {
        "case": "swap-in probe overhead (no swapping)",
        "machine": machine(),
        "refault": {"metric": "ns per minor fault", "summary": summary(faults, "bare"), "samples": faults},
        "pingpong": {
            "metric": "ns per pipe round trip (2 switches)",
            "summary": summary(switches, "bare"),
            "samples": switches,
        },
    }
    save("swapin_overhead", result)
    return result


if __name__ == "__main__":
    r = main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
    for case in ("refault", "pingpong"):
        print(case, r[case]["metric"])
        for k, v in r[case]["summary"].items():
            print(f"  {k:24} median {v['median']:9.1f}  ratio {v['ratio']:.3f}  (n={v['n']})")
