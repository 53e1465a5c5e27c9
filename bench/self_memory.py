"""Where memtop's own memory goes (issue 36, "Performance", RssAnon): the TUI on a 160x45
pseudo-terminal (as bench/memtop_self.py runs it), in one of its conditions (1,000 sleepers by
default), with tracemalloc on in memtop's process. After AFTER seconds it writes to OUTDIR:
the Python heap's top 25 sites by traceback and by line, a census of the processes state (rows,
their histories and sparklines, bytes per row) and of the tables' cells, the process's anonymous
memory from /proc/self/smaps by kind of mapping, and RssAnon before and after ``malloc_trim(0)``.

    sudo .venv/bin/python bench/self_memory.py OUTDIR [--after S] [--condition C] [--no-trace]
        [--diff-from S [--trace-from S]]

``--no-trace``: without tracemalloc (its own bookkeeping is a large part of the heap), for the
figures of smaps and malloc_trim only. ``--diff-from S``: what grew between S seconds in and
AFTER (tracemalloc's snapshots compared, top 25 by traceback and by line), and RssAnon every 5 s
between; ``--trace-from S``: tracemalloc starts S seconds in, once the first frame is drawn
(``--after 200 --trace-from 30 --diff-from 50`` is what docs/performance.md quotes). A measuring tool, not a benchmark case: nothing is saved
to bench/results."""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from harness import ROOT, load_condition  # noqa: E402

PYTHON = ROOT / ".venv" / "bin" / "python"


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def smaps_anon() -> list[str]:
    """Anonymous kB by mapping: [heap] (the main malloc arena), the largest anonymous mappings
    (Python's object arenas merge into larger ones; a thread's malloc arena is a 64 MiB
    reservation, mostly untouched), what is file-backed (relocated data)."""
    vmas: list[tuple[int, int, str]] = []
    name, size_kib = "", 0
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = re.match(r"^([0-9a-f]+)-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$", line)
        if head:
            name, size_kib = head.group(2) or f"anon@{head.group(1)}", 0
        elif line.startswith("Size:"):
            size_kib = int(line.split()[1])
        elif line.startswith("Anonymous:") and int(line.split()[1]):
            vmas.append((int(line.split()[1]), size_kib, name))
    total = sum(v[0] for v in vmas)
    files = sum(v[0] for v in vmas if v[2].startswith("/"))
    out = [f"{total:8d} kB anonymous in all, {files} kB of it in file mappings"]
    for anon, size, nm in sorted(vmas, reverse=True)[:12]:
        out.append(f"{anon:8d} kB of a {size} kB mapping {nm}")
    return out


def _deep(obj: object) -> int:
    """Bytes of a container and the objects it holds (one level)."""
    inner = getattr(obj, "_data", None)
    if inner is not None:
        return sys.getsizeof(obj) + sys.getsizeof(inner)
    held = obj if isinstance(obj, Iterable) else ()
    return sys.getsizeof(obj) + sum(sys.getsizeof(v) for v in held)


