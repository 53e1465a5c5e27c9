"""`make bench`: run every case in one session (each writes its bench/results/NAME.json), then
bench/report.py, which turns the json into bench/RESULTS.md.

usage: sudo .venv/bin/python bench/run.py [ROUNDS] [CASE …]   (cases: CASES below)"""

from __future__ import annotations

import importlib
import subprocess
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from harness import BENCH  # noqa: E402

CASES = [
    "fault_overhead",
    "reclaim_overhead",
    "leaks_cost",
    "leaks_preflight",
    "swapin_overhead",
    "memtop_self",
    "cgroups_cost",
    "needed_cost",
    "lru_gen_cost",
    "shared_cost",
    "pagecache_cost",
    "export_cost",
    "pane_cost",
    "drill_fault_cost",
    "kernel_cost",
    "lost_counts",
    "replay_seek",
    "micro",
]
#: startup_ab and large_maps are not here: they compare with a revision given on their command line
#: (bench/startup_ab.py REV, bench/large_maps.py REV), so they run alone
#: cases with their own command line, run as a process (the arguments before ROUNDS)
SCRIPTS = {"leaks_cost": ["--rounds"], "leaks_preflight": ["--rounds"], "replay_seek": ["--seeks"]}


def run_micro() -> bool:
    """bench/test_micro.py under pytest-benchmark, into bench/results/micro.json."""
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
            str(BENCH / "results" / "micro.json"),
        ],
        check=False,
    )
    return proc.returncode == 0


def run_case(name: str, rounds: int) -> bool:
    if name == "micro":
        return run_micro()
    if name in SCRIPTS:
        cmd = [sys.executable, str(BENCH / f"{name}.py"), *SCRIPTS[name], str(rounds)]
        return subprocess.run(cmd, check=False).returncode == 0
    try:
        importlib.import_module(name).main(rounds)
    except Exception:  # noqa: BLE001 - one broken case must not hide the others
        traceback.print_exc(limit=3)
        return False
    return True


def main(argv: list[str]) -> int:
    rounds = int(argv[1]) if len(argv) > 1 else 5
    failed = []
    for name in argv[2:] or CASES:
        print(f"== {name}", flush=True)
        if not run_case(name, rounds):
            failed.append(name)
    import report

    report.main(["report.py"])
    print((BENCH / "RESULTS.md").read_text())
    if failed:  # their rows keep the figures of their last good run (their json is unchanged)
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
