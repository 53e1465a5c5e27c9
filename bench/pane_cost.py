"""Case: memtop's own CPU per pane (issue 22, item 12): the TUI on a real pseudo-terminal of
160x45 at 1 s refresh showing one pane (and the drill-in's History on an idle process), on an
idle machine; CPU % of a core over a window once steady (15 s after its probes attached), medians
of alternating rounds. Target: any pane or drill-in section <= 2 % of a core idle, and <= 4 % in
a swap storm (a 300 MiB workload reading its memory over and over in a 100 MiB memory cgroup with
swap: thousands of swap-ins and reclaims a second), where the drill-in is on the storming process.

usage: sudo .venv/bin/python bench/pane_cost.py [ROUNDS] [--storm-only] [--against MEMTOP [--label NAME]]

--storm-only: measure only the storm (the idle figures of the last result are kept);
--against MEMTOP: in the storm, alternate with another memtop executable (e.g. main's venv) in
the same rounds, so a change is compared with what it changes under the same storm (``--label``:
what to call it in the report, e.g. "main at fab2e52")."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import support  # noqa: E402
from harness import BENCH, machine, save  # noqa: E402
from memtop_self import cpu_s  # noqa: E402
from support import PtyMemtop, compile_c, memcg, swapfile  # noqa: E402

PANES = ("processes", "vmscan", "reclaim", "swapin", "oom", "leaks", "cgroups", "kernel", "shared")


def measure(args: list[str], window_s: float, exe: str | None = None) -> float:
    if exe is not None:  # PtyMemtop runs support.memtop_cmd()
        saved, support.memtop_cmd = support.memtop_cmd, lambda: [exe]
    try:
        m = PtyMemtop(args, size=(45, 160))
    finally:
        if exe is not None:
            support.memtop_cmd = saved
    try:
        m.wait_ready()
        time.sleep(15)
        c0, t0 = cpu_s(m.pid), time.monotonic()
        time.sleep(window_s)
        return 100 * (cpu_s(m.pid) - c0) / (time.monotonic() - t0)
    finally:
        m.kill()


def storm_cases() -> list[str]:
    """Every pane: the target is any pane in a swap storm."""
    return list(PANES)


def main(
    rounds: int = 3,
    window_s: float = 10.0,
    storm_only: bool = False,
    against: str | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    import subprocess

    # the drill-in on an idle process (its on-demand probes trace the target: not memtop itself)
    target = subprocess.Popen(["sleep", "3600"])
    cases = {p: ["--pane", p] for p in PANES}
    cases["drill-in history"] = ["--pid", str(target.pid)]
    samples: dict[str, list[float]] = {c: [] for c in cases}
    storm: dict[str, list[float]] = {}
    other: dict[str, list[float]] = {}
    try:
        for _ in range(0 if storm_only else rounds):
            for case, args in cases.items():
                samples[case].append(measure(args, window_s))
                print(f"{case:18} {samples[case][-1]:.2f} % of a core", flush=True)
        with swapfile(), memcg(100 << 20) as cg:
            hog = subprocess.Popen(
                [str(compile_c("swapfill")), "300", "1000000"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert hog.stdin is not None and hog.stdout is not None
            hog.stdout.readline()
            cg.add(hog.pid)
            hog.stdin.write("go\n")
            hog.stdin.flush()
            time.sleep(5)  # filled: from here on every pass is swap-ins
            storm_args = {p: ["--pane", p] for p in storm_cases()}
            storm_args["drill-in history"] = ["--pid", str(hog.pid)]
            storm = {c: [] for c in storm_args}
            other = {c: [] for c in storm_args} if against else {}
            for i in range(rounds):
                for case, args in storm_args.items():
                    # alternate which goes first: the storm drifts over a round
                    exes: list[str | None] = [None, against] if against else [None]
                    for exe in exes if i % 2 == 0 else exes[::-1]:
                        if exe is None:
                            storm[case].append(measure(args, window_s))
                            print(f"storm {case:12} {storm[case][-1]:.2f} % of a core", flush=True)
                        else:
                            other[case].append(measure(args, window_s, exe))
                            print(f"storm {case:12} {other[case][-1]:.2f} % ({exe})", flush=True)
            hog.kill()
            hog.wait()
    finally:
        target.kill()
        target.wait()
    result: dict[str, Any] = {
        "machine": machine(),
        "rounds": rounds,
        "window_s": window_s,
        "cpu_pct": {c: statistics.median(v) for c, v in samples.items() if v},
        "samples": samples,
        "storm_cpu_pct": {c: statistics.median(v) for c, v in storm.items()},
        "storm_samples": storm,
    }
    if storm_only:  # the idle figures stay those of the last full run
        last = json.loads((BENCH / "results" / "pane_cost.json").read_text())
        result.update({k: last[k] for k in ("cpu_pct", "samples")})
        result["idle_rounds"] = last.get("idle_rounds", last["rounds"])
    if against:
        result["storm_against"] = {
            "memtop": against,
            "label": label or against,
            "cpu_pct": {c: statistics.median(v) for c, v in other.items()},
            "samples": other,
        }
    save("pane_cost", result)
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("rounds", nargs="?", type=int, default=3)
    ap.add_argument("--storm-only", action="store_true")
    ap.add_argument("--against", metavar="MEMTOP")
    ap.add_argument("--label", metavar="NAME")
    a = ap.parse_args()
    r = main(a.rounds, storm_only=a.storm_only, against=a.against, label=a.label)
    print(json.dumps({k: r[k] for k in ("cpu_pct", "storm_cpu_pct")}, indent=1))
