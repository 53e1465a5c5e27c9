"""The Runner and the source's intents (fake /proc, no BPF): the state applies each batch before the
runner's subscribers see it; a focus attaches what describes one process, follows it in the procfs
probe and reaches the state, a recording and a replay as a Focus record; a replay keeps the focus
across seeks; JSON and text snapshots run without Textual."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakeproc import make_fake_proc
from support import DATA, FakeSource

import memtop.stream.runner as runner_mod
from memtop.probes.procfs import ProcfsProbe
from memtop.records import Batch, ProbeStatus
from memtop.records.process import Focus
from memtop.state.process import ProcessState
from memtop.stream.bridge import Bridge
from memtop.stream.replay import Recording, ReplaySource
from memtop.stream.runner import Runner

PRESSURE = DATA / "pressure.jsonl.gz"
HOG_PID = 3620  # the workload of that recording with drill-in data


def test_state_applies_a_batch_before_subscribers_see_it() -> None:
    batches = [Batch(10, (ProbeStatus("x", "attached"),)), Batch(20, (ProbeStatus("x", "failed", "gone"),))]
    runner = Runner(FakeSource(batches))
    seen: list[tuple[int, str]] = []
    runner.subscribe(lambda b: seen.append((runner.state.ts_ns, runner.state.statuses["x"].state)))

    async def go() -> None:
        await runner.start()
        await runner.tick()
        await runner.tick()
        assert await runner.tick() is None  # nothing more: the state is left as it was

    asyncio.run(go())
    assert seen == [(10, "attached"), (20, "failed")]


def test_ticks_follow_a_grid_until_stopped() -> None:
    runner = Runner(FakeSource([Batch(i, ()) for i in range(1, 10)]), interval_s=0.01)
    stop = asyncio.Event()

    async def go() -> list[int]:
        got = []
        async for n in runner.ticks(stop):
            got.append(n)
            if n == 3:
                stop.set()
        return got

    assert asyncio.run(go()) == [0, 1, 2, 3]
    assert runner.state.ts_ns == 4  # one poll per tick


def test_live_focus_attaches_follows_and_is_recorded(tmp_path: Path, no_bpf: None) -> None:
    root = make_fake_proc(tmp_path / "proc")
    entry = (
        "Size:                132 kB\nRss:                  64 kB\nPss:                  64 kB\n"
        "Shared_Dirty:          0 kB\nPrivate_Dirty:        64 kB\nAnonymous:            64 kB\n"
        "Swap:                  0 kB\n"
    )
    (root / "202" / "smaps").write_text("55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0  [heap]\n" + entry)
    (root / "202" / "smaps_rollup").write_text(
        "55d0c0a00000-7ffd00000000 ---p 00000000 00:00 0  [rollup]\n" + entry
    )
    procfs = ProcfsProbe(root)
    bridge = Bridge([procfs])  # the /proc view only: intents may not attach BPF
    runner = Runner(bridge)
    stream: list[Batch] = []
    runner.subscribe(stream.append)

    async def go() -> None:
        await runner.start()
        bridge.focus(202)
        await runner.settle(timeout_s=10)
        await runner.tick()
        assert 202 in procfs.followed
        assert [p.name for p in bridge.probes] == ["procfs", "smaps"]
        assert runner.state.get(ProcessState).focused == [202]
        sts = runner.state.statuses
        assert sts["smaps"].state == "attached"
        for name in ("faultstack", "growth"):  # said why, never shown as zeros
            assert sts[name].state == "failed" and "--no-bpf" in sts[name].message
        target = runner.state.get(ProcessState).target(202)
        assert target is not None and target.mapping_totals is not None
        bridge.unfocus(202)
        await runner.tick()
        assert 202 not in procfs.followed
        assert [p.name for p in bridge.probes] == ["procfs"]
        assert runner.state.get(ProcessState).focused == []
        assert runner.state.statuses["smaps"].state == "detached"
        await runner.stop()

    asyncio.run(go())
    focus = [r for b in stream for r in b.records if isinstance(r, Focus)]
    assert focus == [Focus(202, True), Focus(202, False)]  # what a recorder subscribed here writes
    ts = [b.ts_ns for b in stream]
    assert ts == sorted(ts), "batches out of time order"


def test_replay_answers_a_focus_and_keeps_it_across_seeks() -> None:
    rec = Recording.load(PRESSURE)
    src = ReplaySource(rec, at_s=rec.duration_s)
    runner = Runner(src, checkpoints=True)
    asyncio.run(runner.start())
    assert runner.state.get(ProcessState).focused == []
    src.focus(HOG_PID)
    assert runner.state.get(ProcessState).focused == [HOG_PID]
    assert src.trace_allocations([HOG_PID]) is False  # nothing attaches to the past
    src.goto(1.0)  # backwards: the state starts again from the start or a checkpoint
    assert runner.state.get(ProcessState).focused == [HOG_PID]
    src.goto(rec.duration_s)
    src.step(-1)
    assert runner.state.get(ProcessState).focused == [HOG_PID]
    src.unfocus(HOG_PID)
    assert runner.state.get(ProcessState).focused == []


def test_json_and_text_snapshots_do_not_import_textual(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from memtop.cli import main\n"
        f"for fmt in ('json', 'txt'):\n"
        f"    rc = main(['snapshot', '--replay', {str(PRESSURE)!r}, '--pane', 'process', '--pid',"
        f" '{HOG_PID}', '--format', fmt, '--output', {str(tmp_path)!r} + '/p.' + fmt])\n"
        "    assert rc == 0, rc\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=dict(os.environ)
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["pid"] == HOG_PID and doc["section"] == "history"
    assert str(HOG_PID) in (tmp_path / "p.txt").read_text()


def test_probes_detached_on_purpose_are_not_counted_missing() -> None:
    """After leaving a drill-in the header said `probes 6/9` (issue 22, item 4): detached on-demand
    probes are not ones that should run."""
    from memtop.state import State
    from memtop.views.header import header_line, probe_count

    state = State()
    sts = [ProbeStatus(n, "attached") for n in ("procfs", "vmscan")]
    sts += [ProbeStatus("smaps", "detached"), ProbeStatus("oom", "failed", "no tracepoint")]
    state.apply(Batch(1, tuple(sts)))
    n = probe_count(state)
    assert (n.attached, n.total, n.failed) == (2, 3, ("oom",))
    text = "".join(seg.text for seg in header_line(state).rest)
    assert "probes 2/3" in text and "1 failed" in text


def test_a_changed_interval_starts_a_new_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """`+`/`-` (Runner.change_interval) reach the headless tick loop too: the wait after a change
    is the new interval from the tick just made, and the grid goes on from there."""
    clock = [100.0]
    waits: list[float] = []

    async def fake_wait(_stop: asyncio.Event | None, seconds: float) -> None:
        waits.append(round(seconds, 9))
        clock[0] += seconds

    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(runner_mod, "wait_or_stop", fake_wait)
    runner = Runner(FakeSource([Batch(i, ()) for i in range(1, 10)]), interval_s=1.0)
    stop = asyncio.Event()

    async def go() -> None:
        async for n in runner.ticks(stop):
            clock[0] += 0.25  # each tick takes a quarter second
            if n == 1:
                runner.change_interval(+1.0)
            if n == 3:
                stop.set()

    asyncio.run(go())
    # 1 s grid: 0.75 left after each tick; from tick 1 on a 2 s grid anchored at tick 1's start
    assert waits == [0.75, 1.75, 1.75, 1.75]
