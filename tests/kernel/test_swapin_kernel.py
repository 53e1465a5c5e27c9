"""Swap-in pane: counts and waits against the kernel's own accounting under real pressure, file
major faults told apart from swap-ins, kallsyms lookups on the running kernel."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from support import (
    PausedWorkload,
    compile_c,
    memcg,
    proc_stat_faults,
    swapfile,
    wait_until,
    within,
    zram_filesystem,
)

from memtop.probes.swapin import SwapinProbe
from memtop.records import Batch
from memtop.state import State
from memtop.stream.bridge import now_ns
from memtop.views import Options, get_view

MiB = 1 << 20


@pytest.fixture(scope="module")
def probe() -> Iterator[SwapinProbe]:
    p = SwapinProbe()
    p.load()
    try:
        yield p
    finally:
        p.close()


def snapshot(probe: SwapinProbe, state: State, pid: int | None = None) -> Mapping[str, Any]:
    state.apply(Batch(now_ns(), tuple(probe.poll())))
    return get_view("swapin").document(state, Options(pid=pid))


@pytest.mark.bpf
def test_swapins_match_kernel_major_faults(probe: SwapinProbe) -> None:
    """memcg 100 MiB + swap; fill 300 MiB, read it all back: memtop's swap-ins for the pid are
    within 5 % of its majflt delta and of the cgroup's pgmajfault; waits are real; the pid's
    histogram holds every swap-in."""
    exe = compile_c("swapfill")
    state = State(mode="bpf")
    with swapfile(), memcg(100 * MiB) as cg:
        w = PausedWorkload(str(exe), "300")
        try:
            cg.add(w.pid)
            before_cg = cg.stat()["pgmajfault"]
            before_maj = proc_stat_faults(w.pid)[1]
            w.run()
            majflt = proc_stat_faults(w.pid)[1] - before_maj
            cg_majflt = cg.stat()["pgmajfault"] - before_cg
            doc = snapshot(probe, state, pid=w.pid)
        finally:
            w.close()
    assert majflt > 1000, f"the workload did not swap (majflt {majflt}): no pressure, test is void"
    rows = {r["pid"]: r for r in doc["rows"]}
    assert w.pid in rows, f"no row for the workload: {doc['rows'][:5]}"
    row = rows[w.pid]
    assert row["comm"] == "swapfill"
    assert within(row["swapins"], majflt), (row, majflt)
    assert within(row["swapins"], cg_majflt), (row, cg_majflt)
    assert row["file_major_faults"] <= 0.05 * majflt
    assert row["wait_ns_total"] > 0 and 0 < row["wait_ns_max"] <= row["wait_ns_total"]
    assert sum(h["count"] for h in doc["histogram"]) == row["swapins"]
    # buckets are log2 and ordered; the mean wait lies within the histogram's span
    les = [h["le_ns"] for h in doc["histogram"]]
    assert les == sorted(les) and all(((le + 1) & le) == 0 for le in les)
    assert row["wait_ns_avg"] <= les[-1]
    # the system-wide histogram holds at least this process's swap-ins
    whole = get_view("swapin").document(state, Options())
    assert sum(h["count"] for h in whole["histogram"]) >= row["swapins"]


@pytest.mark.bpf
def test_swapins_after_polls_that_read_only_the_generation_are_counted_exactly(
    probe: SwapinProbe,
) -> None:
    """Polls that found the major-fault program's generation where it was hand back their last
    read and read no other map (bpf/common.h memtop_generation); then a workload swaps: the
    first poll after it has every one of its major faults (the kernel's majflt for it, exactly),
    its histogram holds each swap-in, and a read of every map finds nothing the polls missed."""
    exe = compile_c("swapfill")
    state = State(mode="bpf")
    skipped0 = probe.generation.skipped

    def idle_poll() -> bool:
        state.apply(Batch(now_ns(), tuple(probe.poll())))
        return probe.generation.skipped > skipped0

    with swapfile(), memcg(100 * MiB) as cg:
        w = PausedWorkload(str(exe), "200")
        try:
            cg.add(w.pid)
            # the machine's own major faults (other tests) may move the generation meanwhile
            wait_until(idle_poll, "a poll that read only the generation", 120)
            reads0 = probe.map_reads
            before_maj = proc_stat_faults(w.pid)[1]
            w.run()
            majflt = proc_stat_faults(w.pid)[1] - before_maj
            doc = snapshot(probe, state, pid=w.pid)
            assert probe.map_reads > reads0
            probe.generation.forget()  # every map read again: the same row
            again = snapshot(probe, state, pid=w.pid)
        finally:
            w.close()
    assert majflt > 1000, f"the workload did not swap (majflt {majflt}): no pressure, test is void"
    row = {r["pid"]: r for r in doc["rows"]}[w.pid]
    assert {r["pid"]: r for r in again["rows"]}[w.pid] == row
    print({"majflt": majflt, "swapins": row["swapins"], "file": row["file_major_faults"]})
    assert row["swapins"] + row["file_major_faults"] == majflt, (row, majflt)
    assert within(row["swapins"], majflt), (row, majflt)
    assert sum(h["count"] for h in doc["histogram"]) == row["swapins"]


def cold_file_faults(probe: SwapinProbe, directory: Path) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """Read a 32 MiB file in ``directory`` through a cold mapping, one major fault per page:
    (the workload's swap-in pane row, the kernel's majflt for it, where the faults went)."""
    exe = compile_c("coldmap")
    path = directory / f"memtop-test-cold-{os.getpid()}"
    with open(path, "wb") as f:
        f.write(os.urandom(32 * MiB))
    state = State(mode="bpf")
    try:
        w = PausedWorkload(str(exe), str(path))  # it fdatasyncs and drops the file's pages first
        try:
            before = proc_stat_faults(w.pid)[1]
            w.run()
            majflt = proc_stat_faults(w.pid)[1] - before
            doc = snapshot(probe, state, pid=w.pid)
        finally:
            w.close()
    finally:
        path.unlink(missing_ok=True)
    assert majflt > 1000, f"the mapping was not cold (majflt {majflt})"
    row = {r["pid"]: r for r in doc["rows"]}[w.pid]
    # on a miss, say where the faults went: classified as swap-ins, left unclassified, or lost
    why = {k: row.get(k) for k in ("file_major_faults", "swapins", "swapins_nowait")}
    why["lost"] = dict(getattr(state, "lost", {}))
    return row, majflt, why


@pytest.mark.bpf
def test_cold_file_mapping_is_file_major_faults(probe: SwapinProbe) -> None:
    """A file read through a cold mapping: file major faults (as many as the kernel's majflt),
    not swap-ins. /var/tmp, not /tmp: tmpfs pages are shmem and would swap."""
    row, majflt, why = cold_file_faults(probe, Path("/var/tmp"))
    assert within(row["file_major_faults"], majflt), (why, majflt)
    assert row["swapins"] <= 0.01 * majflt, row
    assert row["file_wait_ns_total"] > 0


@pytest.mark.bpf
def test_file_faults_that_never_block_are_file_major_faults(probe: SwapinProbe) -> None:
    """On a synchronous device (zram) a file major fault never sleeps: every one takes the
    no-wait path, classified by the address's mapping in user space. All 8,192 arrive between
    two polls (a fixed-size ring buffer used to drop two thirds of them as swap-ins)."""
    with zram_filesystem() as mnt:
        if mnt is None:
            pytest.skip("no zram-control in this kernel")
        row, majflt, why = cold_file_faults(probe, mnt)
    assert probe.bpf is not None
    raw = probe.bpf["stats"][probe.bpf["stats"].Key(row["pid"])]
    assert raw.swapins_nowait >= 0.9 * majflt, (raw.swapins_nowait, majflt)  # the path under test
    assert row["swapins_nowait"] == 0, why  # every no-wait fault was classified
    assert within(row["file_major_faults"], majflt, 0.01), (why, majflt)
    assert row["swapins"] <= 0.01 * majflt, (why, majflt)
    assert why["lost"].get(("swapin", "unclassified no-wait faults"), 0) == 0, why


@pytest.mark.bpf  # the running kernel's kallsyms shows addresses to root only
def test_kernel_text_ranges_match_a_full_parse(tmp_path: Path) -> None:
    """The targeted kallsyms lookup gives what parsing every line gives: on the running kernel's
    kallsyms (the swap-in symbols and 200 others) and on a file whose order it must not trust."""
    import random

    from memtop.probes.swapin import SYMBOLS, _text_ranges_full, kernel_text_ranges

    data = Path("/proc/kallsyms").read_bytes()
    text = [
        ln.split()[2].decode()
        for ln in data.splitlines()
        if len(ln.split()) == 3 and ln.split()[1] in b"tT" and int(ln.split()[0], 16)
    ]
    names = {n for group in SYMBOLS.values() for n in group} | set(random.Random(5).sample(text, 200))
    fast = kernel_text_ranges(names)
    assert fast == _text_ranges_full(names, data)
    assert len(fast) >= 150 and all(end > start for start, end in fast.values())
    # out of address order next to the symbol, a module symbol and a data symbol in between; a
    # data symbol of the same name and a longer name ending in it come first
    odd = tmp_path / "kallsyms"
    odd.write_bytes(
        b"ffffffff80000010 d alpha\nffffffff80000020 T x_alpha\nffffffff80000030 t gamma\t[mod]\n"
        b"ffffffff81000000 T alpha\nffffffff81000100 t beta_mod\t[mod]\n"
        b"ffffffff81000080 d some_data\nffffffff80000000 T gamma\nffffffff81000200 T delta\n"
    )
    got = kernel_text_ranges({"alpha", "gamma"}, odd)
    assert got == _text_ranges_full({"alpha", "gamma"}, odd.read_bytes())
    assert got["alpha"] == (0xFFFFFFFF81000000, 0xFFFFFFFF81000200)
