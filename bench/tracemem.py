"""Heap profile of a memtop run (for finding what grows in a soak): runs memtop in this process
with tracemalloc on, and every INTERVAL seconds writes the Python heap's top allocation sites,
the growth since the first report after WARMUP seconds, and the process's RSS to OUTDIR.

usage: python bench/tracemem.py OUTDIR INTERVAL WARMUP -- memtop arguments...
"""

from __future__ import annotations

import sys
import threading
import time
import tracemalloc
from pathlib import Path


def rss() -> str:
    keep = ("VmRSS:", "RssAnon:", "RssFile:")
    lines = Path("/proc/self/status").read_text().splitlines()
    return " ".join(" ".join(x.split()[:2]) for x in lines if x.startswith(keep))


def reporter(out: Path, interval: float, warmup: float) -> None:
    t0 = time.monotonic()
    base: tracemalloc.Snapshot | None = None
    n = 0
    while True:
        time.sleep(interval)
        snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        now = time.monotonic() - t0
        if base is None and now >= warmup:
            base = snap
        traced, peak = tracemalloc.get_traced_memory()
        lines = [f"t={now:.0f}s {rss()} traced={traced >> 10} kB peak={peak >> 10} kB", "", "top sites:"]
        lines += [str(s) for s in snap.statistics("lineno")[:25]]
        if base is not None:
            lines += ["", "growth since warm-up:"]
            lines += [str(s) for s in snap.compare_to(base, "lineno")[:15]]
            for s in snap.compare_to(base, "traceback")[:5]:
                lines += ["", str(s)] + s.traceback.format()
        (out / f"{n:03d}.txt").write_text("\n".join(lines) + "\n")
        n += 1


def main() -> int:
    out, interval, warmup = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    rest = sys.argv[sys.argv.index("--") + 1 :]
    out.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(12)
    threading.Thread(target=reporter, args=(out, interval, warmup), daemon=True).start()
    from memtop.cli import main as memtop_main

    return memtop_main(rest)


if __name__ == "__main__":
    raise SystemExit(main())
