"""Churn: 10,000 short-lived processes during a session. No crash, every exit received or counted
as lost, dead pids' state evicted after the grace period, and every structure bounded."""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from support import compile_c

pytestmark = pytest.mark.bpf


def test_ten_thousand_short_lived_processes() -> None:
    from memtop.probes.procfs import ProcfsProbe
    from memtop.probes.procmem import ProcmemProbe
    from memtop.records import Batch
    from memtop.records.processes import ProcEvent
    from memtop.state import State
    from memtop.state.processes import EXITED_LEN, ProcessesState
    from memtop.stream.bridge import Bridge

    exe = compile_c("churn")

    async def run() -> None:
        procmem = ProcmemProbe(max_pids=1024, ringbuf_pages=16)  # small on purpose: bounds must hold
        bridge = Bridge([ProcfsProbe(), procmem])
        state = State()
        procs = state.get(ProcessesState)
        procs.grace_ns = 2_000_000_000
        exits = 0

        def count(batch: Batch) -> None:
            nonlocal exits
            exits += sum(
                1
                for r in batch.records
                if isinstance(r, ProcEvent) and r.event == "exit" and r.comm == "churn"
            )

        bridge.subscribe(state.apply)
        bridge.subscribe(count)
        await bridge.start()
        assert await bridge.wait_settled(60)
        assert bridge.statuses()["procmem"].state == "attached"
        try:
            work = await asyncio.create_subprocess_exec(str(exe), "10000", stdout=subprocess.PIPE)
            while work.returncode is None:
                await bridge.poll()
                try:
                    await asyncio.wait_for(work.wait(), 0.25)
                except TimeoutError:
                    pass
            assert work.stdout is not None
            assert (await work.stdout.read()).decode().strip() == "done 10000"
            for _ in range(12):  # past the grace period
                await asyncio.sleep(0.25)
                await bridge.poll()
            lost = state.lost_total("procmem")
            assert exits + lost >= 10000, (exits, lost)
            assert len(procs.exited) <= EXITED_LEN
            assert all(r.sample.comm != "churn" for r in procs.rows.values())
            assert not [p for p, r in procs.gone.items() if r.sample.comm == "churn"]
            assert len(procmem.bpf["start_ns"].items()) <= 1024
        finally:
            await bridge.stop()

    asyncio.run(run())