def census() -> list[str]:
    """The processes state's rows and the tables' cells, found through the collector."""
    from memtop.state.processes import ProcRow

    gc.unfreeze()  # the rows of the first frame were frozen with it (memtop/runtime/startup_gc.py)

    rows = [o for o in gc.get_objects() if isinstance(o, ProcRow)]
    out = [f"ProcRow objects: {len(rows)}"]
    if rows:
        # the sparkline windows with the objects they hold (a ring's array); their times are
        # one ring for every row (ProcRow.ticks)
        spark = sum(_deep(r.spark) for r in rows) + sum(
            _deep(t) for t in {id(r.ticks): r.ticks for r in rows}.values()
        )
        hist = sum(r.history.nbytes() + sys.getsizeof(r.history) for r in rows)
        samples = sum(sys.getsizeof(r.sample) for r in rows)
        strs = sum(
            sys.getsizeof(r.sample.comm) + sys.getsizeof(r.sample.user) + sys.getsizeof(r.sample.cmdline)
            for r in rows
        )
        own = sum(sys.getsizeof(r) for r in rows)
        n = len(rows)
        out += [
            f"  the rows themselves {own} B ({own / n:.0f} B a row)",
            f"  sparkline rings and their times {spark} B ({spark / n:.0f} B a row)",
            f"  histories {hist} B ({hist / n:.0f} B a row)",
            f"  samples {samples} B ({samples / n:.0f} B a row), their strings {strs} B ({strs / n:.0f})",
        ]
    try:
        from rich.text import Text
        from textual.widgets import DataTable

        tables = [o for o in gc.get_objects() if isinstance(o, DataTable)]
        for t in tables:
            cells = 0
            nbytes = 0
            seen: set[int] = set()
            for rk in list(t.rows):
                for cell in t.get_row(rk):
                    cells += 1
                    if id(cell) in seen:  # a cell shared with another
                        continue
                    seen.add(id(cell))
                    nbytes += sys.getsizeof(cell)
                    if isinstance(cell, Text):
                        nbytes += sys.getsizeof(cell.plain) + sys.getsizeof(cell._spans)
            out.append(
                f"table {t.id or type(t).__name__}: {len(t.rows)} rows, {cells} cells "
                f"({len(seen)} objects), ~{nbytes} B"
            )
            try:
                from memtop.ui.panes.base import _MEMOS

                memo = _MEMOS.get(t)
                if memo is not None:
                    kept = [len(v) for k, v in vars(memo).items() if k.startswith("texts")]
                    out.append(f"  its memo: {len(memo.shown)} rows shown, cells kept for sharing {kept}")
            except ImportError:
                pass
    except Exception as e:  # noqa: BLE001 - a census, not a test
        out.append(f"tables: {e!r}")
    return out


def modules() -> list[str]:
    """The modules loaded, and memtop's largest by source size (their code objects are most of
    the heap that imports leave)."""
    files = {
        n: f for n, m in list(sys.modules.items()) if m is not None and (f := getattr(m, "__file__", None))
    }
    own = sorted(
        ((Path(f).stat().st_size, n) for n, f in files.items() if n.startswith("memtop")), reverse=True
    )
    mods = files
    out = [f"modules loaded: {len(mods)}, memtop's {len(own)} ({sum(s for s, _ in own) >> 10} KiB of source)"]
    return out + [f"  {size >> 10:5d} KiB {name}" for size, name in own[:30]]


def _snapshot() -> tracemalloc.Snapshot:
    return tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])


