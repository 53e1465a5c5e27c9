"""The recording decoder on generated input (hypothesis, a few seconds): JSON-ish records of every
kind with values of every type and size, raw byte lines, gzip of them, cut anywhere. Whatever the
input, loading and replaying it into a state raises nothing but BadRecording (a MemtopError: one
line, exit 2), and a crafted dense line's memory stays a bounded multiple of the line limit."""

from __future__ import annotations

import dataclasses
import gzip
import json
import tracemalloc
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtop.core.errors import BadRecording
from memtop.records import KIND_KEY, RECORD_TYPES
from memtop.state import State
from memtop.stream.replay import Limits, Recording, ReplaySource

HEADER = {"magic": "memtop-recording", "schema": [1, 0], "interval_s": 1.0}
FIELDS = {kind: [f.name for f in dataclasses.fields(cls)] for kind, cls in RECORD_TYPES.items()}
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.sampled_from([0, 1, -1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 1 << 64, -(1 << 63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["\x1b]0;t\x07", "\x1b[2J", "\ud800", "a\x00b", "é€"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


def typed(hint: Any) -> st.SearchStrategy[Any]:
    """JSON values that fit a record field's type hint, edges included."""
    if hint is int:
        return st.integers(-(1 << 63), (1 << 64) - 1) | st.sampled_from([0, 1, -1, (1 << 64) - 1, -(1 << 63)])
    if hint is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if hint is bool:
        return st.booleans()
    if hint is str:
        return st.text(max_size=12) | st.sampled_from(["", "\x1b]0;t\x07", "\ud800", "[b]x[/b]"])
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(typed(args[0]), max_size=4)
    if typing.get_origin(hint) is tuple:
        return st.tuples(*(typed(a) for a in args)).map(list)
    options = [typed(a) for a in args if a is not type(None)]
    return st.one_of(*options, st.none()) if type(None) in args else st.one_of(*options)


HINTS = {kind: typing.get_type_hints(cls) for kind, cls in RECORD_TYPES.items()}


@st.composite
def records(draw: st.DrawFn) -> Any:
    """Mostly well-typed records of known kinds (values anywhere in their type's range), often with
    one field replaced by anything or left out; sometimes an unknown kind or anything at all."""
    pick = draw(st.integers(0, 9))
    if pick == 0:
        return draw(values)
    if pick == 1:
        return {KIND_KEY: draw(st.text(max_size=8)), "x": draw(values)}
    kind = draw(st.sampled_from(sorted(RECORD_TYPES)))
    rec: dict[str, Any] = {KIND_KEY: kind}
    for name in FIELDS[kind]:
        rec[name] = draw(typed(HINTS[kind][name]))
    if pick < 5 and FIELDS[kind]:
        name = draw(st.sampled_from(FIELDS[kind]))
        if draw(st.booleans()):
            rec[name] = draw(values)
        else:
            del rec[name]
    return rec


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    pick = draw(st.integers(0, 9))
    if pick == 0:
        return draw(st.binary(max_size=40))
    if pick == 1:
        return json.dumps({"end": draw(values)}).encode()
    # mostly a time after the previous line's (the test numbers them); sometimes a broken one
    ts = draw(st.just(None) | st.just(None) | st.sampled_from([-1, 1.5, "1", 0, 1 << 64, 10**15]))
    body = {"ts_ns": ts, "records": draw(st.lists(records(), max_size=6))}
    return json.dumps(body, allow_nan=True).encode()


def check(path: Path, salvage: bool, limits: Limits) -> None:
    try:
        rec = Recording.load(path, salvage=salvage, limits=limits)
    except BadRecording as exc:
        assert "\n" not in str(exc)
        return
    rec.describe()
    state = State(mode="replay")
    for batch in rec.batches():
        state.apply(batch)
    if rec.index:  # seeking around: checkpoints on, back and forth
        src = ReplaySource(rec, playing=False, checkpoint_every=2)
        src.subscribe(state.apply)
        src.seek_ns(rec.last_ts_ns)
        src.seek_ns(rec.first_ts_ns)
        src.position_text()


@SETTINGS
@given(
    body=st.lists(lines(), max_size=8),
    header=st.sampled_from([HEADER, {**HEADER, "hostname": "\x1b]0;x\x07", "probes": [1]}, {"magic": 1}]),
    compress=st.booleans(),
    cut=st.none() | st.integers(0, 4000),
    flip=st.none() | st.integers(0, 4000),
    salvage=st.booleans(),
    small=st.booleans(),
)
def test_decoder_raises_only_bad_recording(
    tmp_path_factory: pytest.TempPathFactory,
    body: list[bytes],
    header: dict[str, Any],
    compress: bool,
    cut: int | None,
    flip: int | None,
    salvage: bool,
    small: bool,
) -> None:
    stamped = [
        line.replace(b'"ts_ns": null', b'"ts_ns": %d' % (10**9 * (i + 1)), 1) for i, line in enumerate(body)
    ]
    data = b"\n".join([json.dumps(header).encode(), *stamped]) + b"\n"
    if compress:
        data = gzip.compress(data)
    if cut is not None:
        data = data[:cut]
    if flip is not None and data:
        i = flip % len(data)
        data = data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1 :]
    path = tmp_path_factory.mktemp("fuzz") / "r.jsonl.gz"
    path.write_bytes(data)
    limits = Limits(line_bytes=200, records=3, samples=4, size_bytes=600) if small else Limits()
    check(path, salvage, limits)


@SETTINGS
@given(raw=st.binary(max_size=300), compress=st.booleans())
def test_raw_bytes(tmp_path_factory: pytest.TempPathFactory, raw: bytes, compress: bool) -> None:
    path = tmp_path_factory.mktemp("raw") / "r.jsonl.gz"
    path.write_bytes(gzip.compress(raw) if compress else raw)
    check(path, False, Limits())
    check(path, True, Limits())


@pytest.mark.parametrize("unit", [b"[],", b"{},", b'"",', b"0,", b"1.5,", b'{"a":0},'])
def test_a_dense_line_costs_a_bounded_multiple_of_the_line_limit(tmp_path: Path, unit: bytes) -> None:
    """The densest JSON a line can hold: memory at most ~30× the line limit (here 1 MiB)."""
    limit = 1 << 20
    line = b'{"ts_ns": 1, "records": [' + unit * ((limit - 64) // len(unit)) + b"0]}"
    path = tmp_path / "dense.jsonl.gz"
    path.write_bytes(gzip.compress(json.dumps(HEADER).encode() + b"\n" + line + b"\n"))
    tracemalloc.start()
    try:
        try:
            Recording.load(path, limits=Limits(line_bytes=limit))
        except BadRecording:
            pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 30 * limit, peak / limit
