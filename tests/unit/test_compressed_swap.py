"""Compressed swap on fixture trees in the kernel documentation's formats (this machine has no zram
module and no v2 memory controller): zram devices (Documentation/admin-guide/blockdev/zram.rst),
zswap's parameters and debugfs counters, v2 memory.stat's zswap keys, SwapPss from smaps_rollup;
and what the Swap-in pane and the header make of them (swap held in RAM is not disk swap)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import cast

import pytest

from memtop.linux import cgroupfs, kernelfs
from memtop.probes.procmaps import parse_rollup
from memtop.probes.swapin import read_swapinfo
from memtop.records import Batch, ProbeStatus, from_json, to_json
from memtop.records.host import MemInfo
from memtop.records.swapin import SwapInfo
from memtop.state import State
from memtop.views import Options, get_view
from memtop.views.header import header_line, summary_line
from memtop.views.swapin import SystemLine, system_text

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "kernel" / "compressed"
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "samples" / "swapin.jsonl"
MiB = 1 << 20


def trees(tmp_path: Path, debugfs: bool = True) -> tuple[Path, Path]:
    """A proc root (swaps on zram0 and a file, meminfo with zswap, mountinfo naming the fixture's
    debugfs when ``debugfs``) and the fixture's sys root."""
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "swaps").write_text(
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
        "/dev/zram0                              partition\t1048572\t\t102400\t\t100\n"
        "/swapfile                               file\t\t4194300\t\t204800\t\t-2\n"
    )
    (proc / "meminfo").write_text(
        "MemTotal:       24000000 kB\nZswap:             30720 kB\nZswapped:         102400 kB\n"
    )
    mounts = "22 1 0:21 / /proc rw,relatime shared:12 - proc proc rw\n"
    if debugfs:
        debug = str(FIXTURE / "debug").replace(" ", "\\040")
        mounts += f"30 22 0:7 / {debug} rw,nosuid shared:14 - debugfs debugfs rw\n"
    (proc / "self" / "mountinfo").write_text(mounts)
    return proc, FIXTURE / "sys"


def test_read_swapinfo_reads_zswap_debugfs_and_zram(tmp_path: Path) -> None:
    proc, sys = trees(tmp_path)
    info = read_swapinfo(proc, sys)
    assert info.zswap_enabled
    assert (info.zswap_pool_bytes, info.zswapped_bytes) == (30720 * 1024, 102400 * 1024)
    params = dict(info.zswap_params)
    assert params["compressor"] == "zstd" and params["max_pool_percent"] == "20"
    debug = dict(info.zswap_debug)
    assert debug["stored_pages"] == 25600 and debug["pool_total_size"] == 31457280
    assert debug["written_back_pages"] == 512 and debug["reject_compress_poor"] == 40
    assert info.debugfs == str(FIXTURE / "debug")
    # zram1 is not initialised (disksize 0): no figures, no row
    assert [z[0] for z in info.zram] == ["zram0"]
    name, algorithm, disksize, pairs = info.zram[0]
    st = dict(pairs)
    assert (algorithm, disksize) == ("lz4", 1 << 30)
    assert st["orig_data_size"] == 100 * MiB and st["compr_data_size"] == 25 * MiB
    assert st["same_pages"] == 1024 and st["huge_pages_since"] == 7
    assert st["notify_free"] == 120 and st["bd_writes"] == 10
    assert from_json(json.loads(json.dumps(to_json(info)))) == info


def test_the_sample_record_is_what_the_fixture_reads(tmp_path: Path) -> None:
    """tests/data/samples/swapin.jsonl (what the schema test shows the pane) is this fixture's
    reading, so the documented fields are the ones these files produce."""
    proc, sys = trees(tmp_path)
    info = read_swapinfo(proc, sys)
    sample = [from_json(json.loads(line)) for line in SAMPLE.read_text().splitlines() if line.strip()]
    got = [r for r in sample if isinstance(r, SwapInfo)]
    assert got and got[0].zram == info.zram and got[0].zswap_debug == info.zswap_debug


