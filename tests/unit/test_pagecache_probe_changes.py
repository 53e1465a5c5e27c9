"""The pagecache probe keeps its last reading of the per-file map as one buffer of entries, not
a dict of each entry's bytes: the files it sends as changed are the ones the dict gave, whatever
the order of the dump, files new, gone, or counted again."""

from __future__ import annotations

import os
import struct
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtop.linux import bcc_compat
from memtop.probes.pagecache import COUNTS, FILE_KEY, PagecacheProbe, _entries
from memtop.records.pagecache import PagecacheActivity

Counts = dict[tuple[int, int], tuple[int, int]]


def reference(readings: list[Counts]) -> list[tuple[tuple[int, int, int, int], ...]]:
    """What the probe sent before: a dict of key bytes to value bytes, compared entry by entry."""
    last: dict[tuple[int, int], tuple[int, int]] = {}
    out = []
    for now in readings:
        out.append(
            tuple(
                sorted(
                    (os.makedev(kdev >> 20, kdev & 0xFFFFF), ino, a, d)
                    for (kdev, ino), (a, d) in now.items()
                    if last.get((kdev, ino)) != (a, d)
                )
            )
        )
        last = now
    return out


@settings(max_examples=200, deadline=None)
@given(
    readings=st.lists(
        st.dictionaries(
            st.tuples(st.sampled_from([259 << 20 | 3, 8 << 20 | 1]), st.integers(1, 12)),
            st.tuples(st.integers(0, 3), st.integers(0, (1 << 64) - 1)),
            max_size=10,
        ),
        max_size=6,
    ),
    shuffle=st.randoms(),
)
def test_changed_files_are_the_ones_a_dict_of_entries_gave(readings: list[Counts], shuffle: object) -> None:
    current: list[Counts] = [{}]

    def dump(_bpf: object, table: str) -> tuple[bytes, bytes, int, int, int]:
        if table == "pc_pids":
            return b"", b"", 0, 4, 32
        items = list(current[0].items())
        shuffle.shuffle(items)  # type: ignore[attr-defined]
        keys = b"".join(struct.pack(FILE_KEY.fmt, ino, kdev, 0) for (kdev, ino), _ in items)
        values = b"".join(struct.pack(COUNTS.fmt, *ad) for _, ad in items)
        return keys, values, len(items), struct.calcsize(FILE_KEY.fmt), struct.calcsize(COUNTS.fmt)

    probe = PagecacheProbe()
    probe.bpf = types.SimpleNamespace()
    probe.array_slots = lambda table, n: [15, 3]  # type: ignore[method-assign]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bcc_compat, "map_dump", dump)
        got = []
        for now in readings:
            current[0] = now
            (rec,) = probe.poll()
            assert isinstance(rec, PagecacheActivity) and rec.files_tracked == len(now)
            got.append(rec.files)
    probe.bpf = None
    assert got == reference(readings)


def test_entries_interleave_keys_and_values_of_any_size() -> None:
    keys, values = b"k1k1k1k1K2K2K2K2", b"v1v1v1v1v1v1v1v1V2V2V2V2V2V2V2V2"
    assert _entries(keys, values, 2, 8, 16) == b"k1k1k1k1v1v1v1v1v1v1v1v1K2K2K2K2V2V2V2V2V2V2V2V2"
    assert _entries(b"abcXYZ", b"0123", 2, 3, 2) == b"abc01XYZ23"
    assert _entries(b"", b"", 0, 16, 16) == b""
