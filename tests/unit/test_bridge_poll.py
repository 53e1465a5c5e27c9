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
import time

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


class ThreadProbe(Probe):
    """Notes the thread each poll runs in."""

    name = "threads"
    needs_bpf = False
    cadence_s = 0.0

    def __init__(self) -> None:
        self.threads: list[int] = []

    def load(self) -> None:
        return None

    def poll(self) -> list[Record]:
        self.threads.append(threading.get_ident())
        return []


async def test_polls_run_in_one_kept_thread_which_ends_with_the_bridge() -> None:
    """A thread per poll cost its creation and start every tick: one thread serves them all,
    and closing the bridge ends it."""
    probe = ThreadProbe()
    bridge = Bridge([probe])
    await bridge.start()  # its first poll is in the event loop's thread: the first frame waits for it
    probe.threads.clear()
    for _ in range(5):
        await bridge.poll()
    assert len(probe.threads) >= 5
    assert len(set(probe.threads)) == 1
    assert threading.get_ident() not in probe.threads  # not the event loop's
    worker = next(t for t in threading.enumerate() if t.ident == probe.threads[0])
    assert worker.name == "memtop-poll" and worker.daemon
    await bridge.stop()
    await asyncio.to_thread(worker.join, 30)
    assert not worker.is_alive()


async def test_the_poll_thread_hands_back_a_failure_and_starts_again_after_stopping() -> None:
    from memtop.stream.bridge import DaemonWorker

    worker = DaemonWorker("memtop-test-worker")

    def boom() -> int:
        raise ValueError("boom")

    assert await worker.run(lambda: 1) == 1
    try:
        await worker.run(boom)
    except ValueError as exc:
        assert str(exc) == "boom"
    else:
        raise AssertionError("the failure was not handed back")
    assert await worker.run(lambda: threading.current_thread().name) == "memtop-test-worker"
    assert worker.started == 1
    worker.stop()
    await wait_until_async(
        lambda: not any(t.name == "memtop-test-worker" for t in threading.enumerate()), "the worker's end"
    )
    assert await worker.run(lambda: 2) == 2
    assert worker.started == 2
    worker.stop()


class TimedProbe(Probe):
    """Notes when (``time.monotonic()``) each poll runs."""

    name = "timed"
    needs_bpf = False
    cadence_s = 0.0

    def __init__(self) -> None:
        self.times: list[float] = []

    def load(self) -> None:
        return None

    def poll(self) -> list[Record]:
        self.times.append(time.monotonic())
        return []


async def test_a_timed_poll_waits_in_the_poll_thread_for_its_time() -> None:
    """The TUI asks for each tick's poll at its time (one wake-up of the event loop a tick):
    the poll is made then, not before."""
    probe = TimedProbe()
    bridge = Bridge([probe])
    await bridge.start()
    probe.times.clear()
    at = time.monotonic() + 0.3
    batch = await bridge.poll(at)
    assert batch is not None
    assert len(probe.times) == 1 and probe.times[0] >= at
    await bridge.stop()


async def test_a_poll_asked_now_takes_over_a_timed_poll_still_waiting() -> None:
    """A pane shown again is polled at once (its probes were polled less often): a timed poll
    waiting for the next tick is made now and both awaiters get its batch. A timer started
    again (a new interval) re-times it the same way; a stopped source does not make it."""
    probe = TimedProbe()
    bridge = Bridge([probe])
    await bridge.start()
    probe.times.clear()
    loop = asyncio.get_running_loop()
    timed = loop.create_task(bridge.poll(time.monotonic() + 3600))
    await asyncio.sleep(0)  # the timed poll is handed to the thread
    now = await asyncio.wait_for(bridge.poll(), 60)  # the bound is not the test: an hour is
    assert now is not None and await asyncio.wait_for(timed, 60) is now
    assert len(probe.times) == 1

    timed = loop.create_task(bridge.poll(time.monotonic() + 3600))
    await asyncio.sleep(0)
    again = await asyncio.wait_for(bridge.poll(time.monotonic()), 60)
    assert again is not None and await asyncio.wait_for(timed, 60) is again
    assert len(probe.times) == 2

    timed = loop.create_task(bridge.poll(time.monotonic() + 3600))
    await asyncio.sleep(0)
    await asyncio.wait_for(bridge.stop(), 60)
    assert await asyncio.wait_for(timed, 60) is None
    assert len(probe.times) == 2
