"""Record and replay under real pressure: a recording replays to the very documents the live
session showed, pane for pane, and carries the kernel's counters bracketed by /proc/vmstat."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import compile_c, differences, documents, kb, memcg, proc_status, swapfile, vmstat

from memtop.records.host import VmStat
from memtop.state import State
from memtop.stream.recording import open_recorder
from memtop.stream.replay import Recording, ReplaySource
from memtop.stream.runner import Runner

MiB = 1 << 20


def start_workload(cg: Any, name: str, *args: str) -> subprocess.Popen[str]:
    exe = compile_c(name)
    proc = subprocess.Popen(
        [str(exe), *args], stdout=subprocess.PIPE, text=True, preexec_fn=lambda: cg.add(os.getpid())
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("ready"), line
    return proc


def start_hog(cg: Any, mib: int) -> subprocess.Popen[str]:
    return start_workload(cg, "rec_hog", str(mib))


def on_demand_probes(hog_pid: int, leak_pid: int) -> list[Any]:
    """The drill-in probes on the workload and memleak on the leaker, where this build has them,
    so the drill-in and leaks documents hold data too (found by name: panes come and go)."""
    import importlib

    wanted = [
        ("memtop.probes.smaps", "SmapsProbe", hog_pid),
        ("memtop.probes.faultstack", "FaultStackProbe", hog_pid),
        ("memtop.probes.growth", "GrowthProbe", leak_pid),
        ("memtop.probes.leaks", "LeaksProbe", [leak_pid]),
    ]
    out = []
    for module, cls, arg in wanted:
        try:
            out.append(getattr(importlib.import_module(module), cls)(arg))
        except (ImportError, AttributeError):
            continue
    return out


@pytest.mark.bpf
def test_replay_equals_live_under_pressure(tmp_path: Path) -> None:
    from memtop.probes.registry import default_probes
    from memtop.stream.bridge import Bridge

    out = tmp_path / "live.jsonl.gz"
    with swapfile(), memcg(100 * MiB, swap=True) as cg:
        hog = start_hog(cg, 300)
        leak = start_workload(cg, "rec_leak", "65536")
        try:
            before = vmstat()
            live = State(mode="bpf")
            taken: dict[str, Any] = {}
            taken_ts: list[int] = []

            async def session() -> tuple[int, dict[str, str]]:
                bridge = Bridge(default_probes() + on_demand_probes(hog.pid, leak.pid))
                # the live state and the recorder see the very same batches, from the first one
                rec = open_recorder(out, bridge.statuses().values(), interval_s=0.5, mode=bridge.mode)
                bridge.subscribe(live.apply)
                bridge.subscribe(rec)
                await bridge.start()
                try:
                    assert await bridge.wait_settled(120)
                    for i in range(11):  # 5 s at 0.5 s
                        await bridge.poll()
                        if i == 7:  # T: the live documents, as a snapshot would write them
                            taken_ts.append(live.ts_ns)
                            taken.update(documents(live, hog.pid, leak.pid))
                        await asyncio.sleep(0.5)
                    end_status = proc_status(hog.pid)
                finally:
                    rec.close("test")
                    await bridge.stop()
                return rec.batches, end_status

            batches, end_status = asyncio.run(session())
            after = vmstat()
        finally:
            for p in (hog, leak):
                p.kill()
                p.wait()

    recording = Recording.load(out)
    assert len(recording.index) == batches == 12  # the bridge's first batch at start, then 11 polls
    assert recording.skipped.total == 0, recording.skipped.describe()
    attached = {
        p for p, s in recording.state_at(recording.last_ts_ns).statuses.items() if s.state == "attached"
    }
    assert {"procfs", "procmem"} <= attached

    # replay up to T: every pane's document equals the live one, row for row, number for number
    replayed = recording.state_at(taken_ts[0])
    assert replayed.ts_ns == taken_ts[0]
    replayed_docs = documents(replayed, hog.pid, leak.pid)
    assert replayed_docs == taken, differences(replayed_docs, taken)[:10]
    assert taken["processes"]["rows"], "no process rows at all"
    print({name: len(json.dumps(doc)) for name, doc in taken.items()})  # how much each pane compared

    # the same through the replay source the TUI uses (seeking back rebuilds from the start)
    src = ReplaySource(recording, at_s=0)
    runner = Runner(src, checkpoints=False)
    asyncio.run(runner.start())
    src.seek_ns(recording.last_ts_ns)
    src.seek_ns(taken_ts[0])  # backwards
    src_docs = documents(runner.state, hog.pid, leak.pid)
    assert src_docs == taken, differences(src_docs, taken)[:10]

    # the recording carries the kernel's counters: vmstat bracketed by /proc/vmstat, and the
    # pressure is visible (swap-outs during the 5 s)
    vm = [r for b in recording.batches() for r in b.records if isinstance(r, VmStat)]
    assert vm, "no vmstat records"
    first, last = vm[0].as_dict(), vm[-1].as_dict()
    for key in ("pswpout", "pgfault"):
        assert before[key] <= first[key] <= last[key] <= after[key], key
    assert last["pswpout"] > first["pswpout"], "the workload did not swap while recording"
    # the workload's memory from the replayed state agrees with /proc/PID/status at the end:
    # anon + swap is its 300 MiB however the kernel split it at that moment
    final = recording.state_at(recording.last_ts_ns)
    procs = documents(final)["processes"]["rows"]
    row = next(r for r in procs if r["pid"] == hog.pid)
    kernel_total = kb(end_status, "RssAnon") + kb(end_status, "VmSwap")
    assert abs((row["anon_bytes"] + row["swap_bytes"]) - kernel_total) < 0.05 * kernel_total
    assert row["swap_bytes"] > 0
    assert row["anon_bytes"] <= 100 * MiB
