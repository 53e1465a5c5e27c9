"""Seeking in a long replay: a generated 1-hour, 300-process recording (one sample a second), the
time of seeks backwards and forwards with checkpoints (the default) against without (every seek
back rebuilds the state from the start, as before checkpoints), medians and their ratio.

    .venv/bin/python bench/replay_seek.py [--seconds 3600] [--procs 300] [--busy 60] [--seeks 5]

Nothing here is a test: the figures go in bench/RESULTS.md. The seeks are the TUI's: `←` (one
sample back), `[` (a minute back) and G to a random time, each on a replay positioned at a random
point, timed around ``ReplaySource.seek_ns`` with the app's own save/restore of the state.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memtop.records import Batch, ProbeStatus, Record  # noqa: E402
from memtop.records.host import MemInfo, Pressure, VmStat
from memtop.records.processes import ProcSample  # noqa: E402
from memtop.state import State  # noqa: E402
from memtop.stream.recording import open_recorder  # noqa: E402
from memtop.stream.replay import Recording, ReplaySource, freeze, thaw  # noqa: E402


def make_recording(path: Path, seconds: int = 3600, procs: int = 300, busy: int = 60, seed: int = 1) -> Path:
    """A recording like `memtop record --no-bpf` makes on a busy host: ``procs`` processes, of
    which ``busy`` have RSS and fault counters moving every second and the others every minute
    (the state keeps a history point per change: the busy ones make it large), a few exiting and
    starting every minute."""
    rnd = random.Random(seed)
    rec = open_recorder(path, [ProbeStatus("procfs", "attached")], interval_s=1.0, mode="procfs", force=True)
    alive = {1000 + i: 0 for i in range(procs)}
    next_pid = 1000 + procs
    t0 = 10**12
    for s in range(seconds):
        if s and s % 60 == 0:  # churn: 5 exit, 5 start
            for pid in rnd.sample(sorted(alive), 5):
                del alive[pid]
            for _ in range(5):
                alive[next_pid] = s
                next_pid += 1
        records: list[Record] = [
            MemInfo(
                16 << 30, (4 << 30) + rnd.randrange(1 << 28), 8 << 30, 1 << 28, 2 << 30, 4 << 30, 3 << 30
            ),
            Pressure(rnd.random(), rnd.random() / 2, 0.5, 0.2, s * 1000, s * 400),
            VmStat((("pgfault", s * 10_000), ("pgmajfault", s * 3), ("pswpin", s), ("pswpout", s * 2))),
        ]
        for n, (pid, born) in enumerate(alive.items()):
            age = s - born if n < busy else (s - born) // 60 * 60
            records.append(
                ProcSample(
                    pid=pid,
                    comm=f"worker-{pid % 97}",
                    user="app",
                    uid=1000,
                    rss_anon_bytes=(1 << 20) * (10 + pid % 50) + 4096 * (age % 100),
                    rss_file_bytes=(1 << 20) * (pid % 7),
                    rss_shmem_bytes=0,
                    swap_bytes=4096 * (pid % 3),
                    minor_faults=age * (pid % 13),
                    major_faults=age // 60,
                    ppid=1,
                    vsize_bytes=1 << 30,
                    threads=1 + pid % 4,
                    start_time_ns=born * 10**9,
                    cmdline=f"/usr/bin/worker --id {pid} --pool default",
                )
            )
        rec.write(Batch(ts_ns=t0 + s * 10**9, records=tuple(records)))
    rec.close()
    return path


class Holder:
    """The app's side of a replay: one State, reset or restored in place (as MemtopApp does)."""

    def __init__(self, src: ReplaySource, checkpoints: bool) -> None:
        self.state = State(mode="replay")
        src.subscribe(self.state.apply)
        src.on_reset(self.reset)
        if checkpoints:
            src.on_checkpoint(self.save, self.restore)

    def reset(self) -> None:
        self.state.__dict__.update(State(mode="replay").__dict__)

    def save(self) -> bytes:
        return freeze(self.state)

    def restore(self, saved: bytes) -> None:
        self.state.__dict__.update(thaw(saved).__dict__)


def timed_seeks(
    rec: Recording, checkpoints: bool, seeks: int, seed: int = 2
) -> tuple[dict[str, list[float]], ReplaySource]:
    rnd = random.Random(seed)
    src = ReplaySource(rec, playing=False)
    Holder(src, checkpoints)
    # first pass to the end (the replay played through once), which leaves the checkpoints behind
    t = time.perf_counter()
    src.seek_ns(rec.last_ts_ns)
    out: dict[str, list[float]] = {"play through (first pass)": [time.perf_counter() - t]}
    n = len(rec.index)
    for kind in ("step back (←)", "minute back ([)", "go to a random time (G)"):
        times: list[float] = []
        for _ in range(seeks):
            here = rnd.randrange(n // 2, n)
            src.seek_ns(rec.index[here])
            if kind.startswith("step"):
                target = rec.index[here - 1]
            elif kind.startswith("minute"):
                target = rec.index[here] - 60 * 10**9
            else:
                target = rec.index[rnd.randrange(n)]
            t = time.perf_counter()
            src.seek_ns(target)
            times.append(time.perf_counter() - t)
        out[kind] = times
    return out, src


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--procs", type=int, default=300)
    ap.add_argument("--busy", type=int, default=60, help="processes changing every second")
    ap.add_argument("--seeks", type=int, default=5)
    ap.add_argument("--recording", type=Path, help="reuse (or make) the recording here")
    ap.add_argument(
        "--json",
        type=Path,
        default=Path(__file__).resolve().parent / "results" / "replay_seek.json",
        help="where the figures go (bench/report.py makes RESULTS.md from them)",
    )
    args = ap.parse_args()
    path = (
        args.recording
        or Path(tempfile.gettempdir()) / f"memtop-seek-{args.seconds}s-{args.procs}p-{args.busy}b.jsonl.gz"
    )
    if not path.exists():
        t = time.perf_counter()
        make_recording(path, args.seconds, args.procs, args.busy)
        print(f"made {path} ({path.stat().st_size >> 20} MiB) in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    rec = Recording.load(path)
    print(f"loaded {len(rec.index)} samples in {time.perf_counter() - t:.2f} s")
    results = {}
    for cp in (False, True):
        results[cp], src = timed_seeks(rec, cp, args.seeks)
        if cp:
            for k in list(src.checkpoints):
                if k in src.checkpoints:
                    src._packed(k)
            print(
                f"checkpoints: {len(src.checkpoints)}, every {src.checkpoint_every} samples, "
                f"{src.checkpoint_bytes / 2**20:.1f} MiB in all"
            )
    print(
        f"\n{'seek':28s} {'without (median s)':>20s} {'with (median s)':>18s} {'ratio':>8s} {'with, max s':>12s}"
    )
    for kind in results[True]:
        a = statistics.median(results[False][kind])
        b = statistics.median(results[True][kind])
        print(
            f"{kind:28s} {a:20.3f} {b:18.3f} {a / b if b else float('inf'):8.1f} {max(results[True][kind]):12.3f}"
        )
    print(f"\n(cpu: {os.cpu_count()} cores; {args.seeks} seeks of each kind, each from a random point)")
    doc = {
        "case": "replay seeks",
        "machine": f"{os.uname().release}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}",
        "recording": {
            "seconds": args.seconds,
            "procs": args.procs,
            "busy": args.busy,
            "samples": len(rec.index),
        },
        "seeks": args.seeks,
        "runs": {("with checkpoints" if cp else "without"): times for cp, times in results.items()},
    }
    args.json.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
