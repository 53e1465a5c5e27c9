#!/usr/bin/env python3
"""Leak hunting on a CPU budget (issue 40, item 1): what `memtop --leaks PID --budget B%` costs,
measured from /proc, and how often it finds the leak (recall) or calls churn a leak (false
positives).

The target (tests/workloads/budgetchurn.c) does RATE malloc+free per second across ten churning
stacks, with or without a slow leak from one more (1 MiB/min in 4 KiB blocks, the issue's). Each
run is `memtop snapshot --pane leaks --leaks PID --budget B% --after DURATION` as a user runs it:

* **cost**: each run beside its controls, started with it: two untraced twins of the target and
  a memtop without --leaks. From the traced memtop's ready file to its exit, the target's CPU
  time (/proc/PID/schedstat) minus its twins' mean, plus memtop's minus the control memtop's, as
  a share of one core, against the budget. The two twins' own difference is the figure's noise
  (``noise_pct``: two untraced copies of one program on a shared machine differ by this much),
  reported beside it, and so is the tracer's own account (``cost_pct_shown``). memtop's start (compiling its programs) is before its ready
  file and not counted; the leaks preflight (1 s) and the tracer's compile come after it and are.
  Controls beside the run, not before it: on a shared machine the load moves within minutes.
* **recall**: leak runs whose first reported leak is leak_here's stack; **false positives**: any
  stack reported that is not leak_here's (no-leak runs: any stack at all).

Writes bench/results/leaks_budget.json (bench/report.py puts it in bench/RESULTS.md).

With ``--soak-minutes M`` it runs the soak instead (issue 40, item 2): the budgeted tracer left on
a leaking target for M minutes beside a control memtop without --leaks, both one's RssAnon
sampled every 10 s, their growth after warm-up (the first quarter, at most 10 minutes) and that
of their difference (what the tracer holds), and the candidates followed, summarised and lost at
the end; added to the same results file, or with ``--out PATH`` written there as it goes.

usage: sudo .venv/bin/python bench/leaks_budget.py [--rates 100000,1000000] [--budgets 1]
           [--cost-budgets 0.5,1,5] [--runs 2] [--duration 300] [--parallel 1]
       sudo .venv/bin/python bench/leaks_budget.py --soak-minutes 10 [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import machine, save  # noqa: E402

WORKLOAD = ROOT / "tests" / "workloads" / "budgetchurn.c"
LEAK_BPS = round((1 << 20) / 60)  # 1 MiB/min
LEAK_SIZE = 4096
MEMTOP = [str(Path(sys.executable).parent / "memtop")]


def build(tmp: Path) -> Path:
    exe = tmp / "budgetchurn"
    subprocess.run(
        ["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline", "-o", str(exe), str(WORKLOAD)],
        check=True,
    )
    return exe


def cpu_ns(pid: int) -> int | None:
    """A process's time on CPU (ns), /proc/PID/schedstat's first field."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class Target:
    def __init__(self, exe: Path, rate: int, leak: bool, seconds: float, traced: bool) -> None:
        args = [
            str(exe),
            str(rate),
            str(LEAK_BPS if leak else 0),
            str(LEAK_SIZE if leak else 0),
            str(seconds),
        ]
        self.proc = subprocess.Popen(args + ([] if traced else ["nowait"]), stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("ready"), line

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def memtop_start(pid: int | None, budget_pct: float, seconds: float, tmp: Path) -> subprocess.Popen[bytes]:
    """`memtop snapshot --pane leaks` for ``seconds`` (tracing ``pid`` on the budget when given),
    writing its document to tmp/snap.json and its ready file to tmp/ready."""
    cmd = MEMTOP + ["snapshot", "--pane", "leaks", "--format", "json", "--output", str(tmp / "snap.json")]
    cmd += ["--after", str(seconds)]
    if pid is not None:
        cmd += ["--leaks", str(pid), "--budget", f"{budget_pct}%"]
    env = {**os.environ, "MEMTOP_READY_FILE": str(tmp / "ready")}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)


