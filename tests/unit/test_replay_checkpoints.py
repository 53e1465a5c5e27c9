"""Replay seeks from checkpoints: the state after any seek (backwards, forwards, to the same place)
is exactly the state of a straight replay up to the target, every pane's document included, and
a seek applies at most ``checkpoint_every`` batches once the replay has been through; the
checkpoints stay within their memory budget."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from memtop.core.errors import MemtopError
from memtop.state import State
from memtop.stream.replay import Recording, ReplaySource, freeze, pack
from memtop.stream.runner import Runner
from memtop.views import Options, views

DATA = Path(__file__).resolve().parent.parent / "data"
PRESSURE = DATA / "pressure.jsonl.gz"  # every probe, 40 samples under memory pressure


def documents(state: State, pids: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, cls in views().items():
        for pid in (None, *pids):
            try:
                doc = cls().document(state, Options(pid=pid))
            except MemtopError:
                continue
            out[f"{name}@{pid}"] = json.loads(json.dumps(doc))
    return out


@pytest.fixture(scope="module")
def rec() -> Recording:
    return Recording.load(PRESSURE)


@pytest.fixture(scope="module")
def straight(rec: Recording) -> list[dict[str, Any]]:
    """Every pane's documents after each batch of a straight replay from the start."""
    pids = list(rec.header["workloads"].values())
    state = State(mode="replay")
    out = []
    for batch in rec.batches():
        state.apply(batch)
        out.append(documents(state, pids))
    return out


def test_seek_gives_the_state_of_a_straight_replay(rec: Recording, straight: list[dict[str, Any]]) -> None:
    every = 4
    src = ReplaySource(rec, playing=False, checkpoint_every=every)
    holder = Runner(src)
    pids = list(rec.header["workloads"].values())
    src.seek_ns(rec.last_ts_ns)  # played through once: the checkpoints exist
    assert sorted(src.checkpoints) == list(range(every, len(rec.index) + 1, every))
    rnd = random.Random(7)
    n = len(rec.index)
    targets = [rnd.randrange(n) for _ in range(25)] + [0, n - 1, n - 1, 5, 4, 3, 8, 7]
    for i in targets:
        src.seek_ns(rec.index[i])
        assert src.applied == i + 1
        assert src.last_seek_applied <= every, (i, src.last_seek_applied)
        assert documents(holder.state, pids) == straight[i], f"state after seeking to batch {i}"
    # a time between two batches gives the state of the earlier one
    src.seek_ns(rec.index[10] + 1)
    assert documents(holder.state, pids) == straight[10]


def test_without_checkpoints_a_seek_back_replays_from_the_start(
    rec: Recording, straight: list[dict[str, Any]]
) -> None:
    src = ReplaySource(rec, playing=False)
    holder = Runner(src, checkpoints=False)
    pids = list(rec.header["workloads"].values())
    src.seek_ns(rec.last_ts_ns)
    src.seek_ns(rec.index[30])
    assert src.last_seek_applied == 31 and not src.checkpoints
    assert documents(holder.state, pids) == straight[30]


def test_checkpoints_stay_within_their_budget(rec: Recording, straight: list[dict[str, Any]]) -> None:
    one = len(pack(freeze(rec.state_at(rec.last_ts_ns))))  # the biggest checkpoint, compressed
    src = ReplaySource(rec, playing=False, checkpoint_every=2, budget_bytes=3 * one)
    holder = Runner(src)
    src.seek_ns(rec.last_ts_ns)
    for k in list(src.checkpoints):
        if k in src.checkpoints:  # (waiting for one may thin out others)
            src._packed(k)  # wait for the background compression
    assert src.checkpoint_bytes <= 3 * one and 1 <= len(src.checkpoints) <= 3
    assert src.checkpoint_every > 2  # the spacing doubled to stay within the budget
    assert all(k % src.checkpoint_every == 0 for k in src.checkpoints)
    pids = list(rec.header["workloads"].values())
    for i in (3, 17, 38, 1):
        src.seek_ns(rec.index[i])
        assert src.last_seek_applied <= src.checkpoint_every
        assert documents(holder.state, pids) == straight[i]


def test_a_seek_forwards_skips_to_a_checkpoint(rec: Recording) -> None:
    src = ReplaySource(rec, playing=False, checkpoint_every=8)
    Runner(src)
    src.seek_ns(rec.last_ts_ns)
    src.seek_ns(rec.first_ts_ns)
    src.seek_ns(rec.index[35])  # from batch 1 to 36: restore the checkpoint at 32, apply 4
    assert src.applied == 36 and src.last_seek_applied == 4
