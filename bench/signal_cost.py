"""Case: the kills probe's cost on a signal-heavy program (issue 39: the signal tracepoint
attached, a kill -0 and SIGUSR1 ping-pong workload <= 1.03x bare).

signal:signal_generate fires in the sender for every signal; memtop's program returns at its first
comparison for anything but SIGKILL and SIGTERM. Two loops (bench/workloads/signal_loop.c), ns per
call, bare and with the kills probe attached and polled, alternated over rounds, medians quoted:

* ``kill(getpid(), 0)``: a permission check, no signal generated (the tracepoint does not fire);
* SIGUSR1 round trips between a parent and its child: two signals generated each, both filtered
  out in the kernel.

usage: sudo .venv/bin/python bench/signal_cost.py [ROUNDS]"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from harness import alternate, build, machine, nothing, parse_kv, polled, save, summary

from memtop.probes import bpfstats
from memtop.probes.kills import KillsProbe

#: (run_time_ns, run_cnt) of the probe's program over each attach, BPF run-time stats held on
RUNS: list[tuple[int, int]] = []


@contextmanager
def kills_probe() -> Iterator[None]:
    with polled(KillsProbe()):
        yield


@contextmanager
def kills_probe_stats() -> Iterator[None]:
    """The probe with BPF run-time stats on: apart from the timed runs, since stats cost every
    BPF program on the machine (other tools' too) two clock reads a run."""
    probe = KillsProbe()
    stats = bpfstats.enable()
    try:
        with polled(probe):
            before = bpfstats.program_stats(probe.bpf, "kills")
            yield
            after = bpfstats.program_stats(probe.bpf, "kills")
            RUNS.append((after[0] - before[0], after[1] - before[1]))
    finally:
        bpfstats.disable(stats)


def main(rounds: int = 5) -> dict[str, Any]:
    loop = build("signal_loop")

    def kill0() -> dict[str, float]:
        out = subprocess.run(
            [str(loop), "kill0", "1000000"], capture_output=True, text=True, check=True
        ).stdout
        return parse_kv(out)

    def usr1() -> dict[str, float]:
        out = subprocess.run([str(loop), "usr1", "100000"], capture_output=True, text=True, check=True).stdout
        return parse_kv(out)

    variants = {"bare": nothing, "kills probe": kills_probe}
    zero = summary(alternate(variants, kill0, "ns_per_call", rounds=rounds), "bare")
    pingpong = summary(alternate(variants, usr1, "ns_per_call", rounds=rounds), "bare")
    with kills_probe_stats():
        usr1()
    ns, runs = sum(r[0] for r in RUNS), sum(r[1] for r in RUNS)
    prog_ns = ns / runs if runs else 0.0
    result: dict[str, Any] = {
        "machine": machine(),
        "rounds": rounds,
        "kill0": zero,
        "usr1_pingpong": pingpong,
        # the program's own cost by the kernel's run-time stats (the wall-clock ratios above carry
        # the shared machine's noise): ns a run, and what two runs add to a bare round trip
        "prog_ns_per_run": prog_ns,
        "prog_runs": runs,
        "pingpong_ratio_by_stats": 1 + 2 * prog_ns / pingpong["bare"]["median"],
    }
    save("signal_cost", result)
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5), indent=1))
