"""Where memtop's own CPU goes (issue 36): the TUI on a 160x45 pseudo-terminal, its parts timed
inside it by thread CPU time over a steady window, as docs/performance.md's table of memtop's own
cost gives them.

    sudo .venv/bin/python bench/self_profile.py [--warmup S] [--seconds S] [-- MEMTOP ARGS…]

memtop runs in a Python that first wraps a few functions with timers (each call's
``time.thread_time_ns``, so the poll thread's work is counted in the poll thread): Textual's
screen update (layout and rendering, and within it the styles cache's and FastTable's lines and
the compositor's reflow), the app's redraw (views and widgets), the state's apply, the bridge's
poll and each probe's poll. After ``--warmup`` seconds it counts for ``--seconds``, then writes
each part's CPU ms a second and calls a second, beside the whole process's CPU and each
thread's (the main thread draws and applies, the poll thread polls), and the bench prints
that. The wrappers cost a little themselves: compare parts with each other, and the whole
with bench/memtop_self.py's figures. A part whose function is no longer there (another Textual)
is left out and named."""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib
import json
import os
import pkgutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: (module, class, method, label): what is timed
PARTS = (
    ("textual.screen", "Screen", "_on_timer_update", "Textual's screen updates (layout and rendering)"),
    ("textual._compositor", "Compositor", "reflow", "  of which: layout (the compositor's reflow)"),
    ("textual._styles_cache", "StylesCache", "render_line", "  of which: lines through the styles cache"),
    ("memtop.ui.table", "FastTable", "render_line", "    of which: the tables' own lines"),
    ("textual.widget", "Widget", "_render_content", "    of which: widgets' content rendered anew"),
    ("textual.app", "App", "_display", "  of which: the terminal write"),
    ("memtop.ui.app", "MemtopApp", "redraw", "the app's redraw (views, tables filled)"),
    ("memtop.ui.app", "MemtopApp", "_draw_header", "  of which: the header"),
    ("memtop.ui.panes.processes", "ProcessesPane", "refresh_from", "  of which: the Processes pane"),
    ("memtop.stream.runner", "Runner", "_on_batch", "the state's apply"),
    ("memtop.stream.bridge", "Bridge", "poll_sync", "the probes' polls (poll thread)"),
)


def _timed(
    spent: Counter[str], calls: Counter[str], label: str, fn: Callable[..., Any]
) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] += time.thread_time_ns() - t0
            calls[label] += 1

    return timed


def time_probe_polls(spent: Counter[str], calls: Counter[str]) -> None:
    """Wrap each probe class's own poll (where it is defined) with the timer, as "  poll: NAME"."""
    import memtop.probes as probes
    from memtop.probes.base import Probe

    poll = "poll"
    for info in pkgutil.iter_modules(probes.__path__):
        mod = importlib.import_module(f"memtop.probes.{info.name}")
        for v in list(vars(mod).values()):
            if (
                isinstance(v, type)
                and issubclass(v, Probe)
                and v.__module__ == mod.__name__
                and poll in vars(v)
            ):
                setattr(v, poll, _timed(spent, calls, f"  poll: {v.__name__}", vars(v)[poll]))


GC_LABEL = "the collector (gc), every thread"


def time_collections(spent: Counter[str], calls: Counter[str]) -> None:
    """Time each automatic or explicit collection (gc.callbacks) by the collecting thread's CPU
    clock: a collection runs inside whatever code allocated, so it is counted in that part too."""
    started: dict[int, int] = {}

    def on_gc(phase: str, info: dict[str, int]) -> None:
        me = threading.get_ident()
        if phase == "start":
            started[me] = time.thread_time_ns()
        elif me in started:
            spent[GC_LABEL] += time.thread_time_ns() - started.pop(me)
            calls[GC_LABEL] += 1

    gc.callbacks.append(on_gc)


def main_loop_seen() -> Callable[[], asyncio.AbstractEventLoop | None]:
    """Wrap the app's redraw (it runs on the main thread's event loop) to remember that loop:
    a profiler is started and stopped there (cProfile profiles only the thread that enables it)."""
    from memtop.ui.app import MemtopApp

    seen: list[asyncio.AbstractEventLoop] = []
    redraw = MemtopApp.redraw

    def remembered(self: Any) -> None:
        if not seen:
            seen.append(asyncio.get_running_loop())
        redraw(self)

    MemtopApp.redraw = remembered  # type: ignore[method-assign]
    return lambda: seen[0] if seen else None


