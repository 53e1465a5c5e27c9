"""Drill-in on a process with 60,000 mappings: this checkout against an earlier revision.

    .venv/bin/python bench/large_maps.py REV [ROUNDS] [MAPPINGS]

A target (bench/workloads/manymaps.c) maps MAPPINGS separate regions (alternating protections,
so the kernel cannot merge them). Each run is memtop's app, headless in a process of its own
(Textual's test driver, 200x50, the /proc probe only, as `--no-bpf`), that opens the drill-in
screen on the target's mappings tab and measures, from the moment the screen is pushed:

- totals_s: the totals line shows the target's RSS (non-zero);
- table_s: state holds every mapping (as many as /proc/PID/maps lists) and the table is drawn;
- added_mib: peak RSS of the memtop process (VmHWM, reset before) minus its RSS before;
- cpu_s: CPU time of the memtop process (all its threads) until the table is drawn;
- key_ms: for each of KEYS presses of `>` (next sort order), one every KEY_EVERY_S from the
  push, the time until the screen has handled it (its sort option changed; the handler redraws
  synchronously, so that includes the redraw). Median and max of a run.

REV is checked out in a temporary git worktree and run with this checkout's venv, alternating
REV and this checkout run by run (ABBA…); each figure is the median over the rounds. A run that
does not finish in RUN_TIMEOUT_S is reported as such.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from harness import ROOT, VENV_PYTHON, build, machine, save  # noqa: E402

KEYS = 6
KEY_EVERY_S = 0.5
RUN_TIMEOUT_S = 180.0


def status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def rss_shown(totals: str) -> bool:
    """The totals line gives the target's RSS (the revision before read "RSS 0" until the table
    was in: a sum over no rows, not a figure)."""
    word = totals.split("RSS ", 1)[1].split()[0] if "RSS " in totals else ""
    return word.isdigit() and int(word) > 0


def cpu_s() -> float:
    return time.process_time()  # every thread of the process


async def drive(pid: int, expected: int) -> dict[str, Any]:
    """One run, in the process of the revision being measured (PYTHONPATH is its tree)."""
    from textual.widgets import DataTable

    from memtop.probes.procfs import ProcfsProbe
    from memtop.state.process import ProcessState
    from memtop.stream.bridge import Bridge
    from memtop.ui.app import MemtopApp
    from memtop.ui.screens.process import ProcessScreen

    bridge = Bridge([ProcfsProbe("/proc")])
    source: Any = bridge  # the app's Source protocol (its `mode` is a property here)
    app = MemtopApp(source, interval_s=1.0)
    out: dict[str, Any] = {}
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause(0.5)
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        rss0 = status_kib("VmRSS")
        cpu0 = cpu_s()
        t0 = time.monotonic()
        screen = ProcessScreen(pid, source, app.state, section="mappings")
        app.push_screen(screen)
        latencies: list[float] = []

        async def keys() -> None:
            driver = app._driver
            assert driver is not None
            from textual import events

            for i in range(KEYS):
                await asyncio.sleep(max(0.0, t0 + (i + 1) * KEY_EVERY_S - time.monotonic()))
                before = screen.opts.sort
                sent = time.monotonic()
                ev = events.Key("greater_than_sign", ">")
                ev.set_sender(app)
                driver.send_message(ev)
                while screen.opts.sort == before and time.monotonic() - sent < RUN_TIMEOUT_S:
                    await asyncio.sleep(0.002)
                latencies.append(time.monotonic() - sent)

        def text_of(sel: str) -> str:
            try:
                w = screen.query_one(sel)
            except Exception:  # noqa: BLE001 - not composed yet
                return ""
            return str(w.__dict__.get("_memtop_text") or "")

        key_task = asyncio.create_task(keys())
        while time.monotonic() - t0 < RUN_TIMEOUT_S:
            now = time.monotonic() - t0
            if "totals_s" not in out and rss_shown(text_of("#proc-mappings-totals")):
                out["totals_s"] = now
            t = app.state.get(ProcessState).target(pid)
            full = (
                t is not None and len(t.mappings) >= expected and getattr(t, "mappings_reading", None) is None
            )
            drawn = any(tb.id == "proc-mappings-table" and tb.row_count > 0 for tb in screen.query(DataTable))
            if "table_s" not in out and full and drawn:
                out["table_s"] = now
                out["cpu_s"] = cpu_s() - cpu0
                out["added_mib"] = (status_kib("VmHWM") - rss0) / 1024
                out["rows"] = len(t.mappings) if t is not None else 0
            if "table_s" in out and "totals_s" in out and key_task.done():
                break
            await asyncio.sleep(0.01)
        if not key_task.done():
            key_task.cancel()
        out["key_ms_median"] = statistics.median(latencies) * 1e3 if latencies else None
        out["key_ms_max"] = max(latencies) * 1e3 if latencies else None
        out["timed_out"] = "table_s" not in out
        app.exit()
    bridge.close()
    return out


def run_once(root: Path, pid: int, expected: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.run(
        [str(VENV_PYTHON), str(Path(__file__).resolve()), "--drive", str(pid), str(expected)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S + 60,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"run in {root} failed: {proc.stderr[-2000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(rev: str, rounds: int = 4, mappings: int = 60000) -> dict[str, Any]:
    from startup_ab import worktree

    label = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True, text=True, check=True
    ).stdout.strip()
    exe = build("manymaps")
    target = subprocess.Popen([str(exe), str(mappings)], stdout=subprocess.PIPE, text=True)
    assert target.stdout is not None
    try:
        assert target.stdout.readline().startswith("ready")
        expected = len(Path(f"/proc/{target.pid}/maps").read_text().splitlines())
        out: dict[str, Any] = {
            "case": f"drill-in mappings tab, {expected} mappings",
            "machine": machine(),
            "baseline": label,
            "runs": {},
        }
        with worktree(rev) as old:
            variants = {label: old, "this checkout": ROOT}
            runs: dict[str, list[dict[str, Any]]] = {k: [] for k in variants}
            for r in range(rounds):
                order = list(variants.items()) if r % 2 == 0 else list(reversed(variants.items()))
                for name, root in order:
                    res = run_once(root, target.pid, expected)
                    runs[name].append(res)
                    print(f"round {r} {name}: {res}", file=sys.stderr)
        out["runs"] = runs
        metrics = ("totals_s", "table_s", "added_mib", "cpu_s", "key_ms_median", "key_ms_max")
        out["summary"] = {
            name: {
                m: statistics.median([x[m] for x in rs if x.get(m) is not None] or [float("nan")])
                for m in metrics
            }
            for name, rs in runs.items()
        }
    finally:
        target.kill()
        target.wait()
    save("large_maps", out)
    return out


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--drive":
        print(json.dumps(asyncio.run(drive(int(sys.argv[2]), int(sys.argv[3])))))
    else:
        args = sys.argv[1:]
        result = main(args[0], *(int(a) for a in args[1:3]))
        for name, figures in result["summary"].items():
            print(name, " ".join(f"{k}={v:.3g}" for k, v in figures.items()))
