"""The state's dispatch of records to sub-states (``SubState.takes``): each sub-state gets only
the records of the types it reads, and its state is what it would have been given every record.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pickle
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from memtop.records import Batch, Record
from memtop.records.processes import ProcEvent, ProcSample
from memtop.state import State
from memtop.state.base import SubState
from memtop.state.processes import ProcessesState
from memtop.stream.recfile import Recording

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDINGS = sorted(DATA.glob("*.jsonl.gz"))


def _substates() -> list[type[SubState]]:
    State()  # imports every sub-state's module
    return sorted(SubState.registry, key=lambda c: c.key)


def _isinstance_types(cls: type[SubState]) -> set[type[Record]]:
    """The record types named in an ``isinstance`` check anywhere in the class's own code."""
    module = importlib.import_module(cls.__module__)
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    found: set[type[Record]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            for name in ast.walk(node.args[1]):
                if isinstance(name, ast.Name):
                    obj = getattr(module, name.id, None)
                    if isinstance(obj, type) and issubclass(obj, Record):
                        found.add(obj)
    return found


@pytest.mark.parametrize("cls", _substates(), ids=lambda c: c.key)
def test_each_substate_takes_the_record_types_it_reads(cls: type[SubState]) -> None:
    """``takes`` names exactly the record types the sub-state's code checks for: one it reads but
    does not take would never reach it, one it takes but never reads costs a pass for nothing."""
    assert cls.takes is not None, f"{cls.__name__}: no takes (every record goes through its apply)"
    assert set(cls.takes) == _isinstance_types(cls)


@functools.cache
def _batches(path: Path) -> tuple[Batch, ...]:
    return tuple(Recording.load(path).batches())


def _pickled(state: State) -> dict[str, bytes]:
    return {key: pickle.dumps(sub) for key, sub in state.subs.items()}


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_a_recording_applied_leaves_what_every_record_everywhere_left(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each recording, batch by batch: every sub-state's state (pickled) equals that of a state
    that handed every record to every sub-state, the way before ``takes``."""
    batches = _batches(path)
    assert batches
    with monkeypatch.context() as m:
        for cls in _substates():
            m.setattr(cls, "takes", None)
        everything = State(mode="replay")
        for b in batches:
            everything.apply(b)
    dispatched = State(mode="replay")
    for b in batches:
        dispatched.apply(b)
    assert _pickled(dispatched) == _pickled(everything)
    assert dispatched.statuses == everything.statuses
    assert dispatched.lost == everything.lost


@dataclass(frozen=True, slots=True)
class _LaterEvent(ProcEvent):
    """A record type derived from one a sub-state takes (as isinstance would see it)."""


def _sample(pid: int) -> ProcSample:
    return ProcSample(
        pid=pid,
        comm="x",
        user="root",
        uid=0,
        rss_anon_bytes=4096,
        rss_file_bytes=0,
        rss_shmem_bytes=0,
        swap_bytes=0,
        minor_faults=0,
        major_faults=0,
    )


def test_a_subclass_of_a_taken_type_reaches_its_substate() -> None:
    state = State()
    state.apply(Batch(1_000_000_000, (_sample(7),)))
    state.apply(Batch(2_000_000_000, (_LaterEvent(2_000_000_000, "exec", 7, "renamed"), _sample(8))))
    procs = state.get(ProcessesState)
    assert 7 in procs.gone and procs.gone[7].sample.comm == "renamed"