def _doc(info: SwapInfo, zswapped_bytes: int) -> tuple[State, dict[str, object]]:
    state = State(mode="procfs")
    mem = MemInfo(
        total_bytes=24 << 30,
        free_bytes=20 << 30,
        available_bytes=22 << 30,
        buffers_bytes=0,
        cached_bytes=1 << 30,
        swap_total_bytes=5 << 30,
        swap_free_bytes=(5 << 30) - 300 * MiB,
        zswap_bytes=30 * MiB,
        zswapped_bytes=zswapped_bytes,
    )
    state.apply(Batch(1, (ProbeStatus("swapinfo", "attached"), ProbeStatus("swapin", "attached"), mem, info)))
    return state, dict(get_view("swapin").document(state, Options()))


def test_swap_in_ram_is_told_apart_from_swap_on_disk(tmp_path: Path) -> None:
    proc, sys = trees(tmp_path)
    info = read_swapinfo(proc, sys)
    state, doc = _doc(info, 100 * MiB)
    system = doc["system"]
    assert isinstance(system, dict)
    # 100 MiB in zswap (meminfo, the header's own reading) + 100 MiB used on /dev/zram0
    assert system["swap_used_bytes"] == 300 * MiB
    assert system["swap_compressed_bytes"] == 200 * MiB
    assert system["swap_on_disk_bytes"] == 100 * MiB
    z = system["zswap"]
    assert z["ratio"] == pytest.approx(100 / 30, abs=0.001)
    assert (z["stored_pages"], z["pool_total_size_bytes"], z["written_back_pages"]) == (25600, 31457280, 512)
    assert z["rejected"]["reject_compress_poor"] == 40 and "stored_pages" not in z["rejected"]
    assert (z["compressor"], z["max_pool_percent"], z["shrinker_enabled"]) == ("zstd", 20, False)
    zram = system["zram"][0]
    assert (zram["ratio"], zram["mem_limit_bytes"], zram["bd_writes_pages"]) == (4.0, None, 10)
    text = "\n".join(system_text(cast(SystemLine, system)))
    assert "ratio 3.3" in text and "written back 512" in text and "zram0 lz4" in text
    assert "compressed in RAM" in text
    # the header says how much of the swap figure is compressed in RAM, not on disk
    rest = "".join(s.text for s in header_line(state).rest)
    assert "compressed)" in rest and "compressed)" in summary_line(state)


def test_without_debugfs_the_counters_are_null_and_the_line_says_why(tmp_path: Path) -> None:
    proc, sys = trees(tmp_path, debugfs=False)
    info = read_swapinfo(proc, sys)
    assert info.zswap_debug == () and info.debugfs == ""
    _, doc = _doc(info, 100 * MiB)
    system = doc["system"]
    assert isinstance(system, dict)
    z = system["zswap"]
    assert z["stored_pages"] is None and z["rejected"] is None and z["debugfs"] is None
    assert z["stored_bytes"] == 100 * MiB  # meminfo is still read
    assert "mount debugfs" in "\n".join(system_text(cast(SystemLine, system)))


def test_no_compressed_swap_says_nothing_of_it(tmp_path: Path) -> None:
    info = SwapInfo(devices=(("/swapfile", "file", 1 << 30, 100 * MiB, -2),))
    state, doc = _doc(info, 0)
    system = doc["system"]
    assert isinstance(system, dict)
    assert system["zswap"] is None and system["zram"] == [] and system["swap_compressed_bytes"] == 0
    assert "compressed" not in "".join(s.text for s in header_line(state).rest)


