"""Where `memtop export`'s own CPU goes, per tick (issue 35): the exporter timed inside its own
process, beside another checkout's exporter in the same run, both scraped alike.

    sudo unshare --pid --fork --mount-proc .venv/bin/python bench/export_profile.py \\
        [--sleepers N] [--cgroups N] [--churn PER_S] [--interval S] [--scrape-every S] [--warmup S] \\
        [--seconds S] [--openmetrics] [--against CHECKOUT [--label NAME]] [--save]

``--cgroups N`` makes N memcgs with a sleeper in each (bench/export_cost.py's load is
``--sleepers 500 --cgroups 500``: 1,000 processes, 500 memcgs); ``--interval 0`` runs the exporters
without ``--interval`` (reading at the scrapes' pace). It starts ``--sleepers`` idle processes (in a PID namespace of their own, as above, the rest of
the machine does not see them), optionally ``--churn`` short-lived processes a second (an exec
and an exit each, what a build or a shell loop does to the process lifecycle probe), then this
checkout's exporter and, with ``--against``, that checkout's (run with this venv's Python),
each in a Python that first wraps a few functions with timers (``time.thread_time_ns`` per
call, so each thread's work is counted where it runs): the probes' polls, the state's apply and
each sub-state's, the build's families, its text, the whole build with gzip, the scrapes served
and the cyclic collector's passes. Both are scraped every ``--scrape-every`` seconds with gzip
(and Prometheus's own Accept header with ``--openmetrics``). ``--warmup`` seconds after every
probe is attached each counts for ``--seconds`` and writes each part's CPU ms a second and per
call, beside its whole process's CPU, and its RssAnon at the end; the bench prints both side
by side. The timers cost a
little themselves: compare parts with each other and the two exporters with each other, and the
whole with bench/export_cost.py's figures. A part
whose function is not in a checkout is left out and named. ``--save`` records the run in
bench/results/export_profile.json (bench/report.py's table), one run per scrape format."""

from __future__ import annotations

import argparse
import gc
import gzip
import importlib
import json
import os
import pkgutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from self_profile import (  # one timer for both profiles (thread CPU time, calls)
    _timed,
    run_inside,
    time_probe_polls,
)

ROOT = Path(__file__).resolve().parent.parent
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"

#: (module, class or "" for a module's function, function, label): what is timed
PARTS = (
    ("memtop.stream.bridge", "Bridge", "poll_sync", "the probes' polls"),
    ("memtop.stream.runner", "Runner", "_on_batch", "the state's apply"),
    ("memtop.export.server", "Exporter", "_fresh", "a build (families, text, gzip)"),
    ("memtop.export.server", "Exporter", "_build", "  of which: the families"),
    ("memtop.export.server", "", "_encode", "  of which: the text (and the scrapes' own lines)"),
    ("memtop.export.server", "Exporter", "exposition", "the scrapes served (with a build they waited for)"),
)
#: the Prometheus 2.42 Accept header (bench/export_cost.py's)
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def _wrap(spent: Counter[str], calls: Counter[str]) -> list[str]:
    """Wrap every part and each sub-state's apply; the parts not found, named."""
    missing: list[str] = []
    for module, cls_name, name, label in PARTS:
        mod = importlib.import_module(module)
        owner: Any = getattr(mod, cls_name, None) if cls_name else mod
        fn = getattr(owner, name, None) if owner is not None else None
        if fn is None:
            missing.append(f"{module}.{cls_name}.{name}".replace("..", "."))
            continue
        setattr(owner, name, _timed(spent, calls, label, fn))
    import memtop.state as states
    from memtop.state.base import SubState

    for info in pkgutil.iter_modules(states.__path__):
        mod = importlib.import_module(f"memtop.state.{info.name}")
        for v in list(vars(mod).values()):
            if (
                isinstance(v, type)
                and issubclass(v, SubState)
                and v.__module__ == mod.__name__
                and "apply" in vars(v)
            ):
                timed = _timed(spent, calls, f"  apply: {v.__name__}", vars(v)["apply"])
                setattr(v, "apply", timed)  # noqa: B010 (mypy: a method cannot be assigned)
    time_probe_polls(spent, calls)
    return missing


def _time_gc(spent: Counter[str], calls: Counter[str]) -> None:
    """The cyclic collector's passes (any thread's), by generation."""
    started: list[int] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[:] = [time.thread_time_ns()]
        elif started:
            label = f"the collector (generation {info.get('generation', '?')})"
            spent[label] += time.thread_time_ns() - started[0]
            calls[label] += 1

    gc.callbacks.append(on_gc)


