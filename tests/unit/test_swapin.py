"""Swap-in parsing without a kernel: /proc/PID/maps classification and /proc/swaps."""

from __future__ import annotations

from pathlib import Path

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
