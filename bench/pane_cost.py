"""Case: memtop's own CPU per pane (issue 22, item 12): the TUI on a real pseudo-terminal of
160x45 at 1 s refresh showing one pane (and the drill-in's History on an idle process), on an
idle machine; CPU % of a core over a window once steady (15 s after its probes attached), medians
of alternating rounds. Target: any pane or drill-in section <= 2 % of a core idle, and <= 4 % in
a swap storm (a 300 MiB workload reading its memory over and over in a 100 MiB memory cgroup with
swap: thousands of swap-ins and reclaims a second), where the drill-in is on the storming process.

usage: sudo .venv/bin/python bench/pane_cost.py [ROUNDS] [--storm-only] [--cases A,B]
                                               [--against MEMTOP [--label NAME]]

--storm-only: measure only the storm (the idle figures of the last result are kept);
--cases: measure only these cases (pane names, ``drill`` for the drill-in's History); the other
cases' figures are those of the last result, and the report says which were measured when;
--against MEMTOP: alternate with another memtop executable (e.g. main's venv) in the same rounds,
idle and in the storm, so a change is compared with what it changes under the same conditions
(``--label``: what to call it in the report, e.g. "main at fab2e52")."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import support.memtop_run  # noqa: E402
from harness import BENCH, machine, save  # noqa: E402
from harness import process_cpu_s as cpu_s  # noqa: E402
from support import PtyMemtop, compile_c, memcg, swapfile  # noqa: E402

PANES = ("processes", "vmscan", "reclaim", "swapin", "oom", "leaks", "cgroups", "kernel", "shared")


def measure(args: list[str], window_s: float, exe: str | None = None) -> float:
    run = support.memtop_run
    if exe is not None:  # PtyMemtop runs support.memtop_run.memtop_cmd()
        saved, run.memtop_cmd = run.memtop_cmd, lambda: [exe]
    try:
        m = PtyMemtop(args, size=(45, 160))
    finally:
        if exe is not None:
            run.memtop_cmd = saved
    try:
        m.wait_ready()
        time.sleep(15)
        c0, t0 = cpu_s(m.pid), time.monotonic()
        time.sleep(window_s)
        return 100 * (cpu_s(m.pid) - c0) / (time.monotonic() - t0)
    finally:
        m.kill()


DRILL = "drill-in history"


def pick(cases: list[str] | None) -> list[str]:
    """Case names (``drill``: the drill-in's History) in the bench's order; all when None."""
    every = [*PANES, DRILL]
    if cases is None:
        return every
    want = {DRILL if c == "drill" else c for c in cases}
    unknown = want - set(every)
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(sorted(unknown))} (panes, or drill)")
    return [c for c in every if c in want]


def alternate(
    i: int,
    case: str,
    args: list[str],
    window_s: float,
    against: str | None,
    mine: list[float],
    other: list[float],
    what: str,
) -> None:
    """One round of ``case``: this memtop and, with ``against``, the other, the order alternating
    between rounds (conditions drift over a round)."""
    exes: list[str | None] = [None, against] if against else [None]
    for exe in exes if i % 2 == 0 else exes[::-1]:
        if exe is None:
            mine.append(measure(args, window_s))
            print(f"{what}{case:18} {mine[-1]:.2f} % of a core", flush=True)
        else:
            other.append(measure(args, window_s, exe))
            print(f"{what}{case:18} {other[-1]:.2f} % ({exe})", flush=True)


def main(
    rounds: int = 3,
    window_s: float = 10.0,
    storm_only: bool = False,
    against: str | None = None,
    label: str | None = None,
    cases: list[str] | None = None,
) -> dict[str, Any]:
    import subprocess

    chosen = pick(cases)
    # the drill-in on an idle process (its on-demand probes trace the target: not memtop itself)
    target = subprocess.Popen(["sleep", "3600"])
    args_of = {p: ["--pane", p] for p in PANES}
    args_of[DRILL] = ["--pid", str(target.pid)]
    samples: dict[str, list[float]] = {c: [] for c in chosen}
    idle_other: dict[str, list[float]] = {c: [] for c in chosen}
    storm: dict[str, list[float]] = {c: [] for c in chosen}
    other: dict[str, list[float]] = {c: [] for c in chosen}
    try:
        for i in range(0 if storm_only else rounds):
            for case in chosen:
                alternate(i, case, args_of[case], window_s, against, samples[case], idle_other[case], "")
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
            storm_args = dict(args_of, **{DRILL: ["--pid", str(hog.pid)]})
            for i in range(rounds):
                for case in chosen:
                    alternate(
                        i, case, storm_args[case], window_s, against, storm[case], other[case], "storm "
                    )
            hog.kill()
            hog.wait()
    finally:
        target.kill()
        target.wait()
    medians = {c: statistics.median(v) for c, v in samples.items() if v}
    storm_medians = {c: statistics.median(v) for c, v in storm.items() if v}
    result: dict[str, Any] = {
        "machine": machine(),
        "rounds": rounds,
        "window_s": window_s,
        "cpu_pct": medians,
        "samples": {c: v for c, v in samples.items() if v},
        "storm_cpu_pct": storm_medians,
        "storm_samples": {c: v for c, v in storm.items() if v},
    }
    last_path = BENCH / "results" / "pane_cost.json"
    if storm_only or cases is not None:
        # the cases not measured now keep the figures of the last result, in the bench's order
        last = json.loads(last_path.read_text())
        for fig, smp in (("cpu_pct", "samples"), ("storm_cpu_pct", "storm_samples")):
            got, got_s = result[fig], result[smp]
            result[fig] = {c: got.get(c, last[fig].get(c)) for c in pick(None) if c in got or c in last[fig]}
            result[smp] = {c: got_s.get(c, last[smp].get(c)) for c in result[fig]}
        measured = {"idle": [] if storm_only else chosen, "storm": chosen}
        kept = {
            k: [c for c in result[f] if c not in measured[k]]
            for k, f in (("idle", "cpu_pct"), ("storm", "storm_cpu_pct"))
        }
        result["measured"] = measured
        result["kept_from"] = {k: v for k, v in kept.items() if v}
        if kept["idle"] or kept["storm"]:
            result["note"] = "; ".join(
                f"{k}: {', '.join(measured[k]) or 'none'} measured in this run ({rounds} rounds), "
                f"{', '.join(v)} from the run before"
                for k, v in kept.items()
                if v
            )
    if against:
        result["against"] = {
            "memtop": against,
            "label": label or against,
            "cpu_pct": {c: statistics.median(v) for c, v in idle_other.items() if v},
            "samples": {c: v for c, v in idle_other.items() if v},
        }
        result["storm_against"] = {
            "memtop": against,
            "label": label or against,
            "cpu_pct": {c: statistics.median(v) for c, v in other.items() if v},
            "samples": {c: v for c, v in other.items() if v},
        }
    save("pane_cost", result)
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("rounds", nargs="?", type=int, default=3)
    ap.add_argument("--storm-only", action="store_true")
    ap.add_argument("--against", metavar="MEMTOP")
    ap.add_argument("--label", metavar="NAME")
    ap.add_argument("--cases", metavar="A,B", help="only these cases: pane names, or drill")
    a = ap.parse_args()
    cases = [c.strip() for c in a.cases.split(",") if c.strip()] if a.cases else None
    r = main(a.rounds, storm_only=a.storm_only, against=a.against, label=a.label, cases=cases)
    print(json.dumps({k: r[k] for k in ("cpu_pct", "storm_cpu_pct")}, indent=1))
