"""What moves memtop's RssAnon, and when (issue 36, "Performance", RssAnon at the window's end):
the TUI on a 160x45 pseudo-terminal (as bench/memtop_self.py runs it), in one of its conditions,
its RssAnon sampled every 0.25 s and written down whenever it moved by ``--min-kib``, with every
probe poll and state apply that moved it by as much named (probe, records), and the collector's
passes and the heap trims with what they gave back. No tracemalloc: the figures are the
process's own. A poll's or an apply's move is the whole process's over its run, so it includes
what the other threads did meanwhile (the first frame's drawing makes the polls of the first
second look large; a poll off the main thread later is mostly its own). The timeline goes to
OUTDIR/timeline.txt and to stdout.

    sudo .venv/bin/python bench/rss_timeline.py OUTDIR [--after S] [--condition C] [--root DIR]

Run it in a PID namespace of its own (``unshare --pid --fork --mount-proc``) for the 1,000
sleepers alone; BPF, cgroupfs and the page cache stay machine-wide, so other work on the machine
(files made, cgroups) still shows, by the poll that met it. A measuring tool, not a benchmark
case: nothing is saved to bench/results."""

from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from harness import ROOT, load_condition  # noqa: E402

PYTHON = ROOT / ".venv" / "bin" / "python"


def rss_anon_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    return 0


def inside(out: Path, after_s: float, min_kib: int) -> int:
    import memtop.cli  # first: asyncio comes in as memtop's entry brings it (no ssl)

    t0 = time.monotonic()
    log: list[str] = []

    def note(msg: str) -> None:
        log.append(f"{time.monotonic() - t0:7.2f} s {rss_anon_kib():7d} kB  {msg}")

    before: dict[str, int] = {}

    def collected(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            before["kib"] = rss_anon_kib()
        elif info["generation"] >= 1 or info["collected"] > 100:
            note(
                f"gc gen{info['generation']}: {info['collected']} collected (RssAnon {before['kib']} kB before)"
            )

    gc.callbacks.append(collected)

    import memtop.runtime.heap as heap
    import memtop.state as state_pkg
    import memtop.stream.bridge as bridge

    trim = heap.release_heap

    def traced_trim() -> None:
        was = rss_anon_kib()
        trim()
        note(f"malloc_trim: {was} -> {rss_anon_kib()} kB ({threading.current_thread().name})")

    bridge.release_heap = traced_trim  # type: ignore[attr-defined]  # the name the bridge calls
    poll_probes = bridge.Bridge._poll_probes

    def each_poll(self: Any, probes: list[Any], now: float, force: bool) -> Any:
        for p in probes:
            if "_rss_timeline" in p.__dict__:
                continue
            inner = p.poll

            def poll(inner: Any = inner, name: str = p.name) -> Any:
                was = rss_anon_kib()
                got = inner()
                moved = rss_anon_kib() - was
                if abs(moved) >= min_kib:
                    note(f"poll {name}: {moved:+d} kB, {len(got)} records")
                return got

            p.poll = poll
            p.__dict__["_rss_timeline"] = True
        return poll_probes(self, probes, now, force)

    bridge.Bridge._poll_probes = each_poll  # type: ignore[method-assign]
    apply = state_pkg.State.apply

    def each_apply(self: Any, batch: Any) -> None:
        was = rss_anon_kib()
        apply(self, batch)
        moved = rss_anon_kib() - was
        if abs(moved) >= min_kib:
            note(f"apply: {moved:+d} kB, {len(batch.records)} records")

    state_pkg.State.apply = each_apply  # type: ignore[method-assign]

    def sampler() -> None:
        last = 0
        while time.monotonic() - t0 < after_s:
            kib = rss_anon_kib()
            if abs(kib - last) >= min_kib:
                note("")
                last = kib
            time.sleep(0.25)
        note("end")
        (out / "timeline.txt").write_text("\n".join(log) + "\n")
        os.kill(os.getpid(), 15)

    threading.Thread(target=sampler, daemon=True).start()
    return memtop.cli.main([])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--after", type=float, default=92.0, help="seconds of the run")
    ap.add_argument("--condition", default="1000 sleepers")
    ap.add_argument("--min-kib", type=int, default=128, help="the smallest move written down")
    ap.add_argument("--root", default=str(ROOT), help="the checkout whose memtop runs (an A/B)")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    out = Path(a.outdir)
    out.mkdir(parents=True, exist_ok=True)
    if a.inside:
        return inside(out, a.after, a.min_kib)
    from memtop_self import OnTerminal

    cmd = [str(PYTHON), __file__, str(out), "--inside", "--after", str(a.after), "--min-kib", str(a.min_kib)]
    env: dict[str, Any] = dict(os.environ, PYTHONPATH=a.root)
    with load_condition(a.condition, settle_s=1):
        prog = OnTerminal(cmd, env)
        deadline = time.monotonic() + a.after + 60
        while prog.alive() and time.monotonic() < deadline:
            time.sleep(0.5)
        prog.stop()
    print((out / "timeline.txt").read_text() if (out / "timeline.txt").exists() else "no timeline")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
