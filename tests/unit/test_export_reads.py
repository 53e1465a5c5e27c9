"""The exporter reads only what it exports (Source.use_parts, EXPORTED_PARTS): through a Bridge told
the exporter's parts the Kernel probe never opens /proc/vmallocinfo, buddyinfo or allocinfo, the
kills probe never scans every process's oom_score_adj, the sharedinfo probe never scans every
process's smaps, the /proc reader never opens a command line, the pagecache probe never dumps
its per-file maps and the cgroups probe never lists a cgroup2 directory's members, while a probe told nothing (the
TUI, snapshots, recordings, batch) reads them all; and every exported figure is the same either
way."""

from __future__ import annotations

import asyncio
import os
import subprocess
import types
from collections import Counter
from pathlib import Path

import pytest
from support.waits import wait_until
from test_export_metrics import generate_latest_of
from test_sharedinfo import HEADER, fake_proc, fake_sys, row
from test_watched_cadence import kernel_root

from memtop.export.metrics import EXPORTED_PARTS, Accumulators, Options, families
from memtop.linux import bcc_compat, cgroupfs
from memtop.probes import kernel as kernel_mod
from memtop.probes import procfs as procfs_mod
from memtop.probes.cgroups import CgroupsProbe
from memtop.probes.kernel import KernelProbe
from memtop.probes.kills import KillsProbe
from memtop.probes.pagecache import PagecacheProbe
from memtop.probes.procfs import ProcfsProbe
from memtop.probes.shared import SharedinfoProbe
from memtop.records import Batch, Lost, ProbeStatus
from memtop.records.cgroups import CgroupSample
from memtop.records.pagecache import PagecacheActivity
from memtop.records.processes import ProcSample
from memtop.records.shared import HugePools, SharedProc, SharedScan, ShmTable
from memtop.state import State
from memtop.stream.bridge import Bridge

TICKS = 12


def count_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every file the Kernel probe opens, by name (it reads through one reader)."""
    opened: Counter[str] = Counter()

    def counted(path: str, limit: int = cgroupfs.MAX_FILE, errors: str = "replace") -> str | None:
        opened[os.path.basename(path)] += 1
        return cgroupfs.read_text(path, limit, errors)

    monkeypatch.setattr(kernel_mod, "read_text", counted)
    return opened


def run_bridge(probe: KernelProbe, exporting: bool) -> list[Batch]:
    bridge = Bridge([probe], allow_bpf=False)
    if exporting:
        bridge.use_parts(EXPORTED_PARTS)  # what memtop.export.server.export says before starting

    batches: list[Batch] = []
    bridge.subscribe(batches.append)  # the first poll, at start, is published

    async def go() -> list[Batch]:
        await bridge.start()
        await bridge.wait_settled(30)
        batches.extend(bridge.poll_sync(force=True) for _ in range(TICKS))
        await bridge.stop()
        return batches

    return asyncio.run(go())


def test_the_exporter_never_opens_what_it_does_not_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = count_reads(monkeypatch)
    run_bridge(KernelProbe(str(kernel_root(tmp_path)), slow_every=1), exporting=True)
    assert opened["meminfo"] > TICKS and opened["slabinfo"] > TICKS  # what it exports: every tick
    assert opened["vmallocinfo"] == opened["buddyinfo"] == opened["allocinfo"] == 0, opened


def test_the_tui_still_reads_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened = count_reads(monkeypatch)
    run_bridge(KernelProbe(str(kernel_root(tmp_path)), slow_every=1), exporting=False)
    assert opened["vmallocinfo"] > TICKS and opened["buddyinfo"] > TICKS, opened
    assert opened["slabinfo"] > TICKS


def exposition(batches: list[Batch]) -> str:
    state = State()
    state.apply(Batch(ts_ns=1, records=(ProbeStatus("kernel", "attached"),)))
    for b in batches:
        state.apply(b)
    # the probes' own families carry when each poll succeeded: not a figure read from a file
    fams = [f for f in families(state, Options(), Accumulators()) if not f.name.startswith("memtop_probe")]
    return generate_latest_of(fams)


def test_exported_figures_are_the_same_whatever_is_read(tmp_path: Path) -> None:
    root = str(kernel_root(tmp_path))
    full = exposition(run_bridge(KernelProbe(root), exporting=False))
    lean = exposition(run_bridge(KernelProbe(root), exporting=True))
    assert "memtop_slab_cache_bytes" in full and "memtop_kernel_memory_bytes" in full
    assert lean == full


class NoBpf(types.SimpleNamespace):
    """The kills probe's program stands in for nothing here: its /proc side is under test."""

    def ring_buffer_consume(self) -> None:
        return None


