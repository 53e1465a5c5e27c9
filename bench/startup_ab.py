"""Start-up A/B: time to first frame and to every default probe attached, this checkout against an
earlier revision, alternating run by run, idle, with 1,000 sleepers and in a fault storm.

    .venv/bin/python bench/startup_ab.py REV [ROUNDS]

REV is checked out in a temporary git worktree and run with this checkout's venv (same Python,
Textual and BCC), so only memtop's code differs. Each run is `memtop snapshot` headless; memtop
reports both times (from its process start) through MEMTOP_READY_FILE.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness import ROOT, build, machine, save, summary

PYTHON = ROOT / ".venv" / "bin" / "python"


def run_once(root: Path) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="memtop-startup-"))
    ready = tmp / "ready"
    proc = subprocess.Popen(
        [str(PYTHON), "-m", "memtop", "snapshot", "--pane", "processes", "--output", str(tmp / "o.json"),
         "--after", "100000"],
        env=dict(os.environ, MEMTOP_READY_FILE=str(ready), PYTHONPATH=str(root)), cwd=root,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.1)  # the file is written in one call; let it land
        doc = json.loads(ready.read_text())
        return {"first_frame_s": float(doc["first_frame_s"]), "all_probes_s": float(doc["settled_s"])}
    finally:
        proc.terminate()
        proc.wait()


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="memtop-rev-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(path), rev], check=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)


@contextmanager
def condition(name: str) -> Iterator[None]:
    procs: list[subprocess.Popen[bytes]] = []
    if name == "1000 sleepers":
        procs = [subprocess.Popen(["sleep", "600"]) for _ in range(1000)]
    elif name == "fault storm":
        refault = build("refault")
        procs = [subprocess.Popen(["sh", "-c", f"while :; do {refault} 64 32 >/dev/null; done"],
                                  start_new_session=True) for _ in range(2)]
    try:
        time.sleep(1)
        yield
    finally:
        for p in procs:
            if name == "fault storm":
                os.killpg(p.pid, signal.SIGKILL)
            else:
                p.kill()
        for p in procs:
            p.wait()


def main(rev: str, rounds: int = 8) -> dict[str, object]:
    label = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True,
                           text=True, check=True).stdout.strip()
    out: dict[str, object] = {"case": "start-up A/B", "machine": machine(), "baseline": label}
    with worktree(rev) as old:
        variants = {label: old, "this checkout": ROOT}
        for cond in ("idle", "1000 sleepers", "fault storm"):
            samples: dict[str, dict[str, list[float]]] = {}
            with condition(cond):
                for r in range(rounds):  # A B, B A, A B, …
                    order = list(variants.items()) if r % 2 == 0 else list(reversed(variants.items()))
                    for name, root in order:
                        for metric, value in run_once(root).items():
                            samples.setdefault(metric, {k: [] for k in variants})[name].append(value)
            out[cond] = {m: summary(s, label) for m, s in samples.items()}
    save("startup_ab", out)
    return out


if __name__ == "__main__":
    result = main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 8)
    for cond in ("idle", "1000 sleepers", "fault storm"):
        for metric, s in result[cond].items():  # type: ignore[attr-defined]
            print(cond, metric, {k: f"{v['median']:.3f} ({v['ratio']:.2f}x, n={v['n']})" for k, v in s.items()})
