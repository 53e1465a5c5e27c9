"""An intent to stop a probe reaches it while it loads (the Kernel pane's `f` then `k`: the first
tracer was still compiling when the second key stopped it). The probe here is a stand-in that
holds its load until the test lets it go, so the intent lands mid-load every time; the real
tracers are checked in tests/kernel/test_kernel_tracers.py."""

from __future__ import annotations

import asyncio
import threading
from typing import ClassVar

from memtop.probes.base import Probe
from memtop.records import Record
from memtop.stream.bridge import Bridge


class HeldLoad(Probe):
    """Loads when ``release`` is set; says when its load began and whether it was closed."""

    name: ClassVar[str] = "slabfrees"  # one of the Kernel pane's tracers, by name
    needs_bpf: ClassVar[bool] = False

    def __init__(self) -> None:
        self.loading = threading.Event()
        self.release = threading.Event()
        self.closed = False

    def load(self) -> None:
        self.loading.set()
        assert self.release.wait(30)

    def poll(self) -> list[Record]:
        return []

    def close(self) -> None:
        self.closed = True


async def loading(bridge: Bridge) -> HeldLoad:
    probe = HeldLoad()
    assert bridge.add_probe(probe)
    assert await asyncio.to_thread(probe.loading.wait, 30)
    return probe


async def test_stopping_a_tracer_while_it_loads_closes_it_once_loaded() -> None:
    bridge = Bridge([], allow_bpf=True)
    probe = await loading(bridge)
    assert bridge.trace_kernel("slabfrees", False)  # found, though neither queued nor attached
    probe.release.set()
    assert await bridge.wait_settled(30)
    assert probe.closed and bridge.probe("slabfrees") is None
    assert bridge.statuses()["slabfrees"].state == "detached"


async def test_a_tracer_loading_is_not_started_twice() -> None:
    bridge = Bridge([], allow_bpf=True)
    probe = await loading(bridge)
    assert not bridge.add_probe(HeldLoad())  # one by that name is on its way
    probe.release.set()
    assert await bridge.wait_settled(30)
    assert bridge.probe("slabfrees") is probe and not probe.closed
    bridge.remove_probe("slabfrees")
    assert probe.closed
