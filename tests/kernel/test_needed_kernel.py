"""A cgroup's needed memory against known answers, under real memcgs: 64 MiB of hot anonymous
memory beside 400 MiB of page cache read once (needed ≈ the hot set, the cache cold), and the
300 MiB-in-100 MiB swap storm (thrashing, needed over the limit). The kernel's own memory.stat is
the oracle for the hot file pages and the refaults."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support import LineReader, MemCgroup, compile_c, memcg, swapfile, wait_until

from memtop.probes.cgroups import CgroupsProbe
from memtop.records import Batch
from memtop.state import State
from memtop.stream.bridge import now_ns
from memtop.views import Options, get_view

MiB = 1 << 20


class Driven:
    """The cgroups probe polled synchronously into a State."""

    def __init__(self) -> None:
        self.probe = CgroupsProbe()
        self.probe.load()
        self.state = State(mode="bpf")

    def tick(self) -> None:
        self.state.apply(Batch(now_ns(), tuple(self.probe.poll())))

    def row(self, path: str) -> dict[str, Any]:
        doc = get_view("cgroups").document(self.state, Options(sort="path", extra={"cgroup": path}))
        row: dict[str, Any] = next(r for r in doc["rows"] if r["path"] == path)
        row["detail"] = doc["detail"]
        return row

    def close(self) -> None:
        self.probe.close()


@contextmanager
def driven() -> Iterator[Driven]:
    d = Driven()
    try:
        yield d
    finally:
        d.close()


@contextmanager
def hotset(cg: MemCgroup, total_mib: int, hot_mib: int, pause_us: int) -> Iterator[LineReader]:
    """tests/workloads/hotset.c in ``cg`` from its first page on (it joins before it execs)."""
    exe = compile_c("hotset")
    proc = subprocess.Popen(
        ["sh", "-c", f"echo $$ > {cg.path / 'cgroup.procs'} && exec {exe} {total_mib} {hot_mib} {pause_us}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines = LineReader(proc.stdout, "hotset")
    try:
        yield lines
    finally:
        proc.kill()
        proc.wait()


def stat(cg: MemCgroup) -> dict[str, int]:
    return cg.stat()


@pytest.mark.bpf
def test_hot_anon_is_needed_and_cache_read_once_is_cold() -> None:
    work = Path(tempfile.mkdtemp(prefix=f"memtop-needed-{os.getpid()}-", dir="/var/tmp"))
    try:
        data = work / "cache"
        with data.open("wb") as f:  # written outside the memcg, then dropped: read once inside
            chunk = os.urandom(MiB)
            for _ in range(400):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        with driven() as d, memcg(1024 * MiB) as cg, hotset(cg, 64, 64, 100_000) as lines:
            lines.wait_for("ready")
            subprocess.run(
                ["sh", "-c", f"echo $$ > {cg.path / 'cgroup.procs'} && exec dd if={data} of=/dev/null bs=1M"],
                check=True,
                capture_output=True,
            )
            d.tick()
            lines.lines_with("passes", 1)  # the hot set touched again since: its pages are in use
            d.tick()
            lines.lines_with("passes", 2)
            before = stat(cg)
            d.tick()
            row = d.row(f"/{cg.name}")
            after = stat(cg)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    active = min(before["total_active_file"], after["total_active_file"])
    inactive = after["total_inactive_file"]
    assert inactive >= 350 * MiB, f"the cache is not inactive ({inactive >> 20} MiB): test is void"
    expected = 64 * MiB + active
    need = row["detail"]["needed"]
    assert need is not None, row
    assert abs(row["needed_bytes"] - expected) <= 0.25 * expected, (
        row["needed_bytes"] >> 20,
        expected >> 20,
        need,
    )
    assert row["cold_bytes"] >= 350 * MiB, need
    assert row["thrashing"] is False
    assert need["inactive_file_bytes"] in (before["total_inactive_file"], after["total_inactive_file"])


@pytest.mark.bpf
def test_the_swap_storm_is_thrashing_with_needed_over_the_limit() -> None:
    with driven() as d, swapfile(), memcg(100 * MiB) as cg, hotset(cg, 300, 300, 0) as lines:
        lines.wait_for("ready", timeout_s=120)  # touching 300 MiB through 100 MiB takes a while
        path = f"/{cg.name}"
        d.tick()
        row: dict[str, Any] = {}
        for _ in range(15):
            seen = stat(cg)["total_workingset_refault_anon"]

            def read_back(seen: int = seen) -> bool:
                return stat(cg)["total_workingset_refault_anon"] - seen >= 10 * MiB // 4096

            # the storm's own pace: the next tick once 10 MiB more was read back from swap
            wait_until(read_back, "refaults in the storm")
            d.tick()
            row = d.row(path)
            if row["thrashing"]:
                break
    need = row["detail"]["needed"]
    assert row["thrashing"] is True, need
    assert row["needed_bytes"] > 100 * MiB, need
    assert need["refault_anon_bytes_per_s"] >= 1 << 20, need