def inside(out: Path, warmup_s: float, seconds: float, argv: list[str]) -> int:
    """In the exporter's process: wrap, run memtop, write the figures to ``out`` once counted."""
    spent: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    missing = _wrap(spent, calls)
    _time_gc(spent, calls)

    def count() -> dict[str, Any]:
        # the warm-up counts from the moment every probe is attached (BCC's compiles are not
        # the exporter's steady cost)
        ready = Path(os.environ.get("MEMTOP_READY_FILE", "/nonexistent"))
        while not ready.exists():
            time.sleep(0.5)
        time.sleep(warmup_s)
        t0, s0, c0, p0 = time.monotonic(), Counter(spent), Counter(calls), os.times()
        time.sleep(seconds)
        dt, p1 = time.monotonic() - t0, os.times()
        doc = {
            "window_s": dt,
            "process_cpu_ms_per_s": 1000 * ((p1.user + p1.system) - (p0.user + p0.system)) / dt,
            "parts": {
                k: {"cpu_ms": (spent[k] - s0[k]) / 1e6, "calls": calls[k] - c0[k]}
                for k in spent
                if calls[k] - c0[k]
            },
            "missing": missing,
        }
        return doc

    return run_inside(out, argv, count)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int, accept: str) -> tuple[float, int, int]:
    """(seconds, gzipped bytes, plain bytes) of one scrape with gzip."""
    headers = {"Accept-Encoding": "gzip"}
    if accept:
        headers["Accept"] = accept
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers)
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=30) as r:
        body = r.read()
    dt = time.perf_counter() - t0
    return dt, len(body), len(gzip.decompress(body))


