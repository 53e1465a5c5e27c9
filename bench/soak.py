"""Soak (issue: reliability): memtop with every default pane and a memleak attach, under cycling
memory pressure (a memcg-limited reclaim workload with swap, process churn, a leaking process) for
DURATION seconds (default 1800). Samples memtop's RSS every 10 s. Pass: memtop's RSS growth after
warm-up under its target (bench/report.py), memtop still running at the end and exits 0, drops
counted (reported from the final reclaim snapshot). Writes bench/results/soak.json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from harness import BENCH, build, machine, memtop_cmd, save, status_kb  # noqa: E402

ROOT = BENCH.parent
CG = Path("/sys/fs/cgroup/memory")


def main(duration: float = 1800, warmup: float = 120, profile: str | None = None) -> dict[str, object]:
    reclaim = build("reclaim")
    churn_src = ROOT / "tests" / "workloads" / "churn.c"
    leaky_src = ROOT / "tests" / "workloads" / "leaky.c"
    tmp = Path(tempfile.mkdtemp(prefix="memtop-soak-"))
    churn, leaky = tmp / "churn", tmp / "leaky"
    subprocess.run(
        ["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(churn), str(churn_src)], check=True
    )
    subprocess.run(
        ["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(leaky), str(leaky_src)], check=True
    )
    leak = subprocess.Popen([str(leaky), "a", str(int(duration)), "60"], stdout=subprocess.DEVNULL)
    cg = CG / f"memtop-soak-{uuid.uuid4().hex[:6]}"
    cg.mkdir()
    (cg / "memory.limit_in_bytes").write_text(str(100 << 20))
    ready = tmp / "ready"
    out = tmp / "reclaim.json"
    cmd = memtop_cmd()
    if profile:  # the same run under tracemalloc (slower): reports in PROFILE every 60 s
        cmd = [
            str(ROOT / ".venv" / "bin" / "python"),
            str(BENCH / "tracemem.py"),
            profile,
            "60",
            str(warmup),
            "--",
        ]
    mt = subprocess.Popen(
        cmd
        + [
            "snapshot",
            "--pane",
            "reclaim",
            "--format",
            "json",
            "--output",
            str(out),
            "--after",
            str(duration),
            "--leaks",
            str(leak.pid),
        ],
        env=dict(os.environ, MEMTOP_READY_FILE=str(ready)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    samples: list[tuple[float, dict[str, int]]] = []
    t0 = time.monotonic()
    cycles = 0
    try:
        while not ready.exists():
            time.sleep(0.1)
            if mt.poll() is not None:
                raise RuntimeError("memtop exited during start-up")
        next_sample = 0.0
        while time.monotonic() - t0 < duration - 5 and mt.poll() is None:
            cycles += 1
            subprocess.run(
                ["sh", "-c", f"echo $$ > {cg}/cgroup.procs && exec {reclaim} 300 1"],
                stdout=subprocess.DEVNULL,
                check=False,
            )
            subprocess.run([str(churn), "2000"], stdout=subprocess.DEVNULL, check=False)
            idle_until = time.monotonic() + 10
            while time.monotonic() < idle_until:
                if time.monotonic() - t0 >= next_sample:
                    samples.append((time.monotonic() - t0, status_kb(mt.pid, "RssAnon", "RssFile", "VmRSS")))
                    next_sample += 10
                time.sleep(0.5)
        code = mt.wait(timeout=duration + 120)
    finally:
        if mt.poll() is None:
            mt.send_signal(signal.SIGTERM)
            mt.wait(timeout=30)
        leak.kill()
        for _ in range(50):
            try:
                cg.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    after = [s for t, s in samples if t >= warmup]
    growth_kib = (after[-1]["VmRSS"] - after[0]["VmRSS"]) if len(after) >= 2 else 0
    doc = json.loads(out.read_text()) if out.exists() else {}
    result = {
        "case": "soak",
        "machine": machine(),
        "duration_s": duration,
        "cycles": cycles,
        "exit_code": code,
        "rss_after_warmup_kib": after[0] if after else {},
        "rss_end_kib": after[-1] if after else {},
        "rss_growth_after_warmup_mib": growth_kib / 1024,
        "reclaim_events_received": doc.get("events_received"),
        "reclaim_lost_events": doc.get("lost_events"),
        "samples": samples,
    }
    save("soak", result)
    return result


if __name__ == "__main__":
    r = main(
        float(sys.argv[1]) if len(sys.argv) > 1 else 1800, profile=sys.argv[2] if len(sys.argv) > 2 else None
    )
    print({k: v for k, v in r.items() if k != "samples"})
