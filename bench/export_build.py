"""The exporter's own work per tick on a synthetic state, in process (issue 35): the state's
apply, and a build's families, text and gzip, beside another checkout's code in the same run.

    .venv/bin/python bench/export_build.py [--ticks N] [--openmetrics] [--against CHECKOUT [--label NAME]] [--save]

No BPF, no root, no memcg: a state of 1,000 processes (quiet ones handed back as the same
sample objects, as the /proc reader does), 500 cgroups (one of tests/data/cgroups.jsonl.gz's
samples under 500 paths, each with a limit) and 800 exec and exit events of short-lived
processes a tick (other users' churn). Two cases: idle (no cgroup sample sent after the first
tick, as the cgroups probe sends none for a cgroup that did not change) and busy (a tenth of the
cgroups sent anew every tick). The exporter is driven as it runs (``Exporter`` on a ``Runner``,
scraped with gzip after each tick, Prometheus's Accept header with ``--openmetrics``), timed by
process CPU time around the apply and the build's parts; each figure is the median over
``--ticks`` ticks after 5 of warm-up. With ``--against``, the same script runs that checkout's
code in a child (``PYTHONPATH``), the two alternated case by case. ``--save`` records the run in
bench/results/export_build.json (bench/report.py's table), one run per scrape format."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
S = 1_000_000_000


def _timed(spent: dict[str, list[float]], label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent.setdefault(label, []).append(time.process_time() - t0)

    return timed


def measure(case: str, ticks: int, openmetrics: bool) -> dict[str, Any]:
    """In this process, with whatever memtop is on the path: each part's median ms a tick."""
    import memtop.export.server as server
    from memtop.export.metrics import Options
    from memtop.records import Batch, ProbeStatus, Record
    from memtop.records.cgroups import CgroupPoll, CgroupSample
    from memtop.records.processes import ProcEvent, ProcSample
    from memtop.stream.recfile import Recording
    from memtop.stream.runner import Runner

    spent: dict[str, list[float]] = {}
    # (setattr: mypy allows no method assigned)
    setattr(server.Exporter, "_build", _timed(spent, "families", server.Exporter._build))  # noqa: B010
    server._encode = _timed(spent, "text", server._encode)

    proto = None
    for b in Recording.load(ROOT / "tests" / "data" / "cgroups.jsonl.gz").batches():
        for r in b.records:
            if isinstance(r, CgroupSample) and r.version and r.stat and r.usage_bytes:
                proto = r
    assert proto is not None and proto.usage_bytes is not None
    base = proto.usage_bytes
    cgroups = {
        f"/bench/c{i}": dataclasses.replace(
            proto, path=f"/bench/c{i}", usage_bytes=base + i * 4096, limit_bytes=1 << 30, psi_some_us=i
        )
        for i in range(500)
    }
    samples = [
        ProcSample(
            pid=pid,
            comm=f"sleep{pid % 37}",
            user="root",
            uid=0,
            rss_anon_bytes=4096 * pid,
            rss_file_bytes=0,
            rss_shmem_bytes=0,
            swap_bytes=0,
            minor_faults=10,
            major_faults=0,
            start_time_ns=5,
        )
        for pid in range(2, 1002)
    ]
    statuses = tuple(
        ProbeStatus(p, "attached", "")
        for p in ("procfs", "vmscan", "cgroups", "oom", "kills", "swapin", "kernel")
    )

    class Source:
        """Hands the runner one synthetic tick per poll."""

        mode = "bpf"
        replay = None

        def __init__(self) -> None:
            self.subs: list[Callable[[Batch], None]] = []
            self.n = 0

        def subscribe(self, fn: Callable[[Batch], None]) -> None:
            self.subs.append(fn)

        async def poll(self, at: float | None = None) -> Batch | None:
            self.n += 1
            ts = self.n * 15 * S
            sent: list[Record] = list(cgroups.values()) if self.n == 1 else []
            if case == "busy" and self.n > 1:
                for k in range(0, 500, 10):
                    path = f"/bench/c{(k + self.n) % 500}"
                    old = cgroups[path]
                    assert old.usage_bytes is not None
                    cgroups[path] = dataclasses.replace(old, usage_bytes=old.usage_bytes + 4096)
                    sent.append(cgroups[path])
            churn: list[Record] = []
            for k in range(400):
                pid = 100_000 + (self.n * 400 + k) % 200_000
                churn += [ProcEvent(ts, "exec", pid, "true"), ProcEvent(ts, "exit", pid, "true", 1000)]
            batch = Batch(ts, (*statuses, *churn, *samples, *sent, CgroupPoll(500)))
            for fn in self.subs:
                fn(batch)
            return batch

    source = Source()
    runner = Runner(cast(Any, source), checkpoints=False)
    setattr(runner, "_on_batch", _timed(spent, "apply", runner._on_batch))  # noqa: B010
    source.subs = [runner._on_batch]
    exporter = server.Exporter(runner, Options())
    accept = PROMETHEUS_ACCEPT if openmetrics else ""
    builds: list[float] = []
    size = 0
    for _ in range(ticks + 5):
        asyncio.run(runner.tick())
        t0 = time.process_time()
        body = exporter.exposition(accept, gzip=True)[0]
        builds.append(time.process_time() - t0)
        size = len(body)
    out: dict[str, Any] = {
        k: 1000 * statistics.median(v[5:]) for k, v in spent.items() if k in ("apply", "families")
    }
    # the text writer runs twice a scrape (the build's text, the scrape's own lines): the first
    out["text"] = 1000 * statistics.median(spent["text"][10::2])
    out["build"] = 1000 * statistics.median(builds[5:])
    out["gzip"] = max(0.0, out["build"] - out["families"] - out["text"])
    out["gzipped_bytes"] = size
    return out