def test_a_fifo_where_mm_stat_is_does_not_block(tmp_path: Path) -> None:
    sys = tmp_path / "sys"
    shutil.copytree(FIXTURE / "sys", sys)
    (sys / "block" / "zram0" / "mm_stat").unlink()
    os.mkfifo(sys / "block" / "zram0" / "mm_stat")
    (zram,) = kernelfs.read_zram(str(sys))
    assert "orig_data_size" not in zram.stats and zram.stats["bd_count"] == 10


def test_columns_a_kernel_does_not_print_are_left_out() -> None:
    # a 4.x kernel's mm_stat has seven columns; io_stat of some kernels three
    assert kernelfs.parse_columns("1 2 3 4 5 6 7\n", kernelfs.ZRAM_MM_STAT) == dict(
        zip(kernelfs.ZRAM_MM_STAT[:7], range(1, 8), strict=True)
    )
    assert kernelfs.parse_columns("1 x 3", kernelfs.ZRAM_IO_STAT) == {"failed_reads": 1, "invalid_io": 3}
    assert kernelfs.selected_algorithm("lzo [zstd]\n") == "zstd"
    assert kernelfs.selected_algorithm("lz4\n") == "lz4"
    assert (
        kernelfs.debugfs_mount("22 1 0:21 / /sys/kernel/debug rw - debugfs debugfs rw\n")
        == "/sys/kernel/debug"
    )
    assert kernelfs.debugfs_mount("22 1 0:21 / /proc rw - proc proc rw\n") is None


def test_v2_memory_stat_zswap_keys() -> None:
    r = cgroupfs.read_memory(2, str(FIXTURE / "cgroup2"))
    assert r.stat["zswap"] == 30 * MiB and r.stat["zswapped"] == 100 * MiB
    assert (r.stat["zswpin"], r.stat["zswpout"], r.stat["zswpwb"]) == (1200, 25600, 512)
    assert r.usage_bytes == 300 * MiB and r.limit_bytes == 400 * MiB


def test_swap_pss_from_smaps_rollup() -> None:
    text = "Rss:  1024 kB\nPss:  512 kB\nSwap:  2048 kB\nSwapPss:  1024 kB\n"
    roll = parse_rollup(text)
    assert roll is not None and (roll.swap_bytes, roll.swap_pss_bytes) == (2 << 20, 1 << 20)
    old = parse_rollup("Rss:  1024 kB\nSwap:  0 kB\n")
    assert old is not None and old.swap_pss_bytes is None


def test_exporter_series_with_node_exporters_names(tmp_path: Path) -> None:
    from memtop.export.metrics import Accumulators, families
    from memtop.export.metrics import Options as ExportOptions

    proc, sys = trees(tmp_path)
    state, _ = _doc(read_swapinfo(proc, sys), 100 * MiB)
    state.apply(Batch(2, (ProbeStatus("procfs", "attached"),)))
    fams = {f.name: f for f in families(state, ExportOptions(), Accumulators())}
    assert fams["node_memory_Zswap_bytes"].samples[0].value == 30 * MiB
    assert fams["node_memory_Zswapped_bytes"].samples[0].value == 100 * MiB
    assert fams["memtop_zswap_stored_pages"].samples[0].value == 25600
    assert fams["memtop_zswap_written_back_pages"].type == "counter"
    rejected = {
        s.labels["reason"]: s.value
        for s in fams["memtop_zswap_rejected_pages"].samples
        if s.name.endswith("_total")
    }
    assert rejected["compress_poor"] == 40
    assert {s.labels["device"]: s.value for s in fams["memtop_zram_orig_data_bytes"].samples} == {
        "zram0": 100 * MiB
    }
    # not measuring: absent, never 0
    state.apply(Batch(3, (ProbeStatus("swapinfo", "failed"), ProbeStatus("procfs", "erroring"))))
    names = {f.name for f in families(state, ExportOptions(), Accumulators())}
    assert not {n for n in names if "zswap" in n.lower() or "zram" in n}


