"""A ring buffer's records as the probes get them (memtop/linux/bpfout.py ``ring_callback``):
what a callback returns reaches libbpf as an int, as BCC passes it, and a callback that returns
nothing (every probe's) costs no exception per record; the lifecycle probe reads a record in
place as it read a copy."""

from __future__ import annotations

import ctypes
import sys
from types import FrameType
from typing import Any

from memtop.core.text import clean
from memtop.linux.bpfout import ring_callback
from memtop.probes.procmem import ProcmemProbe, _Event
from memtop.records.processes import ProcEvent


def test_what_a_callback_returns_reaches_libbpf_as_an_int() -> None:
    got: list[tuple[Any, Any, int]] = []

    def cb(c: Any, data: Any, size: int) -> Any:
        got.append((c, data, size))
        return {"none": None, "int": 3, "str": "x", "float": 2.7}[c]

    fn = ring_callback(cb)
    assert [fn(k, 7, 8) for k in ("none", "int", "str", "float")] == [0, 3, 0, 2]
    assert got[0] == ("none", 7, 8)


def test_a_callback_that_returns_nothing_raises_nothing_per_record() -> None:
    raised: list[str] = []

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "exception":
            raised.append(repr(arg[1]))
        return trace

    fn = ring_callback(lambda c, data, size: None)
    sys.settrace(trace)
    try:
        results = [fn(None, 0, 0) for _ in range(3)]
    finally:
        sys.settrace(None)
    assert results == [0, 0, 0] and raised == []


def test_the_lifecycle_probe_reads_a_record_in_place() -> None:
    probe = ProcmemProbe()
    events = [
        _Event(ts_ns=2**63 + 5, lifetime_ns=7, pid=4_000_000, kind=2, comm=b"bash"),
        _Event(ts_ns=1, lifetime_ns=0, pid=1, kind=1, comm=b"0123456789abcdef"),  # no NUL
        _Event(ts_ns=3, lifetime_ns=0, pid=9, kind=7, comm=b"\xff\x1b[2Jx"),  # hostile name
    ]
    for ev in events:
        probe._on_event(None, ctypes.addressof(ev), ctypes.sizeof(ev))
    assert probe._pending == [
        ProcEvent(ts_ns=2**63 + 5, event="exit", pid=4_000_000, comm="bash", lifetime_ns=7),
        ProcEvent(ts_ns=1, event="exec", pid=1, comm="0123456789abcdef", lifetime_ns=0),
        ProcEvent(ts_ns=3, event="unknown", pid=9, comm=clean(b"\xff\x1b[2Jx"), lifetime_ns=0),
    ]
