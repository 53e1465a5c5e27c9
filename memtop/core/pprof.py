"""pprof profiles: a writer of pprof's ``profile.proto`` (github.com/google/pprof, proto/profile.proto),
gzipped, as ``go tool pprof``, Pyroscope and Parca read it.

The protobuf wire format is written here by hand (varints and length-delimited fields): the
profile is a handful of messages, and a protobuf dependency for them would be the largest part of
memtop. Only what pprof reads is written: sample types, samples with labels, mappings, locations,
functions, the string table, time, the period and comments.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field

# -- the wire format ------------------------------------------------------------------------------

_VARINT, _LEN = 0, 2


def varint(n: int) -> bytes:
    """``n`` as a protobuf varint; a negative int64 as its two's complement (ten bytes), as
    protobuf writes int64."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(fieldno: int, wire: int) -> bytes:
    return varint(fieldno << 3 | wire)


def int_field(fieldno: int, n: int) -> bytes:
    """A varint field; zero is the default and is left out, as protobuf does."""
    return key(fieldno, _VARINT) + varint(n) if n else b""


def bytes_field(fieldno: int, data: bytes) -> bytes:
    return key(fieldno, _LEN) + varint(len(data)) + data


def packed(fieldno: int, values: list[int]) -> bytes:
    """A repeated integer field, packed (what proto3 writes and pprof reads)."""
    if not values:
        return b""
    return bytes_field(fieldno, b"".join(varint(v) for v in values))


# -- the profile ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of a stack: a function name, where its source is (file, line; "" and 0 when not
    known) and the object file it is in (a Mapping's path; "" when not known)."""

    function: str
    file: str = ""
    line: int = 0
    module: str = ""


@dataclass(frozen=True, slots=True)
class Mapping:
    """An object file mapped into the profiled process."""

    path: str
    build_id: str = ""
    start: int = 0
    limit: int = 0
    offset: int = 0


@dataclass(slots=True)
class Profile:
    """What a profile holds before it is encoded. ``sample_types`` are (type, unit) pairs, each
    sample's values in that order; ``frames`` run innermost first (pprof's order);
    ``labels`` are (key, str value) and ``num_labels`` (key, int value, unit)."""

    sample_types: tuple[tuple[str, str], ...]
    period_type: tuple[str, str] = ("", "")
    period: int = 0
    time_ns: int = 0
    duration_ns: int = 0
    comments: list[str] = field(default_factory=list)
    default_sample_type: str = ""
    mappings: list[Mapping] = field(default_factory=list)
    samples: list[
        tuple[
            tuple[Frame, ...], tuple[int, ...], tuple[tuple[str, str], ...], tuple[tuple[str, int, str], ...]
        ]
    ] = field(default_factory=list)

    def add(
        self,
        frames: tuple[Frame, ...],
        values: tuple[int, ...],
        labels: tuple[tuple[str, str], ...] = (),
        num_labels: tuple[tuple[str, int, str], ...] = (),
    ) -> None:
        if len(values) != len(self.sample_types):
            raise ValueError(f"{len(values)} values for {len(self.sample_types)} sample types")
        self.samples.append((frames, values, labels, num_labels))


class _Strings:
    """The string table: index 0 is "", every other string once."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {"": 0}

    def __call__(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.index)
        return i

    def encode(self) -> bytes:
        # text from the traced system may hold surrogate escapes: its bytes as \xNN, never an
        # encoding error
        return b"".join(bytes_field(6, s.encode("utf-8", "backslashreplace")) for s in self.index)


def _value_type(fieldno: int, st: _Strings, vt: tuple[str, str]) -> bytes:
    return bytes_field(fieldno, int_field(1, st(vt[0])) + int_field(2, st(vt[1])))


def encode(profile: Profile) -> bytes:
    """The profile as protobuf bytes (not compressed)."""
    st = _Strings()
    out = bytearray()
    for vt in profile.sample_types:
        out += _value_type(1, st, vt)
    mapping_ids: dict[str, int] = {}
    for m in profile.mappings:
        if m.path in mapping_ids:
            continue
        mid = mapping_ids[m.path] = len(mapping_ids) + 1
        out += bytes_field(
            3,
            int_field(1, mid)
            + int_field(2, m.start)
            + int_field(3, m.limit)
            + int_field(4, m.offset)
            + int_field(5, st(m.path))
            + int_field(6, st(m.build_id))
            + int_field(7, 1),  # has_functions: the frames come symbolized
        )
    functions: dict[tuple[str, str], int] = {}
    locations: dict[Frame, int] = {}
    fn_bytes = bytearray()
    loc_bytes = bytearray()
    sample_bytes = bytearray()
    for frames, values, labels, num_labels in profile.samples:
        ids = []
        for fr in frames:
            lid = locations.get(fr)
            if lid is None:
                fkey = (fr.function, fr.file)
                fid = functions.get(fkey)
                if fid is None:
                    fid = functions[fkey] = len(functions) + 1
                    name = st(fr.function)
                    fn_bytes += bytes_field(
                        5,
                        int_field(1, fid)
                        + int_field(2, name)
                        + int_field(3, name)
                        + int_field(4, st(fr.file)),
                    )
                lid = locations[fr] = len(locations) + 1
                line = bytes_field(4, int_field(1, fid) + int_field(2, fr.line))
                loc_bytes += bytes_field(
                    4, int_field(1, lid) + int_field(2, mapping_ids.get(fr.module, 0)) + line
                )
            ids.append(lid)
        body = packed(1, ids) + packed(2, list(values))
        for k, v in labels:
            body += bytes_field(3, int_field(1, st(k)) + int_field(2, st(v)))
        for k, n, unit in num_labels:
            body += bytes_field(3, int_field(1, st(k)) + int_field(3, n) + int_field(4, st(unit)))
        sample_bytes += bytes_field(2, body)
    out += sample_bytes + loc_bytes + fn_bytes
    tail = int_field(9, profile.time_ns) + int_field(10, profile.duration_ns)
    if profile.period_type != ("", ""):
        tail += _value_type(11, st, profile.period_type)
    tail += int_field(12, profile.period)
    for c in profile.comments:
        tail += int_field(13, st(c))
    if profile.default_sample_type:
        tail += int_field(14, st(profile.default_sample_type))
    # the string table last: every index above is in it by now
    return bytes(out) + tail + st.encode()


def gzipped(profile: Profile) -> bytes:
    """The profile as pprof files hold it: gzipped protobuf (mtime 0: the same profile, the same
    bytes)."""
    return gzip.compress(encode(profile), mtime=0)
