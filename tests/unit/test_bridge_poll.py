"""A poll of the live source whose awaiter is cancelled still hands its batch on.

The drill-in's first-data worker polls the source; `m` (trace this pid) leaves the drill-in, which
cancels that worker. Its poll had already taken the statuses pending in the bridge (the leaks
probe's "--no-bpf" refusal) in the worker thread: with the awaiter cancelled the batch was dropped
and the refusal never reached the state (issue 36: the flaky `KeyError: 'leaks'` of
tests/ui/test_process_screen.py). The probe here holds its poll open until the test has cancelled
the awaiter, so the race is forced, not hoped for."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from support.waits import wait_until_async

from memtop.probes.base import Probe
from memtop.records import Batch, ProbeStatus, Record
from memtop.stream.bridge import Bridge


class GatedProbe(Probe):
    """A /proc-like probe whose poll, once ``hold`` is set, waits for ``release``."""

    name = "gated"
    needs_bpf = False
    cadence_s = 0.0

    def __init__(self) -> None:
        self.hold = threading.Event()
        self.entered = threading.Event()
        self.release = threading.Event()

    def load(self) -> None:
        return None

    def poll(self) -> list[Record]:
        if self.hold.is_set():
            self.entered.set()
            self.release.wait(30)
        return []


async def test_a_cancelled_poll_still_hands_its_batch_on() -> None:
    probe = GatedProbe()
    bridge = Bridge([probe])  # /proc readers only: intents that need BPF are refused
    seen: list[Batch] = []
    bridge.subscribe(seen.append)
    await bridge.start()
    probe.hold.set()
    poll = asyncio.get_running_loop().create_task(bridge.poll())
    assert await asyncio.to_thread(probe.entered.wait, 30), "the poll never reached the probe"
    # the refusal is pending now: the poll in flight takes it when its probes are read
    assert bridge.measure_allocations([4242]) is False
    poll.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await poll
    probe.release.set()

    def refused() -> bool:
        return any(
            isinstance(r, ProbeStatus) and r.probe == "leaks" and r.state == "failed"
            for b in seen
            for r in b.records
        )

    async def polled() -> bool:
        # a poll still in flight absorbs this one (None); once one runs, any batch taken before
        # has been handed on
        return await bridge.poll() is not None

    await wait_until_async(polled, "the bridge to poll again")
    assert refused(), "the leaks probe's refusal was lost with the cancelled poll"
    await bridge.stop()