class Exporter:
    def __init__(self, label: str, root: Path, args: argparse.Namespace, tmp: Path) -> None:
        self.label = label
        self.port = free_port()
        self.out = tmp / f"{label}.json"
        self.ready = tmp / f"{label}.ready"
        env = dict(os.environ, MEMTOP_READY_FILE=str(self.ready), PYTHONPATH=str(root))
        cmd = [
            str(VENV_PYTHON),
            str(Path(__file__).resolve()),
            "--inside",
            str(self.out),
            "--warmup",
            str(args.warmup),
            "--seconds",
            str(args.seconds),
            "--",
            "export",
            "--listen",
            f"127.0.0.1:{self.port}",
            # 0: none, the exporter's default (the kernel read at the scrapes' pace)
            *(("--interval", str(args.interval)) if args.interval else ()),
        ]
        self.log = open(tmp / f"{label}.log", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.scrapes: list[tuple[float, int, int]] = []

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def rss_anon_kib(pid: int) -> int:
    """The process's RssAnon now (0: not found)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _sleepers(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen(["sleep", "100000"]) for _ in range(n)]


def _churn(per_s: float, stop: threading.Event) -> None:
    """Short-lived processes (a fork, an exec and an exit each), ``per_s`` a second."""
    while not stop.wait(1.0 / per_s):
        subprocess.run(["true"], check=False)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from contextlib import ExitStack

    from cgroups_cost import many_cgroups  # bench/export_cost.py's memcgs, a sleeper in each

    tmp = Path(tempfile.mkdtemp(prefix=f"memtop-export-profile-{os.getpid()}-"))
    sleepers = _sleepers(args.sleepers)
    stop = threading.Event()
    churn = threading.Thread(target=_churn, args=(args.churn, stop), daemon=True) if args.churn else None
    exporters: list[Exporter] = []
    memcgs = ExitStack()
    try:
        if args.cgroups:
            memcgs.enter_context(many_cgroups(args.cgroups))
        if churn is not None:
            churn.start()
        exporters.append(Exporter("this", ROOT, args, tmp))
        if args.against:
            exporters.append(Exporter("against", Path(args.against).resolve(), args, tmp))
        accept = PROMETHEUS_ACCEPT if args.openmetrics else ""
        deadline = time.monotonic() + args.warmup + args.seconds + 300
        next_at = time.monotonic()
        while not all(e.out.exists() for e in exporters):
            if time.monotonic() > deadline:
                raise SystemExit("the exporters wrote no figures: see " + str(tmp))
            for e in exporters:
                if e.proc.poll() is not None:
                    raise SystemExit(f"{e.label}'s exporter ended: {(tmp / (e.label + '.log')).read_text()}")
            if time.monotonic() >= next_at:
                next_at += args.scrape_every
                for e in exporters:
                    if e.ready.exists():
                        try:
                            e.scrapes.append(scrape(e.port, accept))
                        except OSError:
                            pass
            time.sleep(0.2)
        docs: dict[str, Any] = {}
        for e in exporters:
            doc = json.loads(e.out.read_text())
            doc["rss_anon_kib"] = rss_anon_kib(e.proc.pid)
            last = e.scrapes[-1] if e.scrapes else (0.0, 0, 0)
            doc["gzipped_bytes"], doc["plain_bytes"] = last[1], last[2]
            doc["scrapes"] = len(e.scrapes)
            docs[e.label] = doc
        return docs
    finally:
        stop.set()
        for e in exporters:
            e.stop()
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()
        memcgs.close()
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()


def per_tick(doc: dict[str, Any], part: str) -> float | None:
    """A part's CPU ms per call (None: not timed)."""
    p = doc["parts"].get(part)
    return p["cpu_ms"] / p["calls"] if p else None


def record(args: argparse.Namespace, docs: dict[str, Any]) -> None:
    """The run, with its settings, as bench/results/export_profile.json's run for its format."""
    sys.path.insert(0, str(ROOT / "bench"))
    from harness import machine, save

    path = ROOT / "bench" / "results" / "export_profile.json"
    runs: dict[str, Any] = json.loads(path.read_text())["runs"] if path.exists() else {}
    runs["openmetrics" if args.openmetrics else "text"] = {
        "machine": machine(),
        "sleepers": args.sleepers,
        "cgroups": args.cgroups,
        "churn_per_s": args.churn,
        "interval_s": args.interval,
        "scrape_every_s": args.scrape_every,
        "seconds": args.seconds,
        "against": args.against or "",
        "label": args.label,
        "exporters": {
            label: {
                "process_cpu_ms_per_s": d["process_cpu_ms_per_s"],
                "polls_ms": per_tick(d, PARTS[0][3]),
                "apply_ms": per_tick(d, PARTS[1][3]),
                "build_ms": per_tick(d, PARTS[2][3]),
                "families_ms": per_tick(d, PARTS[3][3]),
                "gzipped_bytes": d["gzipped_bytes"],
                "plain_bytes": d["plain_bytes"],
                "rss_anon_kib": d.get("rss_anon_kib", 0),
            }
            for label, d in docs.items()
        },
    }
    save("export_profile", {"machine": machine(), "runs": runs})


def show(docs: dict[str, Any]) -> None:
    labels = list(docs)
    keys: list[str] = []
    for d in docs.values():
        keys += [k for k in d["parts"] if k not in keys]
    head = "".join(f"{lab:>24}" for lab in labels)
    print(f"{'ms of CPU a second (per call)':<52}{head}")
    print(
        f"{'the whole process':<52}" + "".join(f"{d['process_cpu_ms_per_s']:>24.2f}" for d in docs.values())
    )
    for k in keys:
        cells = ""
        for d in docs.values():
            p = d["parts"].get(k)
            cells += (
                f"{p['cpu_ms'] / d['window_s']:>12.2f} ({p['cpu_ms'] / p['calls']:>7.2f})"
                if p
                else f"{'-':>24}"
            )
        print(f"{k[:51]:<52}{cells}")
    print(
        f"{'gzipped bytes (plain)':<52}"
        + "".join(f"{d['gzipped_bytes']:>14} ({d['plain_bytes']:>7})" for d in docs.values())
    )
    print(
        f"{'RssAnon at the end (MiB)':<52}"
        + "".join(f"{d['rss_anon_kib'] / 1024:>24.1f}" for d in docs.values())
    )
    for lab, d in docs.items():
        if d["missing"]:
            print(f"{lab}: not timed (not in that checkout):", ", ".join(d["missing"]))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sleepers", type=int, default=1000, help="idle processes started (default 1000)")
    ap.add_argument(
        "--cgroups", type=int, default=0, help="memcgs made, a sleeper in each (bench/export_cost.py's 500)"
    )
    ap.add_argument("--churn", type=float, default=0.0, help="short-lived processes a second (default 0)")
    ap.add_argument(
        "--interval",
        type=float,
        default=15.0,
        help="the exporter's --interval (default 15; 0: none, the scrapes' pace)",
    )
    ap.add_argument("--scrape-every", type=float, default=15.0, help="seconds between scrapes (default 15)")
    ap.add_argument("--warmup", type=float, default=30.0, help="seconds before counting")
    ap.add_argument("--seconds", type=float, default=120.0, help="seconds counted")
    ap.add_argument("--openmetrics", action="store_true", help="scrape with Prometheus's Accept header")
    ap.add_argument("--against", help="another checkout's exporter beside this one")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument(
        "--save",
        action="store_true",
        help="record the run in bench/results/export_profile.json (one run per scrape format)",
    )
    ap.add_argument("--label", default="", help="what --against is, for the record (e.g. a commit)")
    ap.add_argument("--inside", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("memtop_args", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inside is not None:
        raise SystemExit(inside(a.inside, a.warmup, a.seconds, a.memtop_args))
    result = run(a)
    if a.json is not None:
        a.json.write_text(json.dumps(result, indent=1))
    show(result)
    if a.save:
        record(a, result)
