"""Start-up A/B: time to first frame and to every default probe attached, this checkout against an
earlier revision, alternating run by run, idle, with 1,000 sleepers and in a fault storm.

    .venv/bin/python bench/startup_ab.py REV [ROUNDS]

REV is checked out in a temporary git worktree and run with this checkout's venv (same Python,
Textual and BCC), so only memtop's code differs. Each run is `memtop snapshot` headless; memtop
reports both times (from its process start) through MEMTOP_READY_FILE.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness import (
    CONDITIONS,
    QUIET_S,
    ROOT,
    VENV_PYTHON,
    load_condition,
    machine,
    memtop_ready,
    save,
    summary,
)


def run_once(root: Path) -> dict[str, float]:
    with memtop_ready(root=root) as (_, doc):
        return {"first_frame_s": float(doc["first_frame_s"]), "all_probes_s": float(doc["settled_s"])}


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="memtop-rev-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(path), rev], check=True)
    # bytecode for both trees, as `make setup` compiles this one's (else the revision pays for
    # compiling its modules on every start and the A/B measures that)
    for tree in (path, ROOT):
        subprocess.run(
            [str(VENV_PYTHON), "-m", "compileall", "-q", str(tree / "memtop")],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)


def main(rev: str, rounds: int = 8) -> dict[str, object]:
    label = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True, text=True, check=True
    ).stdout.strip()
    out: dict[str, object] = {"case": "start-up A/B", "machine": machine(), "baseline": label}
    with worktree(rev) as old:
        variants = {label: old, "this checkout": ROOT}
        for cond in CONDITIONS:
            samples: dict[str, dict[str, list[float]]] = {}
            time.sleep(QUIET_S)  # the previous condition's processes and memtop are gone, and settled
            with load_condition(cond, settle_s=1):
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
    for cond in CONDITIONS:
        per_metric = result[cond]
        assert isinstance(per_metric, dict)  # {metric: summary()}, beside the case's plain fields
        for metric, s in per_metric.items():
            print(
                cond, metric, {k: f"{v['median']:.3f} ({v['ratio']:.2f}x, n={v['n']})" for k, v in s.items()}
            )
