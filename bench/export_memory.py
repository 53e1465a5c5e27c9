"""Where `memtop export`'s memory goes (issue 35, "Performance", RssAnon ≤ 40 MiB): the exporter
under bench/export_cost.py's load (1,000 extra processes, 500 memcgs) at ``--interval 15``,
scraped every 15 s with gzip as Prometheus scrapes (``--accept om``: its own Accept header,
OpenMetrics; ``--accept text``: none, the text format), with tracemalloc on in its process
unless ``--no-trace``. After SCRAPES scrapes it writes OUTDIR/report.txt: RssAnon, the Python
heap's top 25 sites by traceback, by line and by file, the modules loaded (count, by top-level
package), the anonymous memory by mapping, and RssAnon after ``malloc_trim(0)``; and RssAnon
sampled by this side every 30 s over the run (``--minutes``, the drift).

    sudo .venv/bin/python bench/export_memory.py OUTDIR [--accept om|text] [--scrapes N]
        [--minutes M] [--no-trace] [--arena-max N] [--root CHECKOUT]

``--arena-max N``: the exporter run with ``MALLOC_ARENA_MAX=N`` (glibc's arenas: the poll
threads allocate in arenas of their own). A measuring tool, not a benchmark case: nothing is
saved to bench/results."""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from harness import ROOT  # noqa: E402
from self_memory import PYTHON, status_kib  # noqa: E402


def modules() -> list[str]:
    """The modules loaded, by top-level package (how many each)."""
    tops = Counter(name.split(".")[0] for name in list(sys.modules))
    out = [f"modules loaded: {len(sys.modules)}"]
    return out + [f"  {n:4d} {top}" for top, n in tops.most_common(40)]


def report(out: Path, traced: bool) -> None:
    lines = [f"RssAnon {status_kib('RssAnon')} kB, RssFile {status_kib('RssFile')} kB", ""]
    if traced:
        snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        size, peak = tracemalloc.get_traced_memory()
        own = tracemalloc.get_tracemalloc_memory()
        lines += [f"traced {size >> 10} kB (peak {peak >> 10} kB), tracemalloc's own {own >> 10} kB", ""]
        lines += ["top 25 by file:"] + [str(s) for s in snap.statistics("filename")[:25]]
        lines += ["", "top 25 by line:"] + [str(s) for s in snap.statistics("lineno")[:25]]
        lines += ["", "top 25 by traceback:"]
        for s in snap.statistics("traceback")[:25]:
            lines += ["", str(s)] + s.traceback.format(limit=10)
    lines += ["", *modules()]
    # the bench's helpers only now: the exporter's figures above are without them
    from self_memory import smaps_anon

    lines += ["", "anonymous memory by mapping:", *smaps_anon()]
    before = status_kib("RssAnon")
    ctypes.CDLL(None).malloc_trim(0)
    lines += ["", f"malloc_trim(0): RssAnon {before} -> {status_kib('RssAnon')} kB"]
    (out / "report.txt").write_text("\n".join(lines) + "\n")


def inside(out: Path, traced: bool, rest: list[str]) -> int:
    if traced:
        tracemalloc.start(25)
    asked = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: asked.set())

    def reporter() -> None:
        asked.wait()
        report(out, traced)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=reporter, daemon=True).start()
    from memtop.cli import main as memtop_main

    return memtop_main(rest)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--accept", choices=("om", "text"), default="om")
    ap.add_argument("--scrapes", type=int, default=8)
    ap.add_argument("--minutes", type=float, default=0.0, help="scrape for this long instead")
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument("--arena-max", type=int, default=0)
    ap.add_argument("--root", default=str(ROOT), help="the checkout whose memtop runs (an A/B)")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    # after "--": the exporter's own arguments (the process inside)
    rest = argv[argv.index("--") + 1 :] if "--" in argv else []
    a = ap.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    out = Path(a.outdir)
    out.mkdir(parents=True, exist_ok=True)
    if a.inside:
        return inside(out, not a.no_trace, rest)
    # this side only (the exporter's process never imports them)
    from cgroups_cost import many_cgroups
    from export_cost import PROMETHEUS_ACCEPT, fetch, free_port, rss_anon_mib, wait_up
    from harness import stop

    port = free_port()
    cmd = [str(PYTHON), __file__, str(out), "--inside", *(["--no-trace"] if a.no_trace else [])]
    cmd += ["--", "export", "--listen", f"127.0.0.1:{port}", "--interval", "15"]
    env = dict(os.environ, PYTHONPATH=a.root)
    if a.arena_max:
        env["MALLOC_ARENA_MAX"] = str(a.arena_max)
    accept = PROMETHEUS_ACCEPT if a.accept == "om" else ""
    url = f"http://127.0.0.1:{port}/metrics"
    drift: list[tuple[int, float]] = []
    with many_cgroups(500):  # as bench/export_cost.py: 500 sleepers in memcgs, 500 outside
        sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(500)]
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=(out / "stderr.txt").open("wb")
        )
        try:
            wait_up(url, proc, b'probe="vmscan",reason="",state="attached"')
            time.sleep(20)
            t0 = time.monotonic()
            n = 0
            while n < a.scrapes if not a.minutes else time.monotonic() - t0 < a.minutes * 60:
                fetch(url, accept=accept)
                if n % 2 == 0:
                    drift.append((round(time.monotonic() - t0), rss_anon_mib(proc.pid)))
                n += 1
                time.sleep(15)
            proc.send_signal(signal.SIGUSR1)
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                stop(proc)
            for p in sleepers:
                p.kill()
                p.wait()
    text = (out / "report.txt").read_text() if (out / "report.txt").exists() else "no report\n"
    text += "\nRssAnon over the run (s, MiB): " + ", ".join(f"{t} {m:.1f}" for t, m in drift) + "\n"
    (out / "report.txt").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