@pytest.mark.parametrize("exporting", [True, False])
def test_kills_probe_scans_oom_score_adj_only_for_the_oom_pane(
    exporting: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = KillsProbe()
    probe.bpf = NoBpf()
    monkeypatch.setattr(probe, "lost_record", lambda *a: Lost("kills", "events", 0))
    scans: list[int] = []
    real = probe.scan_adj

    def counted() -> tuple[tuple[int, int], ...]:
        scans.append(1)
        return real()

    monkeypatch.setattr(probe, "scan_adj", counted)
    probe.used_parts = frozenset(EXPORTED_PARTS["kills"]) if exporting else None
    try:
        probe.poll()
    finally:
        probe.bpf = None
        probe.close()
    assert scans == ([] if exporting else [1])


@pytest.mark.parametrize("exporting", [True, False])
def test_sharedinfo_scans_processes_only_for_the_shared_pane(
    exporting: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The segments and pools (exported) every tick either way; the scan of every process's maps
    and smaps (the pane's tables) only when a front end uses it."""
    proc = fake_proc(tmp_path, HEADER + row(99, 3, 4096, 1, 0, 0))
    probe = SharedinfoProbe(str(proc), str(fake_sys(tmp_path)))
    scans: list[int] = []
    real = probe._scan_procs

    def counted() -> tuple[list[SharedProc], int, int]:
        scans.append(1)
        return real()

    monkeypatch.setattr(probe, "_scan_procs", counted)
    probe.used_parts = frozenset(EXPORTED_PARTS["sharedinfo"]) if exporting else None
    sent = [r for _ in range(TICKS) for r in probe.poll()]
    assert sum(isinstance(r, ShmTable) for r in sent) == TICKS
    assert any(isinstance(r, HugePools) for r in sent)
    assert (scans == []) if exporting else (len(scans) >= 1)
    assert any(isinstance(r, SharedScan) for r in sent) is not exporting


@pytest.mark.parametrize("exporting", [True, False])
def test_procfs_reads_command_lines_only_for_the_panes(
    exporting: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the real /proc: no /proc/PID/cmdline opened for the exporter (its series are labelled
    by comm), every process's for the others; the figures exported the same."""
    opened: Counter[str] = Counter()
    real = procfs_mod.read_bytes

    def counted(path: str, chunk: int = 4096) -> bytes | None:
        opened[os.path.basename(path)] += 1
        return real(path, chunk)

    monkeypatch.setattr(procfs_mod, "read_bytes", counted)
    child = subprocess.Popen(["sleep", "600"])
    probe = ProcfsProbe("/proc")
    probe.used_parts = frozenset(EXPORTED_PARTS["procfs"]) if exporting else None
    try:
        wait_until(lambda: Path(f"/proc/{child.pid}/cmdline").read_bytes() == b"sleep\x00600\x00", "the exec")
        probe.load()
        samples = {r.pid: r for r in probe.poll() if isinstance(r, ProcSample)}
    finally:
        child.kill()
        child.wait()
        probe.close()
    mine = samples[child.pid]
    assert opened["status"] >= len(samples)  # what the exported figures come from: read either way
    if exporting:
        assert opened["cmdline"] == 0 and mine.cmdline == ""
    else:
        assert opened["cmdline"] >= len(samples) and mine.cmdline == "sleep 600"
    assert mine.comm == "sleep"


def test_pagecache_dumps_its_maps_only_for_the_pane(monkeypatch: pytest.MonkeyPatch) -> None:
    """The totals (exported) every poll; the per-file and per-process maps (the pane's tables,
    up to 16,384 entries a dump) not for the exporter. The program itself is tested on the
    kernel (tests/kernel): here only which reads a poll makes."""
    dumps: list[str] = []

    def dump(_bpf: object, table: str) -> tuple[bytes, bytes, int, int, int]:
        dumps.append(table)
        return b"", b"", 0, 16, 32

    monkeypatch.setattr(bcc_compat, "map_dump", dump)
    probe = PagecacheProbe()
    probe.bpf = NoBpf()
    monkeypatch.setattr(probe, "array_slots", lambda table, n: [7, 3])
    try:
        probe.used_parts = frozenset(EXPORTED_PARTS["pagecache"])
        (lean,) = probe.poll()
        assert dumps == []
        probe.used_parts = None
        (full,) = probe.poll()
        assert dumps == ["pc_files", "pc_pids"]
    finally:
        probe.bpf = None
    assert isinstance(lean, PagecacheActivity) and isinstance(full, PagecacheActivity)
    assert (lean.added, lean.deleted) == (full.added, full.deleted) == (7, 3)


@pytest.mark.parametrize("exporting", [True, False])
def test_cgroups_reads_cgroup2_members_only_for_the_panes(
    exporting: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the real cgroup trees of a hybrid machine: no cgroup2 directory's cgroup.procs read for
    the exporter (its series come from the memory controller's members), each one at a walk for
    the others; the memory controller's members read either way, and the samples the same but
    for who is in the cgroup2 twin."""
    lay = cgroupfs.layout()
    if lay.mode != "hybrid" or lay.unified is None or lay.memory is None:
        pytest.skip("needs a hybrid layout (a cgroup2 tree beside the v1 memory controller)")
    read: Counter[str] = Counter()
    real = cgroupfs.read_procs

    def counted(d: str, held: cgroupfs.HeldFiles | None = None) -> tuple[int, ...]:
        assert lay.unified is not None and lay.memory is not None
        read["unified" if d.startswith(lay.unified.mountpoint) else "memory"] += 1
        return real(d, held)

    monkeypatch.setattr(cgroupfs, "read_procs", counted)
    probe = CgroupsProbe()
    probe.used_parts = frozenset(EXPORTED_PARTS["cgroups"]) if exporting else None
    probe.load()
    try:
        samples = [r for r in probe.poll() if isinstance(r, CgroupSample)]
    finally:
        probe.close()
    assert read["memory"] > 0 and samples
    if exporting:
        assert read["unified"] == 0 and all(s.unified_pids == () for s in samples)
    else:
        assert read["unified"] > 0


def test_pagecache_decodes_and_sends_only_the_files_whose_counts_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The per-file map is kept as each entry's bytes from poll to poll: a file is decoded (its
    device as stat's st_dev, its inode and counts) and sent only when its counts moved, every
    file still counted as tracked."""
    import os
    import struct

    from memtop.probes.pagecache import COUNTS, FILE_KEY

    counts = {(259 << 20 | 3, 11): (5, 0), (8 << 20 | 1, 12): (9, 2), (259 << 20 | 3, 13): (1, 1)}

    def dump(_bpf: object, table: str) -> tuple[bytes, bytes, int, int, int]:
        if table == "pc_pids":
            return b"", b"", 0, 4, 32
        keys = b"".join(struct.pack(FILE_KEY.fmt, ino, kdev, 0) for kdev, ino in counts)
        values = b"".join(struct.pack(COUNTS.fmt, *ad) for ad in counts.values())
        return keys, values, len(counts), struct.calcsize(FILE_KEY.fmt), struct.calcsize(COUNTS.fmt)

    monkeypatch.setattr(bcc_compat, "map_dump", dump)
    probe = PagecacheProbe()
    probe.bpf = NoBpf()
    monkeypatch.setattr(probe, "array_slots", lambda table, n: [15, 3])
    try:
        (first,) = probe.poll()
        counts[(8 << 20 | 1, 12)] = (10, 2)
        (second,) = probe.poll()
        (third,) = probe.poll()
    finally:
        probe.bpf = None
    assert isinstance(first, PagecacheActivity) and isinstance(second, PagecacheActivity)
    assert isinstance(third, PagecacheActivity)
    nvme, sda = os.makedev(259, 3), os.makedev(8, 1)
    assert first.files == tuple(sorted(((nvme, 11, 5, 0), (sda, 12, 9, 2), (nvme, 13, 1, 1))))
    assert second.files == ((sda, 12, 10, 2),)
    assert third.files == ()
    assert first.files_tracked == second.files_tracked == third.files_tracked == 3