def traced_run(
    exe: Path, rate: int, leak: bool, budget_pct: float, seconds: float, tmp: Path
) -> dict[str, Any]:
    """One run, beside its controls started with it: the traced target and memtop tracing it on
    the budget; an untraced twin of the target (its CPU is what the traced one would have used)
    and a memtop without --leaks (what memtop costs anyway). CPU times are read from the traced
    memtop's ready file (its start, compiling, is not counted; its preflight and the tracer's
    compile are) to its exit; the cost is (target - twin) + (memtop - control) per second."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "ctl").mkdir(exist_ok=True)
    for f in (tmp / "snap.json", tmp / "ready", tmp / "ctl" / "snap.json", tmp / "ctl" / "ready"):
        f.unlink(missing_ok=True)
    t = Target(exe, rate, leak, seconds + 120, traced=True)
    twin = Target(exe, rate, False, seconds + 120, traced=False)
    twin2 = Target(exe, rate, False, seconds + 120, traced=False)
    try:
        proc = memtop_start(t.proc.pid, budget_pct, seconds, tmp)
        ctl = memtop_start(None, 0, seconds, tmp / "ctl")
        pids = [t.proc.pid, twin.proc.pid, proc.pid, ctl.pid, twin2.proc.pid]
        start: list[int | None] | None = None
        last: list[int | None] = [None] * len(pids)
        t0 = t1 = time.monotonic()
        while proc.poll() is None:
            if start is None and (tmp / "ready").exists():
                start, t0 = [cpu_ns(p) for p in pids], time.monotonic()
            now = [cpu_ns(p) for p in pids]
            if all(c is not None for c in now):
                last, t1 = now, time.monotonic()
            time.sleep(0.1)
        ctl.wait()
        assert proc.returncode == 0, f"memtop exited {proc.returncode}"
    finally:
        t.stop()
        twin.stop()
        twin2.stop()
    assert start is not None and all(c is not None for c in start + last), "no CPU readings"
    span = t1 - t0
    per_s = [((b or 0) - (a or 0)) / 1e9 / span for a, b in zip(start, last, strict=True)]
    doc = json.loads((tmp / "snap.json").read_text())
    b = doc.get("budget") or {}
    leaks = b.get("leaks") or []
    firsts = [f["frames"][0] for f in leaks]
    twins = (per_s[1] + per_s[4]) / 2
    return {
        "leak": leak,
        "target_cpu_per_s": per_s[0],
        "twin_cpu_per_s": per_s[1],
        "twin2_cpu_per_s": per_s[4],
        "memtop_cpu_per_s": per_s[2],
        "control_memtop_cpu_per_s": per_s[3],
        # the target against its two twins' mean; the twins' own difference is the figure's noise
        "cost_pct": 100 * (per_s[0] - twins + per_s[2] - per_s[3]),
        "noise_pct": 100 * abs(per_s[1] - per_s[4]),
        "span_s": span,
        "reported": firsts,
        "found": bool(firsts) and firsts[0].startswith("leak_here+"),
        "false_positives": sum(1 for f in firsts if not f.startswith("leak_here+")),
        "windows": b.get("windows"),
        "duty_pct": b.get("duty_pct"),
        "period_s": b.get("period_s"),
        "cost_pct_shown": b.get("cost_pct_of_core"),
        "cost_scale": b.get("cost_scale"),
        "calls_per_s_seen": b.get("calls_per_s"),
    }


def rss_anon_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


#: the soak's samples of RssAnon are this far apart
SOAK_SAMPLE_S = 10.0


def soak(
    exe: Path, minutes: float, rate: int, budget_pct: float, tmp: Path, out: Path | None = None
) -> dict[str, Any]:
    """The budgeted tracer left on a leaking target for ``minutes``, beside a control: the same
    `memtop snapshot --pane leaks` without --leaks, started with it. Both are memtop with every
    default probe, whose memory moves with the machine (other processes and memcgs come and go on
    a shared machine); the difference of the two is what the tracer holds. Written to ``out``
    as it goes (a long run can be read while it runs)."""
    seconds = minutes * 60
    warmup_s = min(seconds / 4, 600.0)
    t = Target(exe, rate, True, seconds + 300, traced=True)
    snap = tmp / "soak.json"
    samples: list[tuple[float, int, int]] = []
    base = MEMTOP + ["snapshot", "--pane", "leaks", "--format", "json", "--after", str(seconds)]
    result: dict[str, Any] = {
        "minutes": minutes,
        "rate_pairs_per_s": rate,
        "budget_pct": budget_pct,
        "target_pid": t.proc.pid,
        "warmup_s": warmup_s,
        "done": False,
    }

    def summary() -> None:
        warm = [(k, c) for s_, k, c in samples if s_ >= warmup_s]
        result["rss_anon_mib"] = [
            [round(s_, 1), round(k / 1024, 2), round(c / 1024, 2)] for s_, k, c in samples
        ]
        if warm:
            result["rss_growth_after_warmup_mib"] = (max(k for k, _c in warm) - warm[0][0]) / 1024
            result["control_growth_after_warmup_mib"] = (max(c for _k, c in warm) - warm[0][1]) / 1024
            diffs = [k - c for k, c in warm]
            result["tracer_growth_after_warmup_mib"] = (max(diffs) - diffs[0]) / 1024
        if out is not None:
            out.write_text(json.dumps(result, indent=1) + "\n")

    try:
        proc = subprocess.Popen(
            base + ["--output", str(snap), "--leaks", str(t.proc.pid), "--budget", f"{budget_pct}%"],
            stdout=subprocess.DEVNULL,
        )
        ctl = subprocess.Popen(base + ["--output", str(tmp / "control.json")], stdout=subprocess.DEVNULL)
        result["memtop_pid"], result["control_pid"] = proc.pid, ctl.pid
        t0 = time.monotonic()
        last_write = t0
        while proc.poll() is None:
            kib, ckib = rss_anon_kib(proc.pid), rss_anon_kib(ctl.pid)
            if kib is not None and ckib is not None:
                samples.append((time.monotonic() - t0, kib, ckib))
            if time.monotonic() - last_write >= 60:
                summary()
                last_write = time.monotonic()
            time.sleep(SOAK_SAMPLE_S)
        ctl.wait()
        assert proc.returncode == 0, f"memtop exited {proc.returncode}"
    finally:
        t.stop()
    doc = json.loads(snap.read_text())
    b = doc["budget"] or {}
    result.update(
        {
            "windows": b.get("windows"),
            "candidates": b.get("candidates"),
            "aged_out": b.get("aged_out"),
            "stacks_dropped": b.get("stacks_dropped"),
            "lost": sum(doc.get("lost", {}).values()),
            "cost_pct_shown": b.get("cost_pct_of_core"),
            "leak_found": bool(b.get("leaks")) and b["leaks"][0]["frames"][0].startswith("leak_here+"),
            "done": True,
        }
    )
    summary()
    return result


def summarise(done: dict[tuple[int, float], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One case per (rate, budget): cost median and max over the runs that traced (a run whose
    tracer could not attach, ``windows`` null, has no cost to speak of: its target, waiting for a
    uprobe, started late; counted in ``untraced_runs``), recall and false positives."""
    cases = []
    for (rate, budget), every in done.items():
        runs = [r for r in every if r.get("windows") is not None]
        if not runs:  # kept, so the table says so rather than leaving the case out
            cases.append(
                {"rate_pairs_per_s": rate, "budget_pct": budget, "untraced_runs": len(every), "runs": every}
            )
            continue
        leak_runs = [r for r in runs if r["leak"]]
        clean_runs = [r for r in runs if not r["leak"]]
        cases.append(
            {
                "rate_pairs_per_s": rate,
                "budget_pct": budget,
                "cost_pct_median": statistics.median(r["cost_pct"] for r in runs),
                "cost_pct_max": max(r["cost_pct"] for r in runs),
                "noise_pct_median": statistics.median(r.get("noise_pct", 0.0) for r in runs),
                "cost_pct_shown_median": statistics.median(r["cost_pct_shown"] or 0.0 for r in runs),
                "recall": f"{sum(r['found'] for r in leak_runs)}/{len(leak_runs)}",
                "false_positives_leak_runs": sum(r["false_positives"] for r in leak_runs),
                "false_positives_clean_runs": f"{sum(1 for r in clean_runs if r['reported'])}/{len(clean_runs)}"
                if clean_runs
                else None,
                "untraced_runs": len(every) - len(runs),
                "runs": every,
            }
        )
    return cases


