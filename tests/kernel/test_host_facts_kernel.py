"""The live source's host facts are this machine's (uname, gethostname, /proc/stat btime), and
after the first BPF compilation they name the header tree it used: the header line shows the
stand-in version exactly when memtop compiled against a stand-in."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from memtop.linux import bcc_compat
from memtop.probes.oom import OomProbe
from memtop.records import Batch
from memtop.records.host import HostFacts
from memtop.state import State
from memtop.state.host import HostState
from memtop.stream.bridge import Bridge
from memtop.views.header import header_line


def btime_ns() -> int:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return int(line.split()[1]) * 10**9
    raise AssertionError("no btime in /proc/stat")


@pytest.mark.bpf
def test_live_facts_are_this_machines_and_name_the_headers() -> None:
    known_before = bcc_compat.header_info()  # None unless this process compiled already
    state = State(mode="bpf")
    batches: list[Batch] = []

    async def session() -> None:
        bridge = Bridge([OomProbe()])  # BPF only: the first batch has the facts all the same
        bridge.subscribe(batches.append)
        bridge.subscribe(state.apply)
        try:
            await bridge.start()
            assert await bridge.wait_settled(120)
            await bridge.poll()
            assert bridge.statuses()["oom"].state == "attached", bridge.statuses()["oom"]
        finally:
            await bridge.stop()

    asyncio.run(session())
    first = [r for r in batches[0].records if isinstance(r, HostFacts)]
    assert len(first) == 1, "the first batch must carry the host facts"
    if known_before is None:
        assert first[0].headers_kind == ""  # not looked for yet: said again once known
    facts = state.get(HostState).facts
    assert facts is not None
    assert facts.kernel_release == os.uname().release
    assert facts.hostname == socket.gethostname()
    assert facts.boot_time_ns == btime_ns()
    assert facts.bpf_error == "" and facts.bpf_hint == ""
    info = bcc_compat.header_info()
    assert info is not None, "BPF compiled, so the headers were found"
    assert (facts.headers_kind, facts.headers_version) == (info.kind, info.version)
    head = header_line(state)
    text = "".join(s.text for s in head.lead + head.rest)
    assert f"host {socket.gethostname()} ({os.uname().release})" in text
    if info.kind == "standin":  # said in the help (`?`), where it does not crowd the header
        from memtop.views.header import headers_text

        assert headers_text(facts) == f"headers: stand-in {info.version}"
        assert "stand-in" not in text
    else:
        assert "headers:" not in text
    assert head.banner == ()
