"""Swap-in pane: counts and waits against the kernel's own accounting under real pressure, file
major faults told apart from swap-ins, and the pane's behaviour on a fake source."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from support import compile_c, memcg, proc_stat_faults, swapfile, zram_filesystem

from memtop.bridge import Bridge, now_ns
from memtop.probes.base import Probe
from memtop.probes.swapin import SwapinProbe, file_backed_at, parse_maps, read_swapinfo, region_file_backed
from memtop.records import Batch, Record, from_json, to_json
from memtop.records.swapin import SwapInfo, SwapinHistogram, SwapinProc
from memtop.records.system import VmStat
from memtop.state import State
from memtop.text import clean
from memtop.views import Options, get_view

MiB = 1 << 20


def within(value: int, expected: int, tol: float = 0.05) -> bool:
    return abs(value - expected) <= tol * max(expected, 1)


@pytest.fixture(scope="module")
def probe() -> Iterator[SwapinProbe]:
    p = SwapinProbe()
    p.load()
    try:
        yield p
    finally:
        p.close()


def snapshot(probe: SwapinProbe, state: State, pid: int | None = None) -> dict[str, Any]:
    state.apply(Batch(now_ns(), tuple(probe.poll())))
    return get_view("swapin").document(state, Options(pid=pid))


class Workload:
    """A test workload started paused ("ready PID"), released with a line on stdin, finished when
    it prints "done", kept alive until closed so its /proc counters can be read."""

    def __init__(self, *cmd: str) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().startswith("ready")
        self.pid = self.proc.pid

    def run(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.startswith("done"), f"workload failed: {line!r} rc={self.proc.poll()}"

    def close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write("bye\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.mark.bpf
def test_swapins_match_kernel_major_faults(probe: SwapinProbe) -> None:
    """memcg 100 MiB + swap; fill 300 MiB, read it all back: memtop's swap-ins for the pid are
    within 5 % of its majflt delta and of the cgroup's pgmajfault; waits are real; the pid's
    histogram holds every swap-in."""
    exe = compile_c("swapfill")
    state = State(mode="bpf")
    with swapfile(), memcg(100 * MiB) as cg:
        w = Workload(str(exe), "300")
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


def cold_file_faults(probe: SwapinProbe, directory: Path) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """Read a 32 MiB file in ``directory`` through a cold mapping, one major fault per page:
    (the workload's swap-in pane row, the kernel's majflt for it, where the faults went)."""
    exe = compile_c("coldmap")
    path = directory / f"memtop-test-cold-{os.getpid()}"
    with open(path, "wb") as f:
        f.write(os.urandom(32 * MiB))
    state = State(mode="bpf")
    try:
        w = Workload(str(exe), str(path))  # it fdatasyncs and drops the file's pages first
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
            pytest.skip("no zram-control or mkfs.ext4 on this machine")
        row, majflt, why = cold_file_faults(probe, mnt)
    assert probe.bpf is not None
    raw = probe.bpf["stats"][probe.bpf["stats"].Key(row["pid"])]
    assert raw.swapins_nowait >= 0.9 * majflt, (raw.swapins_nowait, majflt)  # the path under test
    assert row["swapins_nowait"] == 0, why  # every no-wait fault was classified
    assert within(row["file_major_faults"], majflt, 0.01), (why, majflt)
    assert row["swapins"] <= 0.01 * majflt, (why, majflt)
    assert why["lost"].get(("swapin", "unclassified no-wait faults"), 0) == 0, why


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


# -- the pane on a fake source ---------------------------------------------------------------------


class FakeSwapin(Probe):
    """Replays scripted records: one list per poll."""

    name = "swapin"
    needs_bpf = False
    cadence_s = 0.0
    script: ClassVar[list[list[Record]]] = []

    def __init__(self) -> None:
        self.i = 0

    def load(self) -> None:
        pass

    def poll(self) -> list[Record]:
        if self.i < len(self.script):
            recs = self.script[self.i]
        else:  # like the real probe: unchanged rows are not sent again
            recs = [r for r in self.script[-1] if not isinstance(r, SwapinProc)] if self.script else []
        self.i += 1
        return list(recs)


def _proc(pid: int, comm: str, n: int, wait: int, wmax: int, files: int = 0) -> SwapinProc:
    return SwapinProc(
        pid=pid,
        comm=comm,
        swapins=n,
        swapin_wait_ns=wait,
        swapin_wait_max_ns=wmax,
        file_major_faults=files,
        swapin_hist=((10, n),) if n else (),
    )


def _script() -> list[list[Record]]:
    hist = SwapinHistogram(swapin_counts=tuple([0] * 10 + [350]), file_counts=(0, 0, 7))
    info = SwapInfo(devices=(("/dev/vdb", "partition", 1 << 30, 1 << 20, -2),))
    vm1 = VmStat(counters=(("pswpin", 1000), ("pswpout", 5000)))
    vm2 = VmStat(counters=(("pswpin", 1400), ("pswpout", 5100)))
    evil = clean("[bold red]x\x1b[2J")  # as the probe hands it over
    first: list[Record] = [
        _proc(11, "alpha", 100, 10**6, 10**5),
        _proc(22, evil, 50, 9 * 10**6, 8 * 10**6, 7),
        hist,
        info,
        vm1,
    ]
    second: list[Record] = [_proc(11, "alpha", 300, 3 * 10**6, 10**5), hist, info, vm2]
    return [first, second]


async def test_pane_sorts_drills_in_and_shows_system_line() -> None:
    from textual.widgets import DataTable, Static

    from memtop.ui.app import MemtopApp
    from memtop.ui.panes.base import DrillIn
    from memtop.ui.panes.swapin import SwapinPane

    FakeSwapin.script = _script()
    fake = FakeSwapin()
    source = Bridge([fake])
    app = MemtopApp(source, initial_pane="swapin")
    drilled: list[int] = []
    async with app.run_test(size=(170, 45)) as pilot:
        await pilot.pause(0.3)
        fake.i = 0  # the app's own ticks polled it meanwhile: replay the script from the start
        for _ in range(2):
            source.publish(source.poll_sync(force=True))
            time.sleep(0.01)
        rate = {r["pid"]: r for r in get_view("swapin").document(app.state, Options())["rows"]}[11][
            "swapins_per_s"
        ]
        assert rate > 0  # 200 more between the two polls
        assert get_view("swapin").document(app.state, Options())["system"]["pswpin_per_s"] > 0
        app.redraw()
        await pilot.pause(0.1)
        table = app.query_one("#swapin-table", DataTable)
        keys = [str(r.key.value) for r in table.ordered_rows]
        assert keys == ["22", "11"]  # by total wait, descending
        # untrusted comm shown as plain text, never as markup
        cell = table.get_row("22")[1]
        assert str(cell) == "[bold red]x\\x1b[2J"
        await pilot.press("S")  # by swap-ins
        assert [str(r.key.value) for r in table.ordered_rows] == ["11", "22"]
        await pilot.press("r")
        assert [str(r.key.value) for r in table.ordered_rows] == ["22", "11"]
        system = str(app.query_one("#swapin-system", Static).render())
        assert "/dev/vdb" in system and "pswpin" in system
        hist = str(app.query_one("#swapin-hist", Static).render())
        assert "350" in hist
        pane = app.query_one(SwapinPane)
        orig = pane.post_message

        def capture(msg: Any) -> bool:
            if isinstance(msg, DrillIn):
                drilled.append(msg.pid)
                return True
            return orig(msg)

        pane.post_message = capture  # type: ignore[method-assign]
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("enter")
        await pilot.pause(0.1)
        app.paused = True  # no redraw from a timer tick while the app tears down
    assert drilled == [22]
    doc = get_view("swapin").document(app.state, Options())
    row = {r["pid"]: r for r in doc["rows"]}[11]
    assert row["swapins"] == 300 and row["wait_ns_total"] == 3 * 10**6
    assert set(doc) >= {"pane", "rows", "histogram"} and doc["pane"] == "swapin"
    assert set(row) >= {"pid", "comm", "swapins", "wait_ns_total", "wait_ns_max", "file_major_faults"}
    assert doc["histogram"][-1] == {"le_ns": 2**11 - 1, "count": 350}
    txt = get_view("swapin").text(app.state, Options())
    assert "alpha" in txt and "/dev/vdb" in txt


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
