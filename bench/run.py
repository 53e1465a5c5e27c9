"""`make bench`: run every case in one session and write bench/RESULTS.md (medians, ratios)."""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from harness import BENCH, machine  # noqa: E402

CASES = [
    "fault_overhead",
    "reclaim_overhead",
    "memleak_cost",
    "swapin_overhead",
    "memtop_self",
    "lost_counts",
    "micro",
]
#: cases with their own command line, run as a process; their printed table goes into the results
SCRIPTS = {"memleak_cost": ["--rounds"]}


def fmt_summary(name: str, r: dict[str, Any]) -> list[str]:
    lines = [f"### {r.get('case', name)}", ""]
    summ = r.get("summary")
    if isinstance(summ, dict) and all(isinstance(v, dict) and "ratio" in v for v in summ.values()):
        lines += [
            f"Metric: {r.get('metric', '')}",
            "",
            "| variant | median | min | max | n | ratio to bare |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for k, v in summ.items():
            lines.append(
                f"| {k} | {v['median']:.4g} | {v['min']:.4g} | {v['max']:.4g} | {v['n']} | {v['ratio']:.3f} |"
            )
    elif isinstance(summ, dict):
        keys = list(next(iter(summ.values())).keys())
        lines += ["| situation | " + " | ".join(keys) + " |", "|" + " --- |" * (len(keys) + 1)]
        for k, v in summ.items():
            lines.append(f"| {k} | " + " | ".join(f"{v[x]:.3g}" for x in keys) + " |")
    else:
        for k, v in r.items():
            if isinstance(v, dict) and "summary" in v:
                lines += fmt_summary(k, {"case": f"{r.get('case', name)}: {k}", **v})[1:]
            elif k not in ("runs", "samples", "machine", "case"):
                lines.append(f"- {k}: {v}")
    return lines + [""]


def micro() -> list[str]:
    """bench/test_micro.py under pytest-benchmark: each group's medians and their ratio."""
    import json
    import subprocess

    out_json = BENCH / "results" / "micro.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(BENCH / "test_micro.py"),
            "--benchmark-json",
            str(out_json),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = ["### micro-cases (pytest-benchmark)", ""]
    if proc.returncode != 0:
        return lines + ["failed:", "```", (proc.stdout + proc.stderr).strip()[-2000:], "```", ""]
    groups: dict[str, list[tuple[str, float, int]]] = {}
    for b in json.loads(out_json.read_text())["benchmarks"]:
        groups.setdefault(b["group"], []).append(
            (b["param"] or b["name"], b["stats"]["median"], b["stats"]["rounds"])
        )
    lines += ["| group | variant | median | rounds | ratio to the first |", "| --- | --- | --- | --- | --- |"]
    for group, rows in groups.items():
        base = rows[0][1]
        for variant, median, n in rows:
            lines.append(f"| {group} | {variant} | {median * 1e3:.3f} ms | {n} | {median / base:.2f} |")
    return lines + [""]


def main(argv: list[str]) -> int:
    rounds = int(argv[1]) if len(argv) > 1 else 5
    only = argv[2:] or CASES
    out = [
        "# memtop benchmark results",
        "",
        f"Machine: {machine()}. Run at {time.strftime('%Y-%m-%d %H:%M')}.",
        f"Each figure is the median of alternating runs ({rounds} rounds) in this one session.",
        "",
    ]
    for name in only:
        if name == "micro":
            print("== micro", flush=True)
            out += micro()
            continue
        try:
            mod = importlib.import_module(name)
        except ImportError as exc:
            out += [f"### {name}", "", f"not run: {exc}", ""]
            continue
        print(f"== {name}", flush=True)
        if name in SCRIPTS:
            import subprocess

            proc = subprocess.run(
                [sys.executable, str(BENCH / f"{name}.py"), *SCRIPTS[name], str(rounds)],
                capture_output=True,
                text=True,
                check=False,
            )
            out += [
                f"### {name}",
                "",
                "```",
                proc.stdout.strip()[-3000:] or proc.stderr.strip()[-2000:],
                "```",
                "",
            ]
            continue
        try:
            result = mod.main(rounds)
        except Exception:  # noqa: BLE001 - one broken case must not hide the others
            out += [f"### {name}", "", "failed:", "```", traceback.format_exc(limit=3), "```", ""]
            continue
        out += fmt_summary(name, result)
    (BENCH / "RESULTS.auto.md").write_text("\n".join(out) + "\n")
    print((BENCH / "RESULTS.auto.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
