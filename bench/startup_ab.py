"""Start-up A/B: time to first frame and to every default probe attached, this checkout against an
earlier revision, alternating run by run, idle, with 1,000 sleepers and in a fault storm.

    .venv/bin/python bench/startup_ab.py REV [ROUNDS]

    .venv/bin/python bench/startup_ab.py REV [ROUNDS] --tui

REV is copied to a temporary directory (git archive) and run with this checkout's venv (same Python,
Textual and BCC), so only memtop's code differs. Each run is `memtop snapshot` headless, or with
``--tui`` the TUI on a 160x45 pseudo-terminal (bench/memtop_self.py's, the first frame a user
sees: the TUI reads first only what the pane shown needs); memtop reports both times (from its
process start) through MEMTOP_READY_FILE.
"""

from __future__ import annotations

import os
import shutil
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


def run_once_tui(root: Path) -> dict[str, float]:
    """The TUI of the checkout at ``root`` on a pseudo-terminal, until every probe is attached."""
    from memtop_self import OnTerminal, wait_ready

    tmp = Path(tempfile.mkdtemp(prefix="memtop-ab-tui-"))
    ready = tmp / "ready"
    # that checkout's memtop first on the path (this venv has this checkout's installed)
    code = f"import sys; sys.path.insert(0, {str(root)!r}); from memtop.cli import entry; raise SystemExit(entry())"
    env = dict(os.environ, MEMTOP_READY_FILE=str(ready), PYTHONPATH=str(root))
    prog = OnTerminal([str(VENV_PYTHON), "-c", code], env)
    try:
        doc = wait_ready(prog, ready, [0])
        out = {"first_frame_s": float(doc["first_frame_s"]), "all_probes_s": float(doc["settled_s"])}
        if doc.get("first_frame_cpu_s"):  # the CPU used by then, from revisions that report it
            out["first_frame_cpu_s"] = float(doc["first_frame_cpu_s"])
        return out
    finally:
        prog.stop()
        ready.unlink(missing_ok=True)
        tmp.rmdir()


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """REV's files in a temporary directory: a copy (git archive), not a worktree, so nothing of
    the repository's own state (its list of worktrees, shared with other checkouts) changes."""
    path = Path(tempfile.mkdtemp(prefix="memtop-rev-")) / "tree"
    path.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(path)], input=archive, check=True)
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
        shutil.rmtree(path.parent, ignore_errors=True)


def main(rev: str, rounds: int = 8, tui: bool = False) -> dict[str, object]:
    label = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True, text=True, check=True
    ).stdout.strip()
    out: dict[str, object] = {
        "case": "start-up A/B",
        "machine": machine(),
        "baseline": label,
        "frontend": "tui" if tui else "snapshot",
    }
    once = run_once_tui if tui else run_once
    with worktree(rev) as old:
        variants = {label: old, "this checkout": ROOT}
        for cond in CONDITIONS:
            samples: dict[str, dict[str, list[float]]] = {}
            time.sleep(QUIET_S)  # the previous condition's processes and memtop are gone, and settled
            with load_condition(cond, settle_s=1):
                for r in range(rounds):  # A B, B A, A B, …
                    order = list(variants.items()) if r % 2 == 0 else list(reversed(variants.items()))
                    for name, root in order:
                        for metric, value in once(root).items():
                            samples.setdefault(metric, {k: [] for k in variants})[name].append(value)
            # a metric an earlier revision does not report (the CPU to the first frame) is left out
            out[cond] = {m: summary(s, label) for m, s in samples.items() if all(s.values())}
    save("startup_ab", out)
    return out


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--tui"]
    result = main(args[0], int(args[1]) if len(args) > 1 else 8, tui="--tui" in sys.argv[1:])
    for cond in CONDITIONS:
        per_metric = result[cond]
        assert isinstance(per_metric, dict)  # {metric: summary()}, beside the case's plain fields
        for metric, s in per_metric.items():
            print(
                cond, metric, {k: f"{v['median']:.3f} ({v['ratio']:.2f}x, n={v['n']})" for k, v in s.items()}
            )