def run_child(root: Path, case: str, ticks: int, openmetrics: bool) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--inside", case, "--ticks", str(ticks)]
    if openmetrics:
        cmd.append("--openmetrics")
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run(cmd, env=env, cwd=root, capture_output=True, check=True, text=True).stdout
    doc: dict[str, Any] = json.loads(out.splitlines()[-1])
    return doc


def main(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"ticks": args.ticks, "openmetrics": args.openmetrics, "label": args.label}
    for case in ("idle", "busy"):
        result[case] = {"this": run_child(ROOT, case, args.ticks, args.openmetrics)}
        if args.against:
            result[case]["against"] = run_child(
                Path(args.against).resolve(), case, args.ticks, args.openmetrics
            )
    return result


def show(result: dict[str, Any]) -> None:
    for case in ("idle", "busy"):
        for who, d in result[case].items():
            print(
                f"{case:5} {who:8} apply {d['apply']:6.2f} ms, families {d['families']:6.2f}, text "
                f"{d['text']:5.2f}, gzip {d['gzip']:5.2f}, build {d['build']:6.2f} ms; {d['gzipped_bytes']} bytes"
            )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ticks", type=int, default=40)
    ap.add_argument("--openmetrics", action="store_true")
    ap.add_argument("--against", help="another checkout's code beside this one")
    ap.add_argument("--label", default="", help="what --against is")
    ap.add_argument(
        "--save",
        action="store_true",
        help="record it in bench/results/export_build.json (one run per format)",
    )
    ap.add_argument("--inside", choices=["idle", "busy"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inside:
        print(json.dumps(measure(a.inside, a.ticks, a.openmetrics)))
    else:
        result = main(a)
        show(result)
        if a.save:
            sys.path.insert(0, str(ROOT / "bench"))
            from harness import machine, save

            path = ROOT / "bench" / "results" / "export_build.json"
            runs: dict[str, Any] = json.loads(path.read_text())["runs"] if path.exists() else {}
            runs["openmetrics" if a.openmetrics else "text"] = {"machine": machine(), **result}
            save("export_build", {"machine": machine(), "runs": runs})
