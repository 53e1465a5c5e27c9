"""The leaks probe's address table as user space reads it (bpf/leaks.bpf.c): its size for a
number of blocks, and which of its slots hold a block."""

from __future__ import annotations

import random
import struct

from memtop.probes.leaks import A_BUSY, A_EMPTY, A_FREED, alloc_slots, live_slots


def test_the_table_has_four_slots_a_block_in_a_power_of_two() -> None:
    assert [alloc_slots(n) for n in (1, 1000, 1024, 1025, 1 << 18)] == [4, 4096, 4096, 8192, 1 << 20]


def test_live_slots_are_those_whose_address_is_no_mark() -> None:
    words = [A_EMPTY, A_FREED, A_BUSY, 3, 0x100, 0x7F00_0000_1001, 0x7F00_0000_1000, 0x1_0000_0002, 1 << 63]
    buf = struct.pack(f"<{len(words)}Q", *words)
    assert live_slots(buf) == [3, 4, 5, 6, 7, 8]


def test_live_slots_match_a_slot_by_slot_reading_of_a_large_table() -> None:
    rng = random.Random(7)
    n = 1 << 16
    words = [rng.choice((A_EMPTY, A_FREED, A_FREED, A_BUSY)) for _ in range(n)]
    for i in rng.sample(range(n), 500):
        words[i] = rng.randrange(3, 1 << 64)
    buf = struct.pack(f"<{n}Q", *words)
    assert live_slots(buf) == [i for i, w in enumerate(words) if w > A_BUSY]


def test_live_slots_read_a_large_table_in_chunks_without_copying_it() -> None:
    """A million slots (the default table), some live in every chunk and at the chunks' edges:
    the same slots as a slot-by-slot reading, and the transient memory a chunk's, not the
    table's 8 MiB (a whole-table copy every window kept memtop's RssAnon that much higher)."""
    import mmap
    import tracemalloc

    from memtop.probes.leaks import LIVE_CHUNK_SLOTS

    n = 1 << 20
    rng = random.Random(11)
    live = sorted(
        set(rng.sample(range(n), 3000))
        | {
            k * LIVE_CHUNK_SLOTS + d
            for k in range(n // LIVE_CHUNK_SLOTS)
            for d in (-1, 0)
            if 0 <= k * LIVE_CHUNK_SLOTS + d
        }
    )
    table = mmap.mmap(-1, n * 8)
    for i in live:
        struct.pack_into("<Q", table, i * 8, rng.randrange(3, 1 << 64))
    for i in rng.sample(range(n), 2000):  # marks are not blocks
        if i not in live:
            struct.pack_into("<Q", table, i * 8, rng.choice((A_FREED, A_BUSY)))
    tracemalloc.start()
    try:
        found = live_slots(table)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found == live
    assert peak - len(live) * 40 < 2 * LIVE_CHUNK_SLOTS * 8 + (256 << 10), peak
    table.close()
