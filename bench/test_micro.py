"""Micro-cases (pytest-benchmark): the per-tick paths memtop's CPU figures rest on, each beside the
path it is meant to beat, timed in one run.

    .venv/bin/python -m pytest bench/test_micro.py --benchmark-json bench/results/micro.json

(`make bench` runs them; bench/report.py puts each group's medians and their ratio in
bench/RESULTS.md; `make test` does not collect them.) Each pair shares a group.

- state, 1,000 processes: a tick whose samples are unchanged (most processes, most ticks: the
  state's shortcut) against one where every sample changed (the full path).
- replay decoding, 1,000 process samples: ``memtop.records.from_json``, which checks every
  field of every record (a replay decodes every record again on each seek backwards), against
  the constructor called on the same values unchecked: the cost of the checks.
- the record boundary, 1,000 process samples built: with every string field cleaned by
  ``Record.__post_init__`` (the shipped path: a printable-ASCII test per field) against the same
  constructor with the boundary switched off: what cleaning every record costs a probe.
- procfs, 1,000 status files: the six fields a process sample needs, found by the shipped
  newline-anchored regex against the ``^``/MULTILINE pattern it replaced (the first poll reads a
  status file for every process).
"""

from __future__ import annotations

import itertools
import os
import re
from typing import Any

import pytest

from memtop.probes.procfs import STATUS_FIELDS
from memtop.records import KIND_KEY, Batch, Record, from_json, to_json
from memtop.records.processes import ProcSample
from memtop.state import State
from memtop.state.processes import ProcessesState

N = 1000


def samples(faults: int) -> tuple[ProcSample, ...]:
    return tuple(
        ProcSample(
            pid=1000 + i,
            comm=f"sleep{i}",
            user="root",
            uid=0,
            rss_anon_bytes=4096 * (i + 1),
            rss_file_bytes=8192,
            rss_shmem_bytes=0,
            swap_bytes=0,
            minor_faults=faults + i,
            major_faults=0,
            ppid=1,
            vsize_bytes=1 << 20,
            threads=1,
            start_time_ns=i,
            cmdline=f"sleep {i}",
        )
        for i in range(N)
    )


@pytest.mark.benchmark(group="state: a tick of 1,000 processes")
@pytest.mark.parametrize("changing", [False, True], ids=["unchanged (shortcut)", "every sample changed"])
def test_state_tick(benchmark: Any, changing: bool) -> None:
    """One tick's batch applied to a state that already knows the 1,000 processes; the batches
    (1 s apart) are built outside the timing."""
    state = State(mode="procfs")
    first = samples(0)
    state.apply(Batch(ts_ns=0, records=first))
    clock = itertools.count(1)

    def setup() -> tuple[tuple[Batch], dict[str, Any]]:
        n = next(clock)
        return (Batch(ts_ns=n * 1_000_000_000, records=samples(n) if changing else first),), {}

    benchmark.pedantic(state.apply, setup=setup, rounds=60, iterations=1)
    rows = state.get(ProcessesState).rows
    assert len(rows) == N
    assert rows[1000].sample.minor_faults == (next(clock) - 1 if changing else 0)


@pytest.mark.benchmark(group="replay: decode 1,000 process samples")
@pytest.mark.parametrize("checked", [True, False], ids=["from_json (checked)", "constructor (unchecked)"])
def test_decode(benchmark: Any, checked: bool) -> None:
    docs = [to_json(s) for s in samples(7)]
    if checked:
        out = benchmark(lambda: [from_json(d) for d in docs])
    else:
        fields = [{k: v for k, v in d.items() if k != KIND_KEY} for d in docs]
        out = benchmark(lambda: [ProcSample(**f) for f in fields])
    assert out == list(samples(7))


@pytest.mark.benchmark(group="the record boundary: 1,000 process samples built")
@pytest.mark.parametrize("cleaned", [True, False], ids=["strings cleaned (shipped)", "boundary off"])
def test_record_boundary(benchmark: Any, cleaned: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not cleaned:
        monkeypatch.setattr(Record, "__post_init__", lambda self: None)
    out = benchmark(samples, 7)
    assert len(out) == N and out[0].comm == "sleep0"


#: the pattern STATUS_FIELDS replaced: tried at every position of the file, not only after newlines
STATUS_FIELDS_MULTILINE = re.compile(
    rb"^(Uid|Threads|RssAnon|RssFile|RssShmem|VmSwap):[ \t]*(\d+)", re.MULTILINE
)


@pytest.mark.benchmark(group="procfs: the fields of 1,000 status files")
@pytest.mark.parametrize(
    "pattern",
    [STATUS_FIELDS, STATUS_FIELDS_MULTILINE],
    ids=["newline-anchored (shipped)", "^ with MULTILINE"],
)
def test_status_fields(benchmark: Any, pattern: re.Pattern[bytes]) -> None:
    with open(f"/proc/{os.getpid()}/status", "rb") as f:
        status = f.read()
    files = [status] * N
    out = benchmark(lambda: [dict(pattern.findall(s)) for s in files])
    assert out[0] == dict(STATUS_FIELDS_MULTILINE.findall(status))
    assert set(out[0]) == {b"Uid", b"Threads", b"RssAnon", b"RssFile", b"RssShmem", b"VmSwap"}