def command_of(r: dict[str, Any]) -> str | None:
    """The command line a results file's cases were measured with (None: not said)."""
    if "runs" not in r or "duration_s" not in r:
        return None
    par = f" --parallel {r['parallel']}" if r.get("parallel", 1) > 1 else ""
    opts = "".join(f" --{k.replace('_', '-')} {r[k]}" for k in ("rates", "budgets", "cost_budgets") if k in r)
    return f"bench/leaks_budget.py --runs {r['runs']} --duration {r['duration_s']:g}{par}{opts}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="100000,1000000")
    ap.add_argument("--budgets", default="1", help="budgets (%%) for recall and false positives")
    ap.add_argument("--cost-budgets", default="0.5,1,5", help="budgets (%%) for the cost, leak runs")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--duration", type=float, default=300.0)
    ap.add_argument("--parallel", type=int, default=1, help="runs at once (each beside its own controls)")
    ap.add_argument("--soak-minutes", type=float, default=0.0, help="the shortened soak instead")
    ap.add_argument(
        "--out", type=Path, help="the soak: write its result here (as it goes) instead of bench/results"
    )
    args = ap.parse_args()
    if args.soak_minutes:
        if args.out is not None:
            with tempfile.TemporaryDirectory(prefix="memtop-leakbudget-soak-") as d:
                r = soak(build(Path(d)), args.soak_minutes, 100_000, 1.0, Path(d), args.out)
            print(json.dumps({k: v for k, v in r.items() if k != "rss_anon_mib"}), flush=True)
            return 0
        path = ROOT / "bench" / "results" / "leaks_budget.json"
        saved: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"cases": []}
        with tempfile.TemporaryDirectory(prefix="memtop-leakbudget-soak-") as d:
            saved["soak"] = soak(build(Path(d)), args.soak_minutes, 100_000, 1.0, Path(d))
        print(json.dumps({k: v for k, v in saved["soak"].items() if k != "rss_anon_mib"}), flush=True)
        saved.setdefault("machine", machine())
        saved.setdefault("runs", 0)
        saved.setdefault("duration_s", 0)
        saved.setdefault("leak_bytes_per_s", LEAK_BPS)
        save("leaks_budget", saved)
        return 0
    rates = [int(r) for r in args.rates.split(",")]
    budgets = [float(b) for b in args.budgets.split(",")]
    cost_budgets = [float(b) for b in args.cost_budgets.split(",")]
    result: dict[str, Any] = {
        "machine": machine(),
        "duration_s": args.duration,
        "runs": args.runs,
        "parallel": args.parallel,
        "rates": args.rates,
        "budgets": args.budgets,
        "cost_budgets": args.cost_budgets,
        "leak_bytes_per_s": LEAK_BPS,
        "leak_block_bytes": LEAK_SIZE,
        "cases": [],
    }
    plan = [
        (rate, budget, leak)
        for rate in rates
        for budget in sorted(set(budgets) | set(cost_budgets))
        for leak in [True] * (args.runs if budget in budgets else 1)
        + ([False] * args.runs if budget in budgets else [])
    ]
    done: dict[tuple[int, float], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="memtop-leakbudget-bench-") as d:
        tmp = Path(d)
        exe = build(tmp)

        def one(i: int) -> tuple[int, dict[str, Any]]:
            rate, budget, leak = plan[i]
            return i, traced_run(exe, rate, leak, budget, args.duration, tmp / f"run{i}")

        with ThreadPoolExecutor(args.parallel) as pool:
            for i, r in pool.map(one, range(len(plan))):
                rate, budget, leak = plan[i]
                print(f"{rate}/s budget {budget}% leak={leak}: {json.dumps(r)}", flush=True)
                done.setdefault((rate, budget), []).append(r)
    result["cases"] = summarise(done)
    path = ROOT / "bench" / "results" / "leaks_budget.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    if "soak" in old:
        result["soak"] = old["soak"]  # the soak's figures are their own run's (--soak-minutes)
    # cases not run this time (another rate, another budget) keep their figures and their own
    # command line, so one rate can be measured again without the others
    kept = [
        {**c, "command": c.get("command") or command_of(old)}
        for c in old.get("cases", [])
        if (c["rate_pairs_per_s"], c["budget_pct"]) not in done
    ]
    for c in result["cases"]:
        c["command"] = command_of(result)
    result["cases"] = sorted(kept + result["cases"], key=lambda c: (c["rate_pairs_per_s"], c["budget_pct"]))
    save("leaks_budget", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
