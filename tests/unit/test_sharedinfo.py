"""The sharedinfo probe on fixture trees (files this machine cannot be made to show: a kernel
without System V IPC, a FIFO or a symlink where /proc has a file), its parsers, and the Shared
state's bounds. The real kernel's figures are tests/kernel/test_shared_kernel.py's."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from memtop.probes.shared import SharedinfoProbe, parse_sysvipc_shm, tmpfs_mounts
from memtop.records import Batch
from memtop.records.shared import HugePools, SharedCall, SharedProc, SharedScan, ShmSegment, ShmTable
from memtop.state import State
from memtop.state.shared import MAX_CALLERS, SharedState
from memtop.views import Options, get_view

HEADER = (
    "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid"
    "      atime      dtime      ctime                   rss                  swap\n"
)


def row(key: int, shmid: int, size: int, cpid: int, nattch: int, rss: int) -> str:
    return (
        f"{key:10d} {shmid:10d}  1600 {size:21d} {cpid:5d} {cpid:5d} {nattch:6d}     0     0     0     0"
        f" 1700000000          0 1700000000 {rss:21d}                     0\n"
    )


def fake_proc(tmp_path: Path, shm: str | None) -> Path:
    proc = tmp_path / "proc"
    (proc / "sysvipc").mkdir(parents=True)
    (proc / "self").mkdir()
    (proc / "self" / "mountinfo").write_text("")
    (proc / "meminfo").write_text("Shmem:  10240 kB\nHugetlb: 4096 kB\nAnonHugePages: 2048 kB\n")
    if shm is not None:
        (proc / "sysvipc" / "shm").write_text(shm)
    return proc


def fake_sys(tmp_path: Path) -> Path:
    sys_root = tmp_path / "sys"
    pool = sys_root / "kernel" / "mm" / "hugepages" / "hugepages-2048kB"
    pool.mkdir(parents=True)
    for name, v in (
        ("nr_hugepages", 8),
        ("free_hugepages", 5),
        ("resv_hugepages", 1),
        ("surplus_hugepages", 0),
    ):
        (pool / name).write_text(f"{v}\n")
    thp = sys_root / "kernel" / "mm" / "transparent_hugepage"
    thp.mkdir(parents=True)
    (thp / "enabled").write_text("always [madvise] never\n")
    return sys_root


def test_parse_sysvipc_shm_by_its_header() -> None:
    text = HEADER + row(1234, 7, 1 << 20, 42, 0, 4096) + "garbage line\n" + row(0, 8, 4096, 43, 2, 0)
    rows = parse_sysvipc_shm(text)
    assert [(r["key"], r["shmid"], r["size"], r["nattch"], r["rss"]) for r in rows] == [
        (1234, 7, 1 << 20, 0, 4096),
        (0, 8, 4096, 2, 0),
    ]
    assert rows[0]["perms"] == 0o1600
    assert parse_sysvipc_shm("") == []


def test_segments_pools_and_orphans_from_a_tree(tmp_path: Path) -> None:
    proc = fake_proc(
        tmp_path, HEADER + row(99, 3, 2 << 20, 4242, 0, 2 << 20) + row(98, 4, 1 << 20, 4243, 1, 0)
    )
    probe = SharedinfoProbe(str(proc), str(fake_sys(tmp_path)), scan_every=1, scan_budget=1.0)
    probe.load()
    state = State(mode="procfs")
    state.apply(Batch(1, tuple(probe.poll())))
    doc = get_view("shared").document(state, Options())
    rows = {r["shmid"]: r for r in doc["rows"]}
    assert rows[3]["orphan"] and not rows[4]["orphan"]
    assert rows[3]["creator"] == "4242 (gone)"  # no such process in the tree: said, not invented
    assert doc["sysv"]["orphans"] == 1 and doc["sysv"]["orphan_rss_bytes"] == 2 << 20
    pool = doc["huge"]["pools"][0]
    assert (pool["page_size_bytes"], pool["total"], pool["free"], pool["reserved"], pool["used"]) == (
        2 << 20,
        8,
        5,
        1,
        3,
    )
    assert doc["huge"]["thp_enabled"] == "madvise" and doc["huge"]["hugetlb_bytes"] == 4 << 20
    # the segment removed: gone from the table on the next poll
    (proc / "sysvipc" / "shm").write_text(HEADER + row(98, 4, 1 << 20, 4243, 1, 0))
    state.apply(Batch(2, tuple(probe.poll())))
    assert [r["shmid"] for r in get_view("shared").document(state, Options())["rows"]] == [4]
    assert state.get(SharedState).removed == 1


def test_no_sysvipc_is_said_not_zero(tmp_path: Path) -> None:
    probe = SharedinfoProbe(str(fake_proc(tmp_path, None)), str(fake_sys(tmp_path)))
    state = State(mode="procfs")
    state.apply(Batch(1, tuple(probe.poll())))
    doc = get_view("shared").document(state, Options())
    assert doc["sysv"]["readable"] is False and "sysvipc/shm cannot be read" in doc["sysv"]["why"]
    text = get_view("shared").text(state, Options())
    assert "System V segments not read" in text


def test_a_fifo_or_symlink_where_a_file_is_expected_is_not_read(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, None)
    os.mkfifo(proc / "sysvipc" / "shm")  # nobody writes it: opening it for reading would block
    pid = proc / "4242"
    pid.mkdir()
    (pid / "status").write_text("Name:\tvictim\nUid:\t0\t0\t0\t0\nRssShmem:\t1024 kB\n")
    secret = tmp_path / "secret-maps"
    secret.write_text("7f0000000000-7f0000100000 rw-s 00000000 00:01 77     /SYSV00000063 (deleted)\n")
    (pid / "maps").symlink_to(secret)
    (pid / "fd").mkdir()
    probe = SharedinfoProbe(str(proc), str(fake_sys(tmp_path)), scan_every=1, scan_budget=1.0)
    done: list[object] = []
    t = threading.Thread(target=lambda: done.append(probe.poll()), daemon=True)
    t.start()
    t.join(10)
    assert done, "the probe blocked on a FIFO"
    recs = done[0]
    assert isinstance(recs, list)
    table = next(r for r in recs if isinstance(r, ShmTable))
    assert table.readable is False
    proc_rec = next(r for r in recs if isinstance(r, SharedProc))
    assert proc_rec.pid == 4242 and proc_rec.sysv == ()  # the symlinked maps was not followed


def test_tmpfs_mounts_from_mountinfo() -> None:
    info = (
        "25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw\n"
        "26 24 0:24 / /run/user/1000 rw - tmpfs tmpfs rw\n"
        "27 24 0:25 / /mnt/with\\040space rw - tmpfs tmpfs rw\n"
        "28 24 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "30 25 0:27 / /dev/shm rw,relatime - tmpfs tmpfs rw\n"
    )
    assert tmpfs_mounts(info) == ["/run/user/1000", "/mnt/with space", "/dev/shm"]


def test_tmpfs_walk_is_bounded_and_follows_no_symlink(tmp_path: Path) -> None:
    top = tmp_path / "shm"
    (top / "sub").mkdir(parents=True)
    (top / "a").write_bytes(b"x" * 8192)
    (top / "sub" / "b").write_bytes(b"y" * 4096)
    big = tmp_path / "outside"
    big.write_bytes(b"z" * 65536)
    (top / "link").symlink_to(big)
    probe = SharedinfoProbe(str(tmp_path), str(tmp_path))
    files, seen, truncated = probe._walk(str(top), os.lstat(top).st_dev)
    assert sorted((p, size) for p, _uid, size, _alloc in files) == [("a", 8192), ("sub/b", 4096)]
    assert seen == 4 and not truncated
    probe.max_files = 2
    files, seen, truncated = probe._walk(str(top), os.lstat(top).st_dev)
    assert truncated and seen == 2


def test_callers_are_bounded_and_shmem_breakdown_never_negative() -> None:
    state = State(mode="bpf")
    calls = tuple(
        SharedCall(ts_ns=i, pid=i, tid=i, comm="c", call="shmget", result=1, key=1, size_bytes=1, flags=0)
        for i in range(MAX_CALLERS + 10)
    )
    state.apply(Batch(1, calls))
    st = state.get(SharedState)
    assert len(st.callers) == MAX_CALLERS and 0 not in st.callers and MAX_CALLERS + 9 in st.callers
    assert len(st.events) == 1000 and st.calls_total == MAX_CALLERS + 10
    seg = ShmSegment(
        shmid=1, key=1, perms=0o600, size_bytes=1 << 30, cpid=1, lpid=1, nattch=0, uid=0, gid=0, cuid=0,
        cgid=0, atime_s=0, dtime_s=0, ctime_s=0, rss_bytes=1 << 30, swap_bytes=0,
    )  # fmt: skip
    pools = HugePools(pools=(), shmem_bytes=1 << 20)
    state.apply(Batch(2, (seg, ShmTable((1,)), pools, SharedScan((), ()))))
    shmem = get_view("shared").document(state, Options())["shmem"]
    assert shmem["sysv_bytes"] == 1 << 30 and shmem["other_bytes"] == 0


def test_scans_space_out_to_stay_within_their_budget(tmp_path: Path) -> None:
    """A scan that took longer than the budget allows puts the next one that many ticks later
    (here: any scan at all, against a budget of nothing), while the segments and pools are
    still read every tick."""
    proc = fake_proc(tmp_path, HEADER + row(99, 3, 4096, 1, 0, 0))
    probe = SharedinfoProbe(str(proc), str(fake_sys(tmp_path)), scan_every=1, scan_budget=1e-12)
    first = probe.poll()
    assert any(isinstance(r, SharedScan) for r in first)
    second = probe.poll()
    assert not any(isinstance(r, SharedScan) for r in second)
    assert any(isinstance(r, ShmTable) for r in second)
    probe.scan_budget = 1.0
    probe._next_scan = 0  # the budget raised: the next tick scans again
    assert any(isinstance(r, SharedScan) for r in probe.poll())


def test_a_tmpfs_mounted_at_a_path_that_is_not_utf8_is_scanned(tmp_path: Path) -> None:
    """A mount point and a file named with bytes that are not UTF-8 and escapes (anyone may name
    a file in /dev/shm): the mount is found and read, both shown escaped."""
    proc = fake_proc(tmp_path, None)
    top = os.fsencode(tmp_path) + b"/shm-\xff"
    os.mkdir(top)
    with open(top + b"/f\x1b]0;x\x07", "wb") as f:
        f.write(b"x" * 4096)
    (proc / "self" / "mountinfo").write_bytes(b"25 24 0:23 / " + top + b" rw,relatime - tmpfs tmpfs rw\n")
    probe = SharedinfoProbe(str(proc), str(tmp_path))
    mounts = probe._scan_tmpfs()
    assert [m.mount for m in mounts] == [f"{tmp_path}/shm-\\xff"]
    assert [f[0] for f in mounts[0].files] == ["f\\x1b]0;x\\x07"]
