"""Bytes a file the page cache pane's pagecache probe and state hold (tracemalloc, in process, no
BPF): files made at RATE a tick until N are counted, as a build or a package install makes them,
with a share of the files already counted changing each tick.

    .venv/bin/python bench/pagecache_memory.py [--files N] [--rate R] [--tree DIR]

``state``: the page cache state fed PagecacheActivity records of those files (what it holds
after, over N); ``probe``: the pagecache probe fed dumps of its kernel map (bcc_compat.map_dump
and the totals replaced: no BPF), its records dropped; ``both``: the probe's records applied to
the state. ``--tree DIR``: the memtop tree to import (another worktree, e.g. /work/main, for an
A/B in one run). A measuring tool, not a benchmark case: nothing is saved to bench/results."""

from __future__ import annotations

import argparse
import gc
import struct
import sys
import tracemalloc
from pathlib import Path
from typing import Any

S = 1_000_000_000


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--rate", type=int, default=500, help="new files a tick")
    p.add_argument("--churn", type=int, default=200, help="files already counted changing a tick")
    p.add_argument("--tree", default=str(Path(__file__).resolve().parent.parent))
    return p.parse_args()


def main() -> None:
    args = parse()
    sys.path.insert(0, args.tree)
    import memtop
    from memtop.linux import bcc_compat
    from memtop.probes import pagecache as probe_mod
    from memtop.records import Batch
    from memtop.records.pagecache import PagecacheActivity
    from memtop.state import State
    from memtop.state.pagecache import PagecacheState

    assert Path(memtop.__file__).resolve().is_relative_to(Path(args.tree).resolve()), memtop.__file__

    kdev = (259 << 20) | 2  # nvme0n1p2 as the kernel's dev_t
    base_ino = 48_000_000

    def ticks() -> list[dict[int, tuple[int, int]]]:
        """The kernel map's counts (ino -> added, deleted) at each tick."""
        counts: dict[int, tuple[int, int]] = {}
        out = []
        made = 0
        t = 0
        while made < args.files:
            t += 1
            for i in range(made, min(args.files, made + args.rate)):
                counts[base_ino + i] = (1 + i % 37, 0)
            for j in range(args.churn):
                ino = base_ino + (t * 7919 + j * 104729) % max(1, made)
                if ino in counts:
                    a, d = counts[ino]
                    counts[ino] = (a + 3, d + 1)
            made = min(args.files, made + args.rate)
            out.append(dict(counts))
        return out

    maps = ticks()

    def measure_state() -> float:
        import os

        state = State()
        state.get(PagecacheState)
        # an int of its own for each record's device and inode, as the probe's decoding makes
        gc.collect()
        # from before the records are made: what of them the state keeps counts, they go after
        before = tracemalloc.get_traced_memory()[0]
        batches = []
        last: dict[int, tuple[int, int]] = {}
        for t, m in enumerate(maps, 1):
            files = tuple(
                sorted(
                    (os.makedev(259, 2), (ino + 1) - 1, a, d)
                    for ino, (a, d) in m.items()
                    if last.get(ino) != (a, d)
                )
            )
            last = m
            added = sum(a for a, _ in m.values())
            deleted = sum(d for _, d in m.values())
            batches.append(Batch(t * S, (PagecacheActivity(added=added, deleted=deleted, files=files),)))
        for b in batches:
            state.apply(b)
        del batches, b, files
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        assert len(state.get(PagecacheState).file_counts) == args.files
        return float(held / args.files)

    def dump_of(m: dict[int, tuple[int, int]]) -> tuple[bytes, bytes, int, int, int]:
        keys = b"".join(struct.pack("<QII", ino, kdev, 0) for ino in m)
        values = b"".join(struct.pack("<QQ", a, d) for a, d in m.values())
        return keys, values, len(m), 16, 16

    def measure_probe(state: Any = None) -> float:
        dumps = [dump_of(m) for m in maps]
        current: list[Any] = [None]

        def fake_dump(bpf: Any, table: str) -> tuple[bytes, bytes, int, int, int]:
            if table == "pc_files":
                return current[0]  # type: ignore[no-any-return]
            return b"", b"", 0, 4, 32

        bcc_compat.map_dump = fake_dump  # no BPF: the dumps stood in for
        probe = probe_mod.PagecacheProbe()
        probe.bpf = object()
        probe.array_slots = lambda table, n: [1] * n  # type: ignore[method-assign]
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for t, d in enumerate(dumps, 1):
            current[0] = d
            recs = probe.poll()
            if state is not None:
                state.apply(Batch(t * S, tuple(recs)))
        current[0] = None
        del recs, d  # the dumps stay, as they were at the start
        gc.collect()
        return float((tracemalloc.get_traced_memory()[0] - before) / args.files)

    tracemalloc.start()
    st = measure_state()
    pr = measure_probe()
    state = State()
    state.get(PagecacheState)
    both = measure_probe(state)
    tracemalloc.stop()
    print(
        f"tree {args.tree}: {args.files} files, {len(maps)} ticks: state {st:.0f} B/file, "
        f"probe {pr:.0f} B/file, probe+state {both:.0f} B/file"
    )


if __name__ == "__main__":
    main()
