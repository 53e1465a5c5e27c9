"""The /proc poller on a fake /proc: a quiet process is read every few ticks, everything on a
reclaim tick, a followed process every tick, an exited one leaves at once, a kernel thread is read
once, and a pid that is another process's now (its directory another inode) is read at once."""

from __future__ import annotations

import shutil
from pathlib import Path

from fakeproc import add_proc, make_fake_proc

from memtop.probes.procfs import QUIET_AFTER, ProcfsProbe
from memtop.records.processes import ProcSample


def samples(probe: ProcfsProbe) -> dict[int, ProcSample]:
    return {r.pid: r for r in probe.poll() if isinstance(r, ProcSample)}


def quiet_probe(tmp_path: Path, every: int = 4) -> tuple[Path, ProcfsProbe]:
    root = make_fake_proc(tmp_path / "proc")
    probe = ProcfsProbe(root, quiet_every=every)
    probe.load()
    for _ in range(QUIET_AFTER + 1):  # every process's stat stays the same: all become quiet
        samples(probe)
    return root, probe


def test_quiet_process_is_read_every_nth_tick_and_its_change_shows_within_n(tmp_path: Path) -> None:
    root, probe = quiet_probe(tmp_path)
    reads = []
    for _ in range(8):
        samples(probe)
        reads.append(probe.last_reads)
    # 4 pids: the three processes each read on one tick in four, the kernel thread not again
    assert sum(reads) == 2 * 3, reads
    assert max(reads) < 4
    # alpha (pid 101) runs: its faults move; the poller shows it within quiet_every ticks
    add_proc(root, 101, "alpha", (9000, 500, 0), 0, 5000, 0)
    seen_after = None
    for tick in range(1, 5):
        if samples(probe)[101].minor_faults == 5000:
            seen_after = tick
            break
    assert seen_after is not None, "a quiet process's change never showed"
    # once it changed it is busy again: read every tick
    add_proc(root, 101, "alpha", (9100, 500, 0), 0, 5100, 0)
    assert samples(probe)[101].minor_faults == 5100
    assert samples(probe)[101].rss_anon_bytes == 9100 * 1024


def test_reclaim_tick_reads_every_process(tmp_path: Path) -> None:
    root, probe = quiet_probe(tmp_path)
    samples(probe)
    # charlie's pages are swapped out while it sleeps; vmstat shows the kernel reclaimed
    add_proc(root, 303, "charlie", (2000, 100, 0), 6512, 300, 1, uid=65534)
    (root / "vmstat").write_text("pgfault 1000\npgmajfault 10\npswpin 5\npswpout 1507\npgscan_kswapd 900\n")
    got = samples(probe)
    assert probe.last_reads == 3  # every process (a kernel thread has no pages to lose)
    assert got[303].swap_bytes == 6512 * 1024 and got[303].rss_anon_bytes == 2000 * 1024
    samples(probe)  # no further reclaim: back to skipping
    assert probe.last_reads < 3


def test_followed_process_is_read_every_tick(tmp_path: Path) -> None:
    root, probe = quiet_probe(tmp_path)
    probe.follow(202)
    for n in range(1, 5):
        add_proc(root, 202, "bravo", (50000 + n, 2000, 100), 2048, 20000 + n, 5)
        assert samples(probe)[202].minor_faults == 20000 + n


def test_exited_process_leaves_at_once_even_when_quiet(tmp_path: Path) -> None:
    import shutil

    root, probe = quiet_probe(tmp_path)
    shutil.rmtree(root / "303")
    assert 303 not in samples(probe)


def replace_dir(root: Path, pid: int, comm: str, cmdline: bytes) -> None:
    """Pid ``pid`` is another process's now: its directory replaced by another (a new inode: the
    kernel's /proc gives each process's directory its own), as when a pid is reused between two
    listings."""
    scratch = 999_999
    add_proc(root, scratch, comm, (700, 10, 0), 0, 20000, 5, cmdline=cmdline)
    old = root / str(pid)
    shutil.rmtree(old)
    (root / str(scratch)).rename(old)
    stat = old / "stat"
    stat.write_text(stat.read_text().replace(f"{scratch} ", f"{pid} ", 1))


def test_a_reused_pid_is_read_at_once_however_quiet_and_keeps_nothing_of_the_old(tmp_path: Path) -> None:
    root, probe = quiet_probe(tmp_path)
    for _ in range(8):
        samples(probe)
    assert samples(probe)[202].cmdline == "bravo --big"
    read: list[int] = []
    read_pid = probe.read_pid

    def counting(pid: int) -> ProcSample | None:
        read.append(pid)
        return read_pid(pid)

    probe.read_pid = counting  # type: ignore[method-assign]
    # bravo (quiet: read one tick in four) exits and pid 202 is delta's: read on the next tick
    replace_dir(root, 202, "delta", b"delta\0-x\0")
    got = samples(probe)[202]
    assert 202 in read
    assert (got.comm, got.cmdline, got.rss_anon_bytes) == ("delta", "delta -x", 700 * 1024)
    # the kernel thread was read once, never since; pid 2 another process's: read at once
    read.clear()
    for _ in range(4):
        samples(probe)
    assert 2 not in read
    replace_dir(root, 2, "echo", b"echo\0")
    got = samples(probe)[2]
    assert 2 in read and got.comm == "echo"
