"""A protobuf reader for tests: the top-level fields of a message, to check what memtop's own
writer (memtop/core/pprof.py) put in a profile without trusting that writer."""

from __future__ import annotations


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, pos


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) of each top-level field: an int for varints, bytes for
    length-delimited fields (the only wire types pprof's profile.proto uses)."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        wire = key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((key >> 3, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            out.append((key >> 3, data[pos : pos + length]))
            pos += length
        else:
            raise ValueError(f"wire type {wire} at {pos}")
    return out


def profile_strings(data: bytes) -> list[str]:
    """A profile.proto's string table (field 6), decoded."""
    return [v.decode("utf-8") for f, v in fields(data) if f == 6 and isinstance(v, bytes)]
