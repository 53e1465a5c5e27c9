"""How State.apply hands a batch to its sub-states: the per-process records (the /proc reader's
samples, the lifecycle probe's exec and exit events: most of a batch) go only to the sub-states
that read them, and that changes nothing any sub-state ends up with."""

from __future__ import annotations

import inspect
import sys

import pytest
from support.paths import DATA

from memtop.records import Batch, Record
from memtop.records.host import MemInfo
from memtop.records.processes import ProcEvent, ProcSample
from memtop.state import PER_PROCESS, State
from memtop.state.base import SubState
from memtop.state.host import HostState
from memtop.state.processes import ProcessesState
from memtop.stream.recfile import Recording
from memtop.stream.replay import freeze


def sample(pid: int) -> ProcSample:
    return ProcSample(pid, f"p{pid}", "root", 0, 4096, 0, 0, 0, 10, 0)


def received(monkeypatch: pytest.MonkeyPatch, cls: type[SubState]) -> list[type[Record]]:
    """The record types ``cls.apply`` is handed from now on."""
    got: list[type[Record]] = []
    apply = cls.apply

    def recording(self: SubState, batch: Batch, state: State) -> None:
        got.extend(type(r) for r in batch.records)
        apply(self, batch, state)

    monkeypatch.setattr(cls, "apply", recording)
    return got


def test_process_records_reach_only_the_substates_that_read_them(monkeypatch: pytest.MonkeyPatch) -> None:
    host, procs = received(monkeypatch, HostState), received(monkeypatch, ProcessesState)
    state = State()
    meminfo = MemInfo(*(1 << 30,) * len(MemInfo.__dataclass_fields__))
    state.apply(Batch(1_000_000_000, (sample(10), sample(11), meminfo)))
    exits = tuple(ProcEvent(1_500_000_000 + i, "exit", 100 + i, "gone", 10**6) for i in range(5))
    state.apply(Batch(2_000_000_000, (sample(10), ProcEvent(1_200_000_000, "exec", 11, "p11"), *exits)))
    assert ProcEvent not in host and ProcSample not in host
    assert MemInfo in host
    assert procs.count(ProcEvent) == 6 and procs.count(ProcSample) == 3
    # the Processes pane's state took them: the processes born and gone between two polls
    assert state.get(ProcessesState).exited_between_total == 5


def test_every_substate_that_reads_process_records_gets_them() -> None:
    """A sub-state whose module names a per-process record must say it reads them, or it would
    never see one."""
    State()  # every sub-state module imported
    for cls in SubState.registry:
        source = inspect.getsource(sys.modules[cls.__module__])
        names = [t.__name__ for t in PER_PROCESS if t.__name__ in source]
        assert not names or cls.process_samples, (
            f"{cls.__module__}.{cls.__qualname__} names {names} but does not set process_samples = True"
        )


def test_handing_process_records_to_fewer_substates_changes_no_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pressure recording (its 6,000 exec and exit events and every process's samples) applied
    as shipped and with every sub-state handed the whole batch: the same state."""
    rec = Recording.load(DATA / "pressure.jsonl.gz")
    batches = list(rec.batches())
    assert sum(isinstance(r, ProcEvent) for b in batches for r in b.records) > 1000
    shipped = State(mode="replay")
    for b in batches:
        shipped.apply(b)
    for cls in SubState.registry:
        monkeypatch.setattr(cls, "process_samples", True)
    everything = State(mode="replay")
    for b in batches:
        everything.apply(b)
    for key, sub in shipped.subs.items():
        assert freeze(sub) == freeze(everything.subs[key]), key
