"""Swap-in parsing without a kernel: /proc/PID/maps classification and /proc/swaps."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtop.probes.procmaps import parse_maps
from memtop.probes.swapin import file_backed_at, read_swapinfo, region_file_backed
from memtop.records import from_json, to_json

MiB = 1 << 20


def test_maps_classification() -> None:
    maps = parse_maps(
        "00400000-00401000 r-xp 00000000 fe:01 1234 /usr/bin/x\n"
        "7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \n"
        "7f0000200000-7f0000300000 rw-s 00000000 00:01 77 /memfd:pool (deleted)\n"
        "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]\n"
    )
    assert file_backed_at(maps, 0x400010) is True
    assert file_backed_at(maps, 0x7F0000000100) is False
    assert file_backed_at(maps, 0x7F0000200000) is False  # shmem: a major fault there is a swap-in
    assert file_backed_at(maps, 0x500000) is None
    # no-wait faults come counted per 2 MiB region: one kind of mapping decides it outright,
    # a region with both kinds goes by its latest faulting address
    assert region_file_backed(maps, 0x400000 >> 21, 0) is True
    assert region_file_backed(maps, 0x7F0000000000 >> 21, 0x7F0000000100) is False
    assert region_file_backed(maps, 0x7FFC00000000 >> 21, 0) is False
    mixed = parse_maps(
        "00600000-00610000 r--p 00000000 fe:01 1 /usr/lib/x.so\n00610000-00620000 rw-p 00000000 00:00 0 \n"
    )
    assert region_file_backed(mixed, 0x600000 >> 21, 0x600100) is True
    assert region_file_backed(mixed, 0x600000 >> 21, 0x618000) is False


def test_swapinfo_reads_proc_swaps(tmp_path: Path) -> None:
    proc, sys_ = tmp_path / "proc", tmp_path / "sys"
    proc.mkdir()
    (proc / "swaps").write_text(
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
        "/dev/vdb                                partition\t1048572\t\t2048\t\t-2\n"
        "/var/tmp/my\\040swap                    file\t\t4194300\t\t0\t\t5\n"
    )
    (proc / "meminfo").write_text("MemTotal: 100 kB\nZswap:    1024 kB\nZswapped:  4096 kB\n")
    (sys_ / "module" / "zswap" / "parameters").mkdir(parents=True)
    (sys_ / "module" / "zswap" / "parameters" / "enabled").write_text("Y\n")
    info = read_swapinfo(proc, sys_)
    assert info.devices == (
        ("/dev/vdb", "partition", 1048572 * 1024, 2048 * 1024, -2),
        ("/var/tmp/my swap", "file", 4194300 * 1024, 0, 5),
    )
    assert info.zswap_enabled and info.zswap_pool_bytes == MiB and info.zswapped_bytes == 4 * MiB
    assert from_json(to_json(info)) == info


def test_per_process_maps_are_walked_only_when_a_fault_may_have_changed_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The major-fault program, the only one that changes the per-process maps, ends each run
    that does by bumping its generation, after its updates: while the generation holds only the
    counters are read (an empty hash map costs the kernel a walk of every bucket; the no-wait
    regions are not drained), but every map once in MAPS_BACKSTOP polls; a fault has them
    walked at the poll that sees its generation, its process's totals sent; the counters the
    context switches move are sent at every poll."""
    from types import SimpleNamespace
    from typing import Any

    from memtop.linux import bcc_compat
    from memtop.probes import swapin
    from memtop.probes.base import MAPS_BACKSTOP
    from memtop.probes.swapin import COUNTERS, HIST_SLOTS, LOST, SwapinProbe, _Stats
    from memtop.records import Lost
    from memtop.records.swapin import SwapinHistogram, SwapinProc

    stats: dict[int, _Stats] = {}
    walks = {"stats": 0, "pid_hist": 0}
    regions: list[tuple[Any, Any]] = []

    class Maps:
        def __getitem__(self, name: str) -> Any:
            def items() -> list[tuple[Any, Any]]:
                walks[name] += 1
                if name == "stats":
                    return [(SimpleNamespace(value=pid), s) for pid, s in stats.items()]
                return []

            return SimpleNamespace(items=items)

    probe = SwapinProbe()
    probe.bpf = Maps()
    arrays = {"hist": [0] * HIST_SLOTS, "file_hist": [0] * HIST_SLOTS, "swapin_lost": [0] * len(LOST)}
    counters = [0] * len(COUNTERS)

    def array_slots(table: str, n: int) -> list[int]:
        if table == "swapin_counters":
            counters[0] += 100  # context switches walk stacks all the time: not a fault
            return list(counters)
        return list(arrays[table][:n])

    drains: list[int] = []

    def drain(_bpf: Any, table: str) -> list[tuple[Any, Any]]:
        assert table == "nowait_regions"
        drains.append(poll)
        out = list(regions)
        regions.clear()
        return out

    monkeypatch.setattr(probe, "array_slots", array_slots)
    monkeypatch.setattr(bcc_compat, "map_drain", drain)
    monkeypatch.setattr(swapin, "read_maps", lambda _pid: [])
    walked: list[int] = []
    sent: dict[int, list[int]] = {}
    hists: list[SwapinHistogram] = []
    generation = COUNTERS.index("generation")
    for poll in range(1, 25):
        if poll == 10:  # a swap-in that waited: its totals, its histogram's count, the generation
            stats[4242] = _Stats(swapins=1, swap_wait_ns=5000, swap_wait_max_ns=5000, comm=b"pager")
            arrays["hist"][12] += 1
            counters[generation] += 1
        if poll == 18:  # a fault that never waited: its totals, its region, the generation
            stats[4242].swapins_nowait += 1
            regions.append((SimpleNamespace(pid=4242, region=7), SimpleNamespace(count=1, addr=7 << 21)))
            counters[generation] += 1
        before = walks["stats"]
        recs = probe.poll()
        if walks["stats"] > before:
            walked.append(poll)
            assert walks["pid_hist"] == walks["stats"]
        for r in recs:
            if isinstance(r, SwapinProc):
                sent.setdefault(r.pid, []).append(poll)
        hists += [r for r in recs if isinstance(r, SwapinHistogram)]
        assert [(r.what, r.count) for r in recs if isinstance(r, Lost)] == [(w, 0) for w in LOST]
    assert walked == drains == [1, 10, MAPS_BACKSTOP, 18]
    assert probe.map_reads == len(walked)
    assert probe.generation.skipped == 24 - len(walked)
    assert sent == {4242: [10, 18]}
    # every poll's record has the counters read at it, the histograms of the last read
    assert [h.fault_sleeps for h in hists] == [100 * p for p in range(1, 25)]
    assert [h.swapin_counts[12] for h in hists] == [0] * 9 + [1] * 15
    # the no-wait fault (swap-backed: no mapping says file) lands in bucket 0 at the poll that drained it
    assert [h.swapin_counts[0] for h in hists] == [0] * 17 + [1] * 7
