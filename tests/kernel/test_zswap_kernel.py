"""zswap under real pressure: memtop's pool, stored bytes, stored pages and pool size against the
kernel's own (/proc/meminfo, debugfs), and the swap figure's compressed part against Zswapped.

zswap is switched on for the test and back to what it was after; debugfs, when it is not mounted,
is mounted for the test on a directory of its own (memtop finds it through mountinfo, wherever it
is) and unmounted after."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import PausedWorkload, between, bracket, compile_c, memcg, swapfile

from memtop.linux import kernelfs
from memtop.probes.procfs import ProcfsProbe
from memtop.probes.swapin import SwapinfoProbe
from memtop.records import Batch, ProbeStatus
from memtop.records.swapin import SwapInfo
from memtop.state import State
from memtop.stream.bridge import now_ns
from memtop.views import Options, get_view

MiB = 1 << 20
ZSWAP_ENABLED = Path("/sys/module/zswap/parameters/enabled")


@pytest.fixture
def zswap_on() -> Iterator[None]:
    if not ZSWAP_ENABLED.exists():
        pytest.skip("this kernel has no zswap")
    old = ZSWAP_ENABLED.read_text().strip()
    ZSWAP_ENABLED.write_text("Y")
    try:
        yield
    finally:
        ZSWAP_ENABLED.write_text(old)


@pytest.fixture
def debugfs() -> Iterator[Path]:
    mounted = kernelfs.debugfs_mount(Path("/proc/self/mountinfo").read_text())
    if mounted:
        yield Path(mounted)
        return
    where = Path(tempfile.mkdtemp(prefix=f"memtop-needed-debugfs-{os.getpid()}-"))
    subprocess.run(["mount", "-t", "debugfs", "debugfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)
        where.rmdir()


def meminfo() -> tuple[int, int]:
    m = kernelfs.parse_meminfo(Path("/proc/meminfo").read_text())
    return m["Zswap"], m["Zswapped"]


def debug(where: Path) -> tuple[int, int]:
    d = where / "zswap"
    return int((d / "stored_pages").read_text()), int((d / "pool_total_size").read_text())


@pytest.mark.bpf
def test_zswap_figures_equal_the_kernels(zswap_on: None, debugfs: Path) -> None:
    exe = compile_c("swapfill")
    probe = SwapinfoProbe()
    probe.load()
    procfs = ProcfsProbe()
    state = State(mode="bpf")
    state.apply(Batch(now_ns(), (ProbeStatus("swapinfo", "attached"), ProbeStatus("procfs", "attached"))))
    with swapfile(), memcg(100 * MiB) as cg:
        w = PausedWorkload(str(exe), "300")
        try:
            cg.add(w.pid)
            w.run()  # 300 MiB through a 100 MiB limit: ~200 MiB swapped out, into zswap
            info: list[SwapInfo] = []

            def ours() -> SwapInfo:
                (rec,) = probe.poll()
                assert isinstance(rec, SwapInfo)
                info.append(rec)
                return rec

            k0, rec, k1 = bracket(lambda: (meminfo(), debug(debugfs)), ours)
            mem = procfs.meminfo()
            zswapped_after = meminfo()[1]
            assert mem is not None
            state.apply(Batch(now_ns(), (rec, mem)))
            doc = get_view("swapin").document(state, Options())
        finally:
            w.close()
    (pool0, stored0), (pages0, size0) = k0
    (pool1, stored1), (pages1, size1) = k1
    assert stored0 > 50 * MiB, f"zswap holds {stored0 >> 20} MiB: nothing swapped into it, test is void"
    assert between(rec.zswap_pool_bytes, pool0, pool1)
    assert between(rec.zswapped_bytes, stored0, stored1)
    found = dict(rec.zswap_debug)
    assert rec.debugfs == str(debugfs)
    assert between(found["stored_pages"], pages0, pages1)
    assert between(found["pool_total_size"], size0, size1)
    z = doc["system"]["zswap"]
    assert z["enabled"] is True and z["stored_pages"] == found["stored_pages"]
    assert z["pool_total_size_bytes"] == found["pool_total_size"]
    assert z["ratio"] > 1, f"compressed pool {z['pool_bytes']} not smaller than {z['stored_bytes']}"
    # the swap figure's compressed part is what zswap holds (no zram here), read with meminfo
    assert between(doc["system"]["swap_compressed_bytes"], stored1, zswapped_after)
    used = doc["system"]["swap_used_bytes"]
    assert doc["system"]["swap_on_disk_bytes"] == max(0, used - doc["system"]["swap_compressed_bytes"])
