"""Source.watch: the probes that feed what is on screen read everything every tick; the Kernel
probe's slabinfo and the sharedinfo probe's scans and pools come less often while their panes
are not shown, and at once when they are shown again. Nothing watched (snapshots, recordings,
the exporter, a probe polled directly): every tick, as before."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar

from support.fakes import CountedPolls
from test_sharedinfo import HEADER, fake_proc, fake_sys, row

from memtop.probes.kernel import KernelProbe
from memtop.probes.shared import SharedinfoProbe
from memtop.records import Record
from memtop.records.kernel import SlabCaches, VmallocCallers
from memtop.records.shared import HugePools, SharedScan, ShmTable
from memtop.stream.bridge import Bridge

DATA = Path(__file__).resolve().parents[1] / "data" / "kernel"


def kernel_root(tmp_path: Path) -> Path:
    root = tmp_path / "kproc"
    root.mkdir()
    (root / "meminfo").write_text((DATA / "meminfo-6.18.txt").read_text())
    (root / "buddyinfo").write_text((DATA / "buddyinfo.txt").read_text())
    (root / "vmallocinfo").write_text((DATA / "vmallocinfo.txt").read_text())
    (root / "slabinfo").write_text((DATA / "slabinfo-2.1.txt").read_text())
    (root / "vmstat").write_text("nr_zspages 0\n")
    return root


def ticks_with(probe: KernelProbe | SharedinfoProbe, kind: type[Record], ticks: int) -> list[int]:
    """The ticks (from 1) whose poll sent a ``kind`` record."""
    return [t for t in range(1, ticks + 1) if any(isinstance(r, kind) for r in probe.poll())]


def test_kernel_probe_reads_slabinfo_every_tick_only_while_watched(tmp_path: Path) -> None:
    probe = KernelProbe(str(kernel_root(tmp_path)), unwatched_every=10)
    probe.load()
    assert ticks_with(probe, SlabCaches, 5) == [1, 2, 3, 4, 5]  # watched unless told otherwise
    probe.watched = False
    # the probe's ticks 15 and 25 (10 apart), and 30 (every cache is resent each 30th tick)
    assert ticks_with(probe, SlabCaches, 25) == [10, 20, 25]
    probe.watched = True
    assert ticks_with(probe, SlabCaches, 3) == [1, 2, 3]


def test_kernel_probe_reads_vmallocinfo_seldom_while_unwatched(tmp_path: Path) -> None:
    """/proc/vmallocinfo (its read holds the kernel's vmap lock) and allocinfo: every 5th tick
    while the Kernel pane is shown, every 30th while it is not, at once when it is shown again."""
    probe = KernelProbe(str(kernel_root(tmp_path)), slow_every=5, full_every=30)
    probe.load()
    assert ticks_with(probe, VmallocCallers, 10) == [1, 5, 10]
    probe.watched = False
    assert ticks_with(probe, VmallocCallers, 50) == [20, 50]  # the probe's ticks 30 and 60
    probe.watched = True
    assert ticks_with(probe, VmallocCallers, 5) == [1, 5]  # its tick 61 (shown again), 65


def test_sharedinfo_scans_seldom_unwatched_and_at_once_when_shown(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, HEADER + row(99, 3, 4096, 1, 0, 0))
    probe = SharedinfoProbe(str(proc), str(fake_sys(tmp_path)), scan_every=5, unwatched_every=30)
    probe.watched = False
    seen: dict[type[Record], list[int]] = {SharedScan: [], HugePools: [], ShmTable: []}
    for t in range(1, 71):
        if t == 65:
            probe.watched = True  # the Shared pane shown: a scan at its next tick
        got = probe.poll()
        for kind, ticks in seen.items():
            if any(isinstance(r, kind) for r in got):
                ticks.append(t)
    assert seen[SharedScan] == [1, 31, 61, 65, 70]
    assert seen[ShmTable] == list(range(1, 71))  # the segments: every tick (one small file)
    assert seen[HugePools] == [1]  # read every 5th tick unwatched, sent when they changed


def test_bridge_tells_each_probe_whether_it_is_watched(tmp_path: Path) -> None:
    kernel = KernelProbe(str(kernel_root(tmp_path)))
    shared = SharedinfoProbe(str(fake_proc(tmp_path, HEADER)), str(fake_sys(tmp_path)))
    bridge = Bridge([kernel, shared], allow_bpf=False)

    async def go() -> list[tuple[bool, bool]]:
        await bridge.start()
        await bridge.wait_settled(10)
        out = []
        for probes in (None, ("sharedinfo", "shared"), ("procfs",), None):
            bridge.watch(probes)
            bridge.poll_sync(force=True)
            out.append((kernel.watched, shared.watched))
        await bridge.stop()
        return out

    assert asyncio.run(go()) == [(True, True), (False, True), (False, False), (True, True)]


class CountedProbe(CountedPolls):
    """A probe only its own pane shows (``unwatched_cadence_s``): counts its polls."""

    name = "counted"
    unwatched_cadence_s: ClassVar[float | None] = 10.0


def test_bridge_polls_a_probe_at_its_unwatched_cadence_off_its_pane() -> None:
    """Every tick while it is watched (or nothing is: snapshots, the exporter), every
    ``unwatched_cadence_s`` while what is on screen does not need it, and at the first tick once
    it is needed again."""
    probe = CountedProbe()
    bridge = Bridge([probe], allow_bpf=False)
    now = [1000.0]
    bridge.clock = lambda: now[0]

    async def go() -> list[int]:
        await bridge.start()
        await bridge.wait_settled(10)
        polled = []
        for t in range(40):
            bridge.watch(("counted",) if t < 5 or t >= 33 else ("procfs",))
            before = probe.polls
            bridge.poll_sync()
            if probe.polls > before:
                polled.append(t)
            now[0] += 1.0
        await bridge.stop()
        return polled

    polled = asyncio.run(go())
    # start() polled at 0; 1-4 watched; 5-32 not: 9 s after the last poll (a tenth of slack, as
    # for every cadence, so a tick a little early is not skipped), then every 9 s; 33 on: watched
    assert polled == [1, 2, 3, 4, 13, 22, 31, *range(33, 40)]


class OtherPaneProbe(CountedProbe):
    name = "otherpane"
    unwatched_cadence_s = None


def test_the_first_poll_reads_only_what_the_first_frame_draws() -> None:
    """The TUI's first frame waits for the bridge's first poll: a probe is read then only when
    it is watched (the pane shown names it, or the header draws from it), else at the next
    poll. Nothing watched (snapshots, recordings, the exporter): read in the first poll."""

    async def first_polls(watch: tuple[str, ...] | None) -> tuple[int, int]:
        probe = OtherPaneProbe()
        bridge = Bridge([probe], allow_bpf=False)
        bridge.watch(watch)
        await bridge.start()
        at_start = probe.polls
        await bridge.wait_settled(10)
        bridge.poll_sync(force=True)
        after = probe.polls
        await bridge.stop()
        return at_start, after

    assert asyncio.run(first_polls(("procfs",))) == (0, 1)
    assert asyncio.run(first_polls(("procfs", "otherpane"))) == (1, 2)
    assert asyncio.run(first_polls(None)) == (1, 2)


class Plain(CountedProbe):
    """A probe with no cadence of its own for when it is not watched: the bridge's default."""

    name = "hidden"
    unwatched_cadence_s = None


class Ring(Plain):
    """One that drains a ring buffer: polled every tick whatever is shown."""

    name = "ring"
    full_cadence = True


class Asked(Plain):
    name = "asked"


def polled_ticks(bridge: Bridge, now: list[float], probes: list[Plain], ticks: range) -> dict[str, list[int]]:
    """Poll once a (stepped) second for ``ticks``; the ticks at which each probe was polled."""
    out: dict[str, list[int]] = {p.name: [] for p in probes}
    for t in ticks:
        before = [p.polls for p in probes]
        bridge.poll_sync()
        for p, n in zip(probes, before, strict=True):
            if p.polls > n:
                out[p.name].append(t)
        now[0] += 1.0
    return out


def test_a_probe_no_one_sees_is_polled_every_fifth_tick_and_at_once_when_shown() -> None:
    """A probe memtop started with whose data nothing on screen needs is polled every
    UNWATCHED_EVERY ticks (its counters keep counting: the state divides by the real interval);
    watched again, ``watch`` says so and the next poll reads it, even a tick after its last;
    one that drains a ring buffer (``full_cadence``), one an intent attached and everything
    when nothing is watched (a recording, the exporter, a snapshot) keep every tick."""
    hidden, ring = Plain(), Ring()
    bridge = Bridge([hidden, ring], allow_bpf=False)
    now = [1000.0]
    bridge.clock = lambda: now[0]

    async def go() -> tuple[dict[str, list[int]], ...]:
        await bridge.start()
        await bridge.wait_settled(10)
        asked = Asked()  # attached by an intent (a drill-in's, a tracer)
        assert bridge.add_probe(asked)
        await bridge.wait_settled(10)
        probes = [hidden, ring, asked]
        now[0] += 1.0  # tick 1 is a second after start()'s poll
        assert not bridge.watch(("procfs",))  # nothing was slowed before
        off = polled_ticks(bridge, now, probes, range(1, 13))
        now[0] -= 0.5  # half a tick after the last poll: nothing is due by its cadence
        assert bridge.watch(("procfs", "hidden"))
        again = polled_ticks(bridge, now, probes, range(13, 15))
        assert not bridge.watch(None)  # nothing was behind
        everything = polled_ticks(bridge, now, probes, range(15, 18))
        await bridge.stop()
        return off, again, everything

    off, again, everything = asyncio.run(go())
    # start() polled at 0: then every 5th tick (with the tenth of slack every cadence has)
    assert off == {"hidden": [5, 10], "ring": list(range(1, 13)), "asked": list(range(1, 13))}
    # shown at 13, half a tick after 12's poll: only the probe shown again is read at once
    assert again == {"hidden": [13, 14], "ring": [14], "asked": [14]}
    assert everything == {"hidden": [15, 16, 17], "ring": [15, 16, 17], "asked": [15, 16, 17]}


def test_the_probes_always_shown_are_registered_default_probes() -> None:
    """What the header and the notices need is polled every tick on every pane: each is a probe
    memtop starts with (a name that is not would silently slow the header down)."""
    from memtop.probes.registry import PROBES, on_demand
    from memtop.views import ALWAYS_SHOWN_PROBES

    assert ALWAYS_SHOWN_PROBES
    assert all(name in PROBES and not on_demand(name) for name in ALWAYS_SHOWN_PROBES)


def test_the_page_cache_probes_off_their_pane_poll_within_half_the_thrashing_window() -> None:
    """Off the Page cache pane (the TUI on another) both page cache probes are polled every
    15 s: rarely, as their scans and map dumps were the poll thread's largest cost after the
    cgroups and /proc readers, and at most half the thrashing window apart, so the pane shown
    again reads each file's evictions from a sample at most that much older than its window's
    start. On their pane, and for every front end that watches nothing: every tick."""
    from memtop.probes.pagecache import PagecacheinfoProbe, PagecacheProbe
    from memtop.state.pagecache import WINDOW_NS

    info, bpf = PagecacheinfoProbe(), PagecacheProbe()
    bridge = Bridge([info, bpf], allow_bpf=False)
    for p in (info, bpf):
        assert bridge.cadence_of(p, watched=False) == 15.0
        assert bridge.cadence_of(p, watched=False) <= WINDOW_NS / 2e9
        assert bridge.cadence_of(p, watched=True) == 1.0