def inside(out: Path, warmup_s: float, seconds: float, argv: list[str], cprofile: Path | None = None) -> int:
    """In memtop's process: wrap, run memtop, write the figures to ``out`` once counted (and,
    with ``cprofile``, the main thread's cProfile statistics over the same window there)."""
    spent: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    missing: list[str] = []
    for module, cls_name, method, label in PARTS:
        cls = getattr(importlib.import_module(module), cls_name, None)
        fn = getattr(cls, method, None) if cls is not None else None
        if cls is None or fn is None:
            missing.append(f"{module}.{cls_name}.{method}")
            continue
        setattr(cls, method, _timed(spent, calls, label, fn))
    time_probe_polls(spent, calls)
    time_collections(spent, calls)
    main_loop = main_loop_seen() if cprofile is not None else None
    profiler = cProfile.Profile() if cprofile is not None else None

    def threads_cpu_s() -> dict[str, float]:
        # each live thread's own CPU clock (the main thread: Textual, the redraw, the state; the
        # poll thread: the probes), by name
        out: dict[str, float] = {}
        for t in threading.enumerate():
            if t.ident is None:
                continue
            try:
                out[t.name] = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
            except (OSError, ProcessLookupError):
                continue
        return out

    def wakeups() -> dict[str, int]:
        # each live thread's context switches so far (a wake-up is a switch in and out: each
        # costs the thread CPU that no Python function shows), by name
        out: dict[str, int] = {}
        for t in threading.enumerate():
            try:
                text = Path(f"/proc/self/task/{t.native_id}/status").read_text()
            except (OSError, TypeError):
                continue
            out[t.name] = sum(
                int(line.split()[1])
                for line in text.splitlines()
                if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"))
            )
        return out

    def count() -> dict[str, Any]:
        time.sleep(warmup_s)
        w0 = wakeups()
        loop = main_loop() if main_loop is not None else None
        if loop is not None and profiler is not None:
            loop.call_soon_threadsafe(profiler.enable)
        t0, s0, c0, p0 = time.monotonic(), Counter(spent), Counter(calls), os.times()
        th0 = threads_cpu_s()
        time.sleep(seconds)
        dt, p1 = time.monotonic() - t0, os.times()
        th1 = threads_cpu_s()
        w1 = wakeups()
        if loop is not None and profiler is not None and cprofile is not None:
            done = threading.Event()

            def stop() -> None:
                profiler.disable()
                profiler.dump_stats(cprofile)
                done.set()

            loop.call_soon_threadsafe(stop)
            done.wait(30)
        doc = {
            "window_s": dt,
            "process_cpu_ms_per_s": 1000 * ((p1.user + p1.system) - (p0.user + p0.system)) / dt,
            "process_system_ms_per_s": 1000 * (p1.system - p0.system) / dt,
            "threads_cpu_ms_per_s": {k: 1000 * (v - th0[k]) / dt for k, v in th1.items() if k in th0},
            "threads_switches_per_s": {k: (v - w0[k]) / dt for k, v in w1.items() if k in w0},
            "parts": {
                k: {"cpu_ms_per_s": (spent[k] - s0[k]) / 1e6 / dt, "calls_per_s": (calls[k] - c0[k]) / dt}
                for k in spent
            },
            "missing": missing,
        }
        return doc

    return run_inside(out, argv, count)


def run_inside(out: Path, argv: list[str], count: Callable[[], dict[str, Any]]) -> int:
    """Run memtop with ``argv`` in this process while ``count`` (in a thread) counts; what it
    returns is written to ``out`` (atomically: the bench waits for the file)."""

    def counted() -> None:
        doc = count()
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.rename(out)

    threading.Thread(target=counted, daemon=True).start()
    from memtop.cli import entry

    sys.argv = ["memtop", *argv]
    return entry()


