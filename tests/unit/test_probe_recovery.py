"""A poll that raises is an event, not a death (issue 35, item 1): the bridge keeps the probe,
reports it erroring (why, how many times in a row), retries it with a backoff that grows while the
other probes keep their cadence, and puts it back to attached by itself once a poll succeeds.
Meanwhile nothing it fed passes as current (item 2): its families are absent from the exporter's
metrics, ``memtop_probe_up`` is 0, and the JSON documents give the age of its last reading.

The cgroups probe reads a cgroup2 tree on disk; its memory.stat read fails (EIO) while a flag is
set: the cause a real cgroupfs gives is a kernel test's (tests/kernel/test_probe_recovery_kernel.py).
"""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import pytest
from test_cgroupfs import MiB, v2_tree

from memtop.export.families import Metric
from memtop.export.metrics import Accumulators, Options, families
from memtop.export.server import Exporter
from memtop.linux import cgroupfs
from memtop.probes.base import Probe
from memtop.probes.cgroups import CgroupsProbe
from memtop.records import Record
from memtop.stream.bridge import BACKOFF_MAX_S, Bridge, backoff_s, poll_reason
from memtop.stream.runner import Runner
from memtop.views import get_view

APP = "/system.slice/app.service"


class TreeProbe(CgroupsProbe):
    """The cgroups probe over a tree in a temporary directory (its layout set, not discovered)."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        h = cgroupfs.Hierarchy(str(root), 2, ("memory",))
        self._tree = cgroupfs.Layout("v2", (h,), h, h, True)
        self.polls = 0

    def load(self) -> None:
        self.layout = self._tree

    def poll(self) -> list[Record]:
        self.polls += 1
        return super().poll()


class Ticker(Probe):
    """Another probe: it must be polled at its cadence whatever the failing one does."""

    name = "ticker"
    needs_bpf = False

    def __init__(self) -> None:
        self.polls = 0

    def load(self) -> None:
        pass

    def poll(self) -> list[Record]:
        self.polls += 1
        return []


def by_name(runner: Runner) -> dict[str, Metric]:
    with runner.lock:
        return {f.name: f for f in families(runner.state, Options(), Accumulators())}


def usage_of(fams: dict[str, Metric], path: str) -> float | None:
    fam = fams.get("container_memory_usage_bytes")
    if fam is None:
        return None
    return next((s.value for s in fam.samples if s.labels["id"] == path), None)


def up(fams: dict[str, Metric], probe: str) -> float:
    return next(s.value for s in fams["memtop_probe_up"].samples if s.labels["probe"] == probe)


def test_backoff_doubles_up_to_a_minute() -> None:
    assert [backoff_s(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff_s(7) == BACKOFF_MAX_S and backoff_s(10_000) == BACKOFF_MAX_S


def test_a_reason_in_plain_words_never_raw() -> None:
    why = poll_reason(UnicodeEncodeError("utf-8", "/x\udcff\x1b]0;owned\x07", 2, 3, "surrogates not allowed"))
    assert why.startswith("a name or file that is not valid UTF-8")
    assert "\x1b" not in why and "\x07" not in why and "\udcff" not in why
    why.encode("utf-8")  # writable anywhere
    assert poll_reason(OSError(errno.EIO, "Input/output error")).startswith("input/output error")


def test_a_failing_poll_is_retried_with_backoff_and_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    v2_tree(tmp_path / "cg")
    app = tmp_path / "cg" / "system.slice" / "app.service"
    broken = {"on": False}
    real_read_memory = cgroupfs.read_memory

    def read_memory(
        version: int, d: str, held: cgroupfs.HeldFiles | None = None, usage_text: str | None = None
    ) -> cgroupfs.Reading:
        if broken["on"]:
            raise OSError(errno.EIO, "Input/output error", d)
        return real_read_memory(version, d, held, usage_text)

    monkeypatch.setattr(cgroupfs, "read_memory", read_memory)
    probe, ticker = TreeProbe(tmp_path / "cg"), Ticker()
    bridge = Bridge([probe, ticker])
    now = [1000.0]
    bridge.clock = lambda: now[0]
    runner = Runner(bridge)

    def tick(dt: float = 1.0) -> None:
        now[0] += dt
        bridge.publish(bridge.poll_sync())

    async def start() -> None:
        await runner.start()

    asyncio.run(start())
    fams = by_name(runner)
    assert usage_of(fams, APP) == 64 * MiB and up(fams, "cgroups") == 1.0

    # the cause: every read of memory.stat and the limits fails; the usage moves meanwhile
    broken["on"] = True
    (app / "memory.current").write_text(f"{80 * MiB}\n")
    tick()
    st = runner.state.statuses["cgroups"]
    assert st.state == "erroring" and st.failures == 1
    assert st.message.startswith("input/output error")
    assert probe in bridge._attached  # kept: not closed, not dropped
    fams = by_name(runner)
    # nothing it fed is served as current: the container families are gone, up says 0
    assert not any(name.startswith("container_") for name in fams)
    assert up(fams, "cgroups") == 0.0
    assert (
        next(s for s in fams["memtop_probe_up"].samples if s.labels["probe"] == "cgroups")
        .labels["reason"]
        .startswith("input/output error")
    )
    last = fams["memtop_probe_last_success_timestamp_seconds"].samples
    assert any(s.labels["probe"] == "cgroups" for s in last)
    # what --textfile writes (the same registry /metrics serves)
    text = Exporter(runner, Options()).exposition(latest=True)[0].decode()
    assert "container_memory_usage_bytes{" not in text
    assert 'memtop_probe_poll_failures{probe="cgroups"} 1.0' in text

    # retried after 1 s, then 2, 4, 8: the gaps between attempts grow; the ticker runs every tick
    attempts: list[float] = []
    polls, ticks_before = probe.polls, ticker.polls
    for _ in range(16):
        tick()
        if probe.polls != polls:
            attempts.append(now[0])
            polls = probe.polls
    gaps = [round(b - a) for a, b in zip(attempts, attempts[1:], strict=False)]
    assert gaps == [2, 4, 8], attempts
    assert ticker.polls - ticks_before == 16  # the other probe never waited
    st = runner.state.statuses["cgroups"]
    assert st.state == "erroring" and st.failures == 1 + len(attempts) and st.since_ns > 0
    doc = get_view("cgroups").document(runner.state, get_view("cgroups").default_options())
    assert doc["probes"]["cgroups"]["state"] == "erroring"
    assert doc["probes"]["cgroups"]["failures"] == st.failures
    assert doc["probes"]["cgroups"]["reading_age_s"] > 0
    text = get_view("cgroups").text(runner.state, get_view("cgroups").default_options())
    assert f"note: cgroups erroring (poll failed {st.failures}×)" in text and "old" in text

    # the cause goes: at the next attempt it reads again, attached by itself, fresh figures
    broken["on"] = False
    for _ in range(int(BACKOFF_MAX_S) + 1):
        tick()
        if runner.state.statuses["cgroups"].state == "attached":
            break
    st = runner.state.statuses["cgroups"]
    assert st.state == "attached" and st.failures == 0
    assert st.message.startswith(f"recovered after {1 + len(attempts)} failed polls")
    fams = by_name(runner)
    assert usage_of(fams, APP) == 80 * MiB and up(fams, "cgroups") == 1.0
    assert runner.state.reading_age_ns("cgroups") == 0
    # and it is polled at its cadence again, not on the backoff's
    polls = probe.polls
    tick()
    tick()
    assert probe.polls == polls + 2
    bridge.close()


def test_the_retry_reads_afresh_once_the_cause_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cgroup whose very name makes the poll fail (as a name that is not UTF-8 made the cgroups
    probe's hashing of it fail) is in the listing the probe walks every 5 polls: once it is
    removed, the first retry must walk again rather than fail on the stale listing until the
    next walk, which the backoff spaces out to minutes."""
    v2_tree(tmp_path / "cg")
    real_read = cgroupfs.HeldFiles.read

    def read(self: cgroupfs.HeldFiles, path: str, size: int = 4096) -> str | None:
        if "/bad" in path:  # fails by name, whether or not it is still there
            raise UnicodeEncodeError("utf-8", path, 0, 1, "surrogates not allowed")
        return real_read(self, path, size)

    monkeypatch.setattr(cgroupfs.HeldFiles, "read", read)
    probe = TreeProbe(tmp_path / "cg")
    bridge = Bridge([probe])
    now = [1000.0]
    bridge.clock = lambda: now[0]
    runner = Runner(bridge)
    asyncio.run(runner.start())
    bad = tmp_path / "cg" / "bad"
    bad.mkdir()
    (bad / "memory.current").write_text("4096\n")
    for _ in range(10):  # found at the next walk
        now[0] += 1.0
        bridge.publish(bridge.poll_sync())
        if runner.state.statuses["cgroups"].state == "erroring":
            break
    assert runner.state.statuses["cgroups"].state == "erroring"
    for _ in range(8):  # a few failures: the retries are spaced out
        now[0] += 1.0
        bridge.publish(bridge.poll_sync())
    failures = runner.state.statuses["cgroups"].failures
    assert failures >= 3
    (bad / "memory.current").unlink()
    bad.rmdir()
    polls = probe.polls
    while probe.polls == polls:  # the next attempt, whenever the backoff lets it
        now[0] += 1.0
        bridge.publish(bridge.poll_sync())
    assert runner.state.statuses["cgroups"].state == "attached"
    bridge.close()
