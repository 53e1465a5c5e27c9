"""Case 4: memtop's own cost. CPU% of a core and memory (RssAnon, RssFile) at 1 s refresh with
1,000 live processes (spawned sleepers), and under a fault storm (steady state: a window once
every row's sparkline is full; the first window after attach is reported beside it); time to first frame and to all
probes attached (from process start, reported by memtop through MEMTOP_READY_FILE). The targets
are in bench/report.py."""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from harness import CONDITIONS, QUIET_S, load_condition, machine, memtop_ready, save, status_kb

from memtop.probes.procfs import read_bytes  # the reader memtop itself polls with

CLK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    text = Path(f"/proc/{pid}/stat").read_text()
    f = text[text.rindex(")") + 2 :].split()
    return (int(f[11]) + int(f[12])) / CLK


def proc_read_floor_pct(passes: int = 20) -> float:
    """CPU (user + system, % of a core) of opening, reading and closing every /proc/PID/stat once
    per second, as top-like tools do (memtop keeps the files open and re-reads quiet processes
    less often, so it spends less than this)."""
    import resource

    r0 = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(passes):
        for name in os.listdir("/proc"):
            if name.isdigit():
                read_bytes(f"/proc/{name}/stat")
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    spent = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return 100 * spent / passes


def run_memtop(seconds: float) -> dict[str, float]:
    with memtop_ready() as (proc, info):
        # the first window starts 3 s after every probe is attached; the steady one once every
        # row's RSS sparkline is full (12 samples), after which an idle row stops changing
        time.sleep(3)
        c0, t0 = cpu_s(proc.pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = cpu_s(proc.pid), time.monotonic()
        time.sleep(max(0.0, 15 - seconds))
        c2, t2 = cpu_s(proc.pid), time.monotonic()
        time.sleep(seconds)
        c3, t3 = cpu_s(proc.pid), time.monotonic()
        mem = status_kb(proc.pid, "RssAnon", "RssFile")
        return {
            "cpu_pct_first_window": 100 * (c1 - c0) / (t1 - t0),
            "proc_stat_floor_pct": proc_read_floor_pct(),
            "cpu_pct_of_core": 100 * (c3 - c2) / (t3 - t2),
            "rss_anon_mib": mem["RssAnon"] / 1024,
            "rss_file_mib": mem["RssFile"] / 1024,
            "first_frame_s": float(info.get("first_frame_s") or 0),
            "all_probes_s": float(info.get("settled_s") or 0),
        }


def main(rounds: int = 5, seconds: float = 10) -> dict[str, Any]:
    results: dict[str, list[dict[str, float]]] = {c: [] for c in CONDITIONS}
    for _ in range(rounds):
        for condition in CONDITIONS:
            # memtop starts 1 s into the condition (as in bench/startup_ab.py): a storm in progress,
            # not its first second, when the workloads fault fresh memory (host-side noise here);
            # and not right after the previous condition ended (QUIET_S)
            time.sleep(QUIET_S)
            with load_condition(condition, settle_s=1):
                results[condition].append(run_memtop(seconds))
    summary = {
        case: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for case, runs in results.items()
    }
    result: dict[str, Any] = {
        "case": "memtop itself",
        "machine": machine(),
        "summary": summary,
        "samples": results,
    }
    save("memtop_self", result)
    return result


if __name__ == "__main__":
    r = main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
    for case, v in r["summary"].items():
        print(case, {k: round(x, 3) for k, x in v.items()})