def run_in_pty(
    script: Path, what: str, warmup_s: float, seconds: float, argv: list[str], extra: list[str] | None = None
) -> dict[str, Any]:
    """memtop on a 160x45 pseudo-terminal, started as ``script --inside OUT …`` (a bench that
    wraps memtop's functions before it runs), and the JSON it writes to OUT once its window
    ends (``what``: how the wait names it)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import support.memtop_run as run
    from support import PtyMemtop
    from support.waits import wait_until

    out = Path(tempfile.mkdtemp(prefix=f"memtop-{script.stem.replace('_', '-')}-")) / "out.json"
    saved = run.memtop_cmd
    run.memtop_cmd = lambda: [
        sys.executable,
        str(script.resolve()),
        "--inside",
        str(out),
        "--warmup",
        str(warmup_s),
        "--seconds",
        str(seconds),
        *(extra or []),
        "--",
    ]
    try:
        m = PtyMemtop(argv, size=(45, 160))
    finally:
        run.memtop_cmd = saved
    try:
        wait_until(out.exists, what, warmup_s + seconds + 120)
        doc: dict[str, Any] = json.loads(out.read_text())
        return doc
    finally:
        m.kill()
        out.unlink(missing_ok=True)
        out.parent.rmdir()


def main(warmup_s: float, seconds: float, argv: list[str], cprofile: Path | None = None) -> dict[str, Any]:
    extra = ["--cprofile", str(cprofile.resolve())] if cprofile is not None else []
    return run_in_pty(Path(__file__), "memtop's parts", warmup_s, seconds, argv, extra)


def show(doc: dict[str, Any]) -> None:
    sys_ms = doc.get("process_system_ms_per_s")
    in_kernel = f" ({sys_ms:.1f} of it in the kernel)" if sys_ms is not None else ""
    print(
        f"memtop's CPU over {doc['window_s']:.0f} s: {doc['process_cpu_ms_per_s']:.1f} ms a second{in_kernel}"
    )
    threads: dict[str, float] = doc.get("threads_cpu_ms_per_s", {})
    switches: dict[str, float] = doc.get("threads_switches_per_s", {})
    for name, ms in sorted(threads.items(), key=lambda kv: -kv[1]):
        if ms >= 0.01:
            sw = f" ({switches[name]:.1f} context switches a second)" if name in switches else ""
            print(f"{ms:8.2f} ms/s  thread {name}{sw}")
    order = [label for *_, label in PARTS]
    parts: dict[str, dict[str, float]] = doc["parts"]
    polls = sorted((k for k in parts if k.startswith("  poll: ")), key=lambda k: -parts[k]["cpu_ms_per_s"])
    for label in [*order[:-1], order[-1], *polls, GC_LABEL]:
        if label in parts:
            p = parts[label]
            print(f"{p['cpu_ms_per_s']:8.2f} ms/s  {p['calls_per_s']:7.2f} calls/s  {label}")
    # the main thread's parts do not nest (the screen's timer, the tick's redraw, the apply when
    # a poll is handed over): what is left of its CPU is the event loop, messages, timers, gc
    main_parts = [label for _m, _c, _f, label in PARTS if not label.startswith(" ") and "poll" not in label]
    if "MainThread" in threads and all(label in parts for label in main_parts):
        rest = threads["MainThread"] - sum(parts[label]["cpu_ms_per_s"] for label in main_parts)
        print(f"{rest:8.2f} ms/s  the main thread outside every timed part")
    if doc["missing"]:
        print("not timed (not in this Textual or memtop):", ", ".join(doc["missing"]))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warmup", type=float, default=20.0, help="seconds before counting")
    ap.add_argument("--seconds", type=float, default=30.0, help="seconds counted")
    ap.add_argument(
        "--cprofile",
        type=Path,
        help="also write cProfile statistics of memtop's main thread over the window to this file",
    )
    ap.add_argument("--inside", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("memtop_args", nargs="*", help="memtop's own arguments (after --)")
    a = ap.parse_args()
    if a.inside is not None:
        raise SystemExit(inside(a.inside, a.warmup, a.seconds, a.memtop_args, a.cprofile))
    show(main(a.warmup, a.seconds, a.memtop_args, a.cprofile))
