"""The header line is built again only when something it shows changed (issue 36: an idle tick's
header was built from scratch to be found equal to the one on screen): through a whole
recording, the line handed back is always the one a fresh build gives, and the very object of
the last call when the kernel's counters moved by less than the header prints."""

from __future__ import annotations

import dataclasses

from support.ui import pressure

from memtop.records import Batch
from memtop.state.host import HostState
from memtop.views import header
from memtop.views.header import _header_line, header_line


def test_every_header_of_a_recording_is_what_a_fresh_build_gives() -> None:
    rec = pressure()
    state = rec.state_at(rec.first_ts_ns)
    built = 0
    last = None
    for batch in rec.batches():
        state.apply(batch)
        head = header_line(state)
        assert head == _header_line(state, paused=False, interval_s=1.0)
        built += head is not last
        # a tick that brought nothing the header shows: the same line, not built again
        state.apply(Batch(batch.ts_ns + 1, ()))
        assert header_line(state) is head
        last = head
        for paused in (False, True):
            for interval_s in (1.0, 2.0):
                again = header_line(state, paused=paused, interval_s=interval_s)
                assert again == _header_line(state, paused=paused, interval_s=interval_s)
    assert built > 1


def test_counters_that_move_less_than_printed_keep_the_line() -> None:
    rec = pressure()
    state = rec.state_at(rec.last_ts_ns)
    host = state.get(HostState)
    m = host.meminfo
    assert m is not None
    header._last_header = None
    first = header_line(state)
    assert header_line(state) is first
    # a few pages freed: the same "used" to a tenth of a unit, the same line
    host.meminfo = dataclasses.replace(m, free_bytes=m.free_bytes + 3 * 4096)
    assert header_line(state) is first
    # a printed figure moved: a new line, as a fresh build gives it
    host.meminfo = dataclasses.replace(m, free_bytes=m.free_bytes + (m.total_bytes // 3))
    moved = header_line(state)
    assert moved is not first and moved == _header_line(state, paused=False, interval_s=1.0)
    assert moved != first
    # the same state paused: the PAUSED mark; every other interval
    assert header_line(state, paused=True) != moved
    assert header_line(state, interval_s=2.0) != moved
    # memory moved from buffers to free: the same "used", another "free"
    host.meminfo = dataclasses.replace(
        m, free_bytes=m.free_bytes - 2**30, buffers_bytes=m.buffers_bytes + 2**30
    )
    buffered = header_line(state)
    host.meminfo = m
    freed = header_line(state)
    assert freed != buffered and freed == _header_line(state, paused=False, interval_s=1.0)
    # a probe's state is part of what it shows
    assert header_line(state) is freed
    st = next(iter(state.statuses.values()))
    state.apply(Batch(rec.last_ts_ns + 1, (dataclasses.replace(st, state="failed", message="gone"),)))
    failed = header_line(state)
    assert failed == _header_line(state, paused=False, interval_s=1.0) and failed != freed