def test_without_debugfs_the_zswap_counters_are_absent(tmp_path: Path) -> None:
    from memtop.export.metrics import Accumulators, families
    from memtop.export.metrics import Options as ExportOptions

    proc, sys = trees(tmp_path, debugfs=False)
    state, _ = _doc(read_swapinfo(proc, sys), 100 * MiB)
    names = {f.name for f in families(state, ExportOptions(), Accumulators())}
    assert "memtop_zswap_enabled" in names and "memtop_zswap_stored_pages" not in names


def test_doctor_says_what_the_needed_figures_can_use(tmp_path: Path) -> None:
    from memtop.headless.doctor import needed_checks

    proc, _ = trees(tmp_path)
    sys = tmp_path / "sys"
    shutil.copytree(FIXTURE / "sys", sys)
    (sys / "kernel" / "mm" / "lru_gen").mkdir(parents=True)
    (sys / "kernel" / "mm" / "lru_gen" / "enabled").write_text("0x0007\n")
    kd = sys / "kernel" / "mm" / "damon" / "admin" / "kdamonds"
    (kd / "0" / "contexts" / "0").mkdir(parents=True)
    (kd / "nr_kdamonds").write_text("1\n")
    (kd / "0" / "state").write_text("on\n")
    (kd / "0" / "contexts" / "0" / "operations").write_text("paddr\n")
    (kd / "0" / "contexts" / "0" / "avail_operations").write_text("paddr\n")
    checks = {c.name: c for c in needed_checks(1, str(sys), str(proc))}
    # MGLRU on, but the fixture's debugfs has no lru_gen (tests/unit/test_lru_gen.py: one that has)
    mglru = checks["MGLRU"]
    assert not mglru.ok and "on; " in mglru.detail and "not readable" in mglru.detail
    assert not checks["idle page tracking"].ok
    damon = checks["DAMON"]
    assert not damon.ok and "1 kdamond(s): on paddr" in damon.detail and "creates none" in damon.hint
    assert checks["zswap"].ok and "debugfs counters at" in checks["zswap"].detail
    assert checks["zram"].detail == "zram0 lz4"
    assert not checks["per-cgroup zswap"].ok and all(not c.required for c in checks.values())


def test_v2_zswap_keys_through_the_cgroups_probe_into_the_view(tmp_path: Path) -> None:
    """A v2 tree (the fixture's memory.stat, as cgroup-v2.rst prints it) read by the cgroups probe:
    the zswap keys reach the row's stat, and the needed estimate its detail."""
    from memtop.probes.cgroups import CgroupsProbe

    root = tmp_path / "cg"
    app = root / "app"
    app.mkdir(parents=True)
    for d in (root, app):
        shutil.copy(FIXTURE / "cgroup2" / "memory.stat", d / "memory.stat")
        (d / "cgroup.procs").write_text("")
    (root / "cgroup.controllers").write_text("memory\n")
    (app / "memory.current").write_text(str(300 * MiB) + "\n")
    (app / "memory.max").write_text(str(400 * MiB) + "\n")
    probe = CgroupsProbe()
    h = cgroupfs.Hierarchy(str(root), 2, ("memory",))
    probe.layout = cgroupfs.Layout("v2", (h,), h, h, True)
    state = State(mode="bpf")
    state.apply(Batch(1, (ProbeStatus("cgroups", "attached"), *probe.poll())))
    doc = get_view("cgroups").document(state, Options(extra={"cgroup": "/app"}))
    row = next(r for r in doc["rows"] if r["path"] == "/app")
    assert row["stat"]["zswapped"] == 100 * MiB and row["stat"]["zswpwb"] == 512
    need = doc["detail"]["needed"]
    # anon 200 MiB + active file 25 MiB; one reading so far: no rates, nothing refaulting
    assert need["needed_bytes"] == 225 * MiB and need["cold_bytes"] == 25 * MiB
    assert need["measured_s"] == 0 and need["refault_anon_bytes_per_s"] is None and not need["thrashing"]