def report(
    out: Path, after_s: float, traced: bool, diff_from_s: float | None = None, trace_from_s: float = 0.0
) -> None:
    """The report at ``after_s``; with ``diff_from_s``, also what grew since then (tracemalloc's
    snapshots diffed, top 25 by traceback), and RssAnon every 5 s between. ``trace_from_s``:
    tracemalloc starts then, not at the process's start (what was allocated before and lives on
    is not seen, but the TUI runs at its own pace until then: tracing from the start made a first
    frame with 4,000 processes take longer than the first snapshot's wait)."""
    t0 = time.monotonic()
    if traced and trace_from_s:
        time.sleep(trace_from_s)
        tracemalloc.start(10)
    timeline: list[str] = []
    first: tracemalloc.Snapshot | None = None
    if diff_from_s is not None:
        taken = False
        while (now := time.monotonic() - t0) < after_s:
            if not taken and now >= diff_from_s:
                taken = True
                first = _snapshot() if traced else None
                timeline.append(f"{now:6.0f} s RssAnon {status_kib('RssAnon')} kB (first snapshot)")
            else:
                timeline.append(f"{now:6.0f} s RssAnon {status_kib('RssAnon')} kB")
            time.sleep(min(5.0, max(0.0, after_s - now)))
    else:
        time.sleep(after_s)
    lines = [
        f"after {after_s:.0f} s: RssAnon {status_kib('RssAnon')} kB, RssFile {status_kib('RssFile')} kB",
        "",
    ]
    if timeline:
        lines += ["RssAnon over the run:"] + timeline + [""]
    if traced:
        snap = _snapshot()
        if first is not None:
            grown = snap.compare_to(first, "traceback")
            lines += [f"grown since {diff_from_s:.0f} s, top 25 by traceback:"]
            for d in grown[:25]:
                lines += ["", str(d)] + d.traceback.format(limit=10)
            lines += ["", f"grown since {diff_from_s:.0f} s, top 25 by line:"]
            lines += [str(d) for d in snap.compare_to(first, "lineno")[:25]] + [""]
        size, peak = tracemalloc.get_traced_memory()
        lines += [
            f"traced {size >> 10} kB (peak {peak >> 10} kB), tracemalloc's own {tracemalloc.get_tracemalloc_memory() >> 10} kB",
            "",
        ]
        lines += ["top 25 by line:"] + [str(s) for s in snap.statistics("lineno")[:25]]
        lines += ["", "top 25 by file:"] + [str(s) for s in snap.statistics("filename")[:25]]
        lines += ["", "top 25 by traceback:"]
        for s in snap.statistics("traceback")[:25]:
            lines += ["", str(s)] + s.traceback.format(limit=8)
    lines += ["", "census:"] + census() + modules()
    lines += ["", "anonymous memory by mapping:"] + smaps_anon()
    before = status_kib("RssAnon")
    libc = ctypes.CDLL(None)
    libc.malloc_trim(0)
    lines += ["", f"malloc_trim(0): RssAnon {before} -> {status_kib('RssAnon')} kB"]
    # what the collector would free now (the TUI runs it at high thresholds, startup_gc.py)
    before = status_kib("RssAnon")
    freed = gc.collect()
    libc.malloc_trim(0)
    lines += [
        f"gc.collect() ({freed} objects) and malloc_trim(0): RssAnon {before} -> {status_kib('RssAnon')} kB"
    ]
    (out / "report.txt").write_text("\n".join(lines) + "\n")
    os.kill(os.getpid(), 15)


def inside(
    out: Path, after_s: float, traced: bool, diff_from_s: float | None, trace_from_s: float, rest: list[str]
) -> int:
    if traced and not trace_from_s:
        tracemalloc.start(25)
    threading.Thread(
        target=report, args=(out, after_s, traced, diff_from_s, trace_from_s), daemon=True
    ).start()
    from memtop.cli import main as memtop_main

    return memtop_main(rest)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--after", type=float, default=40.0)
    ap.add_argument("--condition", default="1000 sleepers")
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument("--diff-from", type=float, help="seconds in: a first snapshot, diffed at --after")
    ap.add_argument("--trace-from", type=float, default=0.0, help="seconds in: tracemalloc starts")
    ap.add_argument("--root", default=str(ROOT), help="the checkout whose memtop runs (an A/B)")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("rest", nargs="*")
    a = ap.parse_args()
    out = Path(a.outdir)
    out.mkdir(parents=True, exist_ok=True)
    if a.inside:
        return inside(out, a.after, not a.no_trace, a.diff_from, a.trace_from, a.rest)
    from memtop_self import OnTerminal

    cmd = [str(PYTHON), __file__, str(out), "--inside", "--after", str(a.after)]
    cmd += ["--no-trace"] if a.no_trace else []
    cmd += ["--diff-from", str(a.diff_from)] if a.diff_from is not None else []
    cmd += ["--trace-from", str(a.trace_from)]
    tmp = Path(tempfile.mkdtemp(prefix="memtop-selfmem-"))
    env: dict[str, Any] = dict(os.environ, PYTHONPATH=a.root)
    try:
        with load_condition(a.condition, settle_s=1):
            prog = OnTerminal(cmd, env)
            deadline = time.monotonic() + a.after + 600  # a traced report takes minutes
            while prog.alive() and time.monotonic() < deadline:
                time.sleep(0.5)
            prog.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print((out / "report.txt").read_text() if (out / "report.txt").exists() else "no report")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
