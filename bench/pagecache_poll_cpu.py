"""CPU of the pagecache probe's poll and the page cache state's apply with a full map (16,384
files, CHANGED of them moving a tick, NEW replaced), no BPF (map dumps stood in for): median of
REPEAT ticks. ``--tree``: the memtop tree to import (A/B against another worktree in one run,
alternating). A measuring tool: nothing saved."""

from __future__ import annotations

import argparse
import json
import random
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

S = 1_000_000_000


def one(tree: str, files: int, changed: int, new: int, ticks: int) -> dict[str, float]:
    sys.path.insert(0, tree)
    import memtop
    from memtop.linux import bcc_compat
    from memtop.probes.pagecache import PagecacheProbe
    from memtop.records import Batch
    from memtop.state import State
    from memtop.state.pagecache import PagecacheState

    assert Path(memtop.__file__).resolve().is_relative_to(Path(tree).resolve()), memtop.__file__
    rng = random.Random(1)
    kdev = (259 << 20) | 2
    counts = {48_000_000 + i: (rng.randrange(1, 500), 0) for i in range(files)}
    next_ino = 48_000_000 + files
    cur: list[Any] = [None]

    def dump(bpf: Any, table: str) -> tuple[bytes, bytes, int, int, int]:
        return cur[0] if table == "pc_files" else (b"", b"", 0, 4, 32)

    bcc_compat.map_dump = dump  # no BPF: the dumps stood in for
    probe = PagecacheProbe()
    probe.bpf = object()
    probe.array_slots = lambda table, n: [1] * n  # type: ignore[method-assign]
    state = State()
    state.get(PagecacheState)
    poll_s, apply_s = [], []
    for t in range(1, ticks + 1):
        for ino in rng.sample(list(counts), changed):
            a, d = counts[ino]
            counts[ino] = (a + 1, d)
        for ino in rng.sample(list(counts), new):
            del counts[ino]
            counts[next_ino] = (1, 0)
            next_ino += 1
        items = list(counts.items())
        rng.shuffle(items)  # a hash map's order
        cur[0] = (
            b"".join(struct.pack("<QII", ino, kdev, 0) for ino, _ in items),
            b"".join(struct.pack("<QQ", a, d) for _, (a, d) in items),
            len(items),
            16,
            16,
        )
        t0 = time.perf_counter()
        recs = probe.poll()
        t1 = time.perf_counter()
        state.apply(Batch(t * S, tuple(recs)))
        t2 = time.perf_counter()
        if t > 1:  # the first poll sends every file
            poll_s.append(t1 - t0)
            apply_s.append(t2 - t1)
    return {"poll_ms": statistics.median(poll_s) * 1e3, "apply_ms": statistics.median(apply_s) * 1e3}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=16384)
    p.add_argument("--changed", type=int, default=500)
    p.add_argument("--new", type=int, default=200)
    p.add_argument("--ticks", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--against", default="")
    p.add_argument("--tree", default=str(Path(__file__).resolve().parent.parent))
    p.add_argument("--one", action="store_true")
    a = p.parse_args()
    if a.one:
        print(json.dumps(one(a.tree, a.files, a.changed, a.new, a.ticks)))
        return
    trees = [a.tree] + ([a.against] if a.against else [])
    got: dict[str, list[dict[str, float]]] = {t: [] for t in trees}
    for r in range(a.rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    "--tree",
                    tree,
                    "--files",
                    str(a.files),
                    "--changed",
                    str(a.changed),
                    "--new",
                    str(a.new),
                    "--ticks",
                    str(a.ticks),
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            got[tree].append(json.loads(out))
    for tree, runs in got.items():
        poll = statistics.median(r["poll_ms"] for r in runs)
        apply = statistics.median(r["apply_ms"] for r in runs)
        print(f"{tree}: poll {poll:.2f} ms, apply {apply:.2f} ms (median of {len(runs)} runs' medians)")


if __name__ == "__main__":
    main()
