"""Shared pane against the kernel's own accounting.

A workload (tests/workloads/shmwork.c) creates System V segments, attaches, detaches and removes
one and leaves one orphaned: memtop's table equals /proc/sysvipc/shm, every call is in the event
log with its shmid and result, the orphan is marked. A /dev/shm file and memfds of known sizes
appear with their owners. A small hugetlb pool (vm.nr_hugepages, restored after) mapped with
MAP_HUGETLB: pool and per-process figures equal /sys, /proc/meminfo and smaps. A
madvise(MADV_HUGEPAGE) region: its AnonHugePages equals smaps_rollup's, thp_fault_alloc's delta
is bracketed by /proc/vmstat's, the call is in the log with its range. A compaction run: pages
migrated equal the pgmigrate_success delta (bracketed reads).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from support import compile_c, readable

from memtop.probes.procfs import ProcfsProbe
from memtop.probes.shared import SharedinfoProbe, SharedProbe, ShmSnoopProbe
from memtop.records import Batch, Lost, Record
from memtop.state import State
from memtop.stream.bridge import now_ns
from memtop.views import Options, get_view

MiB = 1 << 20
HUGE_2M = Path("/sys/kernel/mm/hugepages/hugepages-2048kB")
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
IPC_RMID = 0


class Work:
    """The shmwork workload: one command a line, one answer a line."""

    def __init__(self) -> None:
        exe = compile_c("shmwork")
        self.proc = subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.readline()
        assert line.startswith("ready")
        self.pid = self.proc.pid

    def readline(self) -> str:
        assert self.proc.stdout is not None
        assert readable(self.proc.stdout, 60), "the workload said nothing"
        return self.proc.stdout.readline().strip()

    def do(self, cmd: str) -> list[str]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        answer = self.readline()
        assert answer.startswith("ok"), f"{cmd!r}: {answer!r}"
        return answer.split()[1:]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def work() -> Iterator[Work]:
    w = Work()
    try:
        yield w
    finally:
        w.close()


class Driven:
    """The probes polled synchronously into one State (the bridge's order: /proc first)."""

    def __init__(self) -> None:
        self.info = SharedinfoProbe(scan_every=1, scan_budget=1.0)
        self.trace = SharedProbe()
        # the syscall tracepoints: attached while the pane is shown
        self.snoop = ShmSnoopProbe()
        self.procfs = ProcfsProbe()
        self.probes = [self.procfs, self.info, self.trace, self.snoop]
        self.state = State(mode="bpf")
        for p in self.probes:
            p.load()
        from memtop.records import ProbeStatus

        self.state.apply(Batch(now_ns(), tuple(ProbeStatus(p.name, "attached") for p in self.probes)))
        self.lost = 0

    def tick(self) -> None:
        recs: list[Record] = []
        for p in self.probes:
            recs += p.poll()
        self.lost = max(
            [self.lost] + [r.count for r in recs if isinstance(r, Lost) and r.probe in ("shared", "shmsnoop")]
        )
        self.state.apply(Batch(now_ns(), tuple(recs)))

    def doc(self) -> Mapping[str, Any]:
        return get_view("shared").document(self.state, Options(sort="shmid", reverse=False))

    def close(self) -> None:
        for p in self.probes:
            p.close()


@pytest.fixture
def driven() -> Iterator[Driven]:
    d = Driven()
    try:
        d.tick()
        yield d
    finally:
        d.close()


def sysvipc() -> dict[int, dict[str, int]]:
    text = Path("/proc/sysvipc/shm").read_text().splitlines()
    names = text[0].split()
    return {
        int(r["shmid"]): r
        for r in (dict(zip(names, map(int, line.split()), strict=True)) for line in text[1:])
    }


def rm_segment(shmid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmctl(shmid, IPC_RMID, None)


def vmstat(name: str) -> int:
    for line in Path("/proc/vmstat").read_text().splitlines():
        k, _, v = line.partition(" ")
        if k == name:
            return int(v)
    raise KeyError(name)


def meminfo(name: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        k, _, v = line.partition(":")
        if k == name:
            parts = v.split()
            return int(parts[0]) * (1024 if len(parts) > 1 else 1)
    raise KeyError(name)


def status(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k == name:
            return int(v.split()[0]) * 1024
    raise KeyError(name)


def rollup(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        k, _, v = line.partition(":")
        if k == name:
            return int(v.split()[0]) * 1024
    return 0


def test_sysv_table_event_log_and_orphan(work: Work, driven: Driven) -> None:
    base = int.from_bytes(os.urandom(3), "little") << 4
    keys = [base + 1, base + 2, base + 3]
    created: list[int] = []
    try:
        ids = []
        for key, size in zip(keys, (1 * MiB, 2 * MiB, 512 << 10), strict=True):
            ids.append(int(work.do(f"get {key} {size}")[0]))
            created.append(ids[-1])
        addrs = [int(work.do(f"at {i}")[0]) for i in ids]
        gone, orphan, attached = ids
        work.do(f"dt {gone}")
        work.do(f"rm {gone}")
        work.do(f"dt {orphan}")
        before = sysvipc()
        driven.tick()
        kernel = sysvipc()
        doc = driven.doc()
        rows = {r["shmid"]: r for r in doc["rows"]}
        assert gone not in kernel and gone not in rows
        for shmid in (orphan, attached):
            k, r = kernel[shmid], rows[shmid]
            assert (r["key"], r["size_bytes"], r["rss_bytes"], r["swap_bytes"]) == (
                k["key"],
                k["size"],
                k["rss"],
                k["swap"],
            )
            assert (r["nattch"], r["cpid"], r["lpid"], r["uid"], r["ctime_s"]) == (
                k["nattch"],
                k["cpid"],
                k["lpid"],
                k["uid"],
                k["ctime"],
            )
            assert r["cpid"] == work.pid and r["creator_comm"] == "shmwork"
        # every segment of the machine, not only ours, as the kernel lists it (another test may
        # create or remove one meanwhile: those present at both reads must be there)
        assert set(before) & set(kernel) <= set(rows) <= set(before) | set(kernel)
        assert rows[orphan]["orphan"] and rows[orphan]["nattch"] == 0
        assert not rows[attached]["orphan"] and rows[attached]["nattch"] == 1
        assert rows[orphan]["rss_bytes"] == 2 * MiB  # touched whole, still held with no one attached
        assert rows[attached]["mapped_by"] == [work.pid]
        stable = {i for i in set(before) & set(kernel) if before[i]["nattch"] == kernel[i]["nattch"]}
        assert {i for i in stable if rows[i]["orphan"]} == {i for i in stable if kernel[i]["nattch"] == 0}

        mine = [e for e in doc["sysv"]["events"] if e["pid"] == work.pid]
        got = [(e["call"], e["shmid"], e["result"]) for e in reversed(mine) if e["call"] != "shmat"]
        assert [(e["call"], e["key"]) for e in reversed(mine) if e["call"] == "shmget"] == [
            ("shmget", k) for k in keys
        ]
        # shmget's result is the shmid; at touched each segment after an IPC_STAT
        assert [g for g in got if g[0] == "shmget"] == [("shmget", i, i) for i in ids]
        ats = [(e["shmid"], e["addr"], e["error"]) for e in reversed(mine) if e["call"] == "shmat"]
        assert ats == [(i, a, "") for i, a in zip(ids, addrs, strict=True)]
        dts = [(e["addr"], e["result"]) for e in reversed(mine) if e["call"] == "shmdt"]
        assert dts == [(addrs[0], 0), (addrs[1], 0)]
        ctls = [(e["shmid"], e["cmd"], e["result"]) for e in reversed(mine) if e["call"] == "shmctl"]
        assert ("shmid", gone, "IPC_RMID", 0) in [("shmid", *c) for c in ctls]
        assert [c for c in ctls if c[1] == "IPC_STAT"] == [(i, "IPC_STAT", 0) for i in ids]
        caller = next(c for c in doc["sysv"]["callers"] if c["pid"] == work.pid)
        assert (
            caller["calls"]["shmget"] == 3 and caller["calls"]["shmat"] == 3 and caller["calls"]["shmdt"] == 2
        )
        assert driven.lost == 0
        # a failing call carries its error: attaching a removed segment
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        assert libc.shmat(gone, None, 0) in (None, 2**64 - 1)
        driven.tick()
        failed = [
            e for e in driven.doc()["sysv"]["events"] if e["pid"] == os.getpid() and e["call"] == "shmat"
        ]
        assert failed and failed[0]["shmid"] == gone and failed[0]["error"] == "EINVAL"
    finally:
        for shmid in created:
            rm_segment(shmid)


def test_tmpfs_file_and_memfds_with_owners(work: Work, driven: Driven) -> None:
    path = Path("/dev/shm") / f"memtop-test-{uuid.uuid4().hex[:8]}"
    try:
        path.write_bytes(b"\x01" * (3 * MiB))
        os.chown(path, 65534, 65534)
        fd_mapped = int(work.do("memfd memtop-mapped 5242880 1")[0])
        fd_plain = int(work.do("memfd memtop-plain 1048576 0")[0])
        driven.tick()
        doc = driven.doc()
        files = [f for f in doc["posix"]["files"] if f["mount"] == "/dev/shm" and f["path"] == path.name]
        st = path.stat()
        assert files == [
            {
                "mount": "/dev/shm",
                "path": path.name,
                "uid": 65534,
                "size_bytes": 3 * MiB,
                "alloc_bytes": st.st_blocks * 512,
            }
        ]
        mount = next(m for m in doc["posix"]["mounts"] if m["mount"] == "/dev/shm")
        vfs = os.statvfs("/dev/shm")
        assert mount["size_bytes"] == vfs.f_blocks * vfs.f_frsize
        mine = {m["name"]: m for m in doc["posix"]["memfds"] if m["pid"] == work.pid}
        for name, fd, size, mapped in (
            ("memtop-mapped", fd_mapped, 5 * MiB, True),
            ("memtop-plain", fd_plain, MiB, False),
        ):
            kst = os.stat(f"/proc/{work.pid}/fd/{fd}")
            m = mine[name]
            assert (m["inode"], m["size_bytes"], m["alloc_bytes"], m["mapped"]) == (
                kst.st_ino,
                size,
                kst.st_blocks * 512,
                mapped,
            )
            assert m["alloc_bytes"] == size and m["comm"] == "shmwork" and m["uid"] == os.getuid()
        shmem = doc["shmem"]
        assert shmem["memfd_bytes"] >= 6 * MiB and shmem["tmpfs_bytes"] >= 3 * MiB
        # the memfds counted once per inode, the /dev/shm file in its mount's used blocks
        inodes = {m["inode"]: m["alloc_bytes"] for m in doc["posix"]["memfds"]}
        assert shmem["memfd_bytes"] == sum(inodes.values())
        proc = next(p for p in doc["posix"]["processes"] if p["pid"] == work.pid)
        assert proc["rss_shmem_bytes"] == status(work.pid, "RssShmem") == 5 * MiB
        creates = [e for e in doc["sysv"]["events"] if e["pid"] == work.pid and e["call"] == "memfd_create"]
        assert [(e["name"], e["result"]) for e in reversed(creates)] == [
            ("memtop-mapped", fd_mapped),
            ("memtop-plain", fd_plain),
        ]
    finally:
        path.unlink(missing_ok=True)


@pytest.fixture
def hugetlb_pool() -> Iterator[int]:
    """Four more 2 MiB pages in the pool (vm.nr_hugepages), restored after; how many it has."""
    nr = HUGE_2M / "nr_hugepages"
    before = int(nr.read_text())
    try:
        nr.write_text(str(before + 4))
        have = int(nr.read_text())
        if have < before + 2:
            pytest.fail(f"the kernel gave {have - before} huge pages of the 4 asked (memory too fragmented)")
        yield have
    finally:
        nr.write_text(str(before))


def test_hugetlb_pool_and_process(work: Work, driven: Driven, hugetlb_pool: int) -> None:
    work.do("huge 2")
    try:
        for _ in range(3):  # a reading between two changes of another test's pool would differ
            sys_before = [
                int((HUGE_2M / f).read_text())
                for f in ("nr_hugepages", "free_hugepages", "resv_hugepages", "surplus_hugepages")
            ]
            driven.tick()
            sys_after = [
                int((HUGE_2M / f).read_text())
                for f in ("nr_hugepages", "free_hugepages", "resv_hugepages", "surplus_hugepages")
            ]
            if sys_before == sys_after:
                break
        doc = driven.doc()
        pool = next(p for p in doc["huge"]["pools"] if p["page_size_bytes"] == 2 * MiB)
        assert [pool["total"], pool["free"], pool["reserved"], pool["surplus"]] == sys_after
        assert pool["total"] == hugetlb_pool and pool["used"] >= 2
        assert (pool["total"], pool["free"]) == (meminfo("HugePages_Total"), meminfo("HugePages_Free"))
        assert doc["huge"]["hugetlb_bytes"] == meminfo("Hugetlb")
        proc = next(p for p in doc["huge"]["processes"] if p["pid"] == work.pid)
        smaps = rollup(work.pid, "Private_Hugetlb") + rollup(work.pid, "Shared_Hugetlb")
        assert proc["hugetlb_bytes"] == smaps == 4 * MiB
    finally:
        work.do("unmap")


@pytest.fixture
def thp_madvise() -> Iterator[None]:
    """THP on for madvised regions ("madvise" or "always" kept as found), restored after."""
    before = THP.read_text()
    mode = before[before.index("[") + 1 : before.index("]")]
    try:
        if mode == "never":
            THP.write_text("madvise")
        yield
    finally:
        if mode == "never":
            THP.write_text("never")


def test_madvise_hugepage_thp(work: Work, driven: Driven, thp_madvise: None) -> None:
    driven.tick()  # vmstat's first reading: the since-start baseline
    first = driven.state.subs["host"].vmstat_first.get("thp_fault_alloc")  # type: ignore[attr-defined]
    assert first is not None
    before = vmstat("thp_fault_alloc")
    start, length = (int(x) for x in work.do("thp 16"))
    try:
        driven.tick()
        after = vmstat("thp_fault_alloc")
        doc = driven.doc()
        kernel_ahp = rollup(work.pid, "AnonHugePages")
        assert kernel_ahp >= 2 * MiB, "the kernel gave the madvised region no huge page"
        proc = next(p for p in doc["huge"]["processes"] if p["pid"] == work.pid)
        assert proc["anon_huge_bytes"] == kernel_ahp
        # thp_fault_alloc since memtop's first reading: bracketed by the kernel's, and at least
        # the workload's huge pages
        since = doc["huge"]["thp_since_start"]["thp_fault_alloc"]
        assert before - first <= since <= after - first
        assert after - before >= kernel_ahp // (2 * MiB)
        mad = next(m for m in doc["huge"]["madvise"] if m["pid"] == work.pid)
        assert mad["ranges"][0] == {
            "start": start,
            "length_bytes": length,
            "advice": "hugepage",
            "result": 0,
            "error": "",
        }
        assert mad["advice"] == {"hugepage": 1} and mad["advised_bytes"] == length
    finally:
        work.do("unmap")


def test_compaction_migrations_equal_pgmigrate_success(work: Work, driven: Driven) -> None:
    # fragment memory: 256 MiB touched, every other page given back, so compaction has pages to move
    work.do("frag 256")
    try:

        def migrated() -> tuple[int, int]:
            driven.tick()
            reasons = driven.doc()["migrate"]["reasons"]
            assert reasons is not None
            total = sum(r["succeeded"] for r in reasons)
            compaction = sum(r["succeeded"] for r in reasons if r["reason"] == "compaction")
            return total, compaction

        for _ in range(5):  # a run may find nothing to move (the first after boot did, here)
            outer0 = vmstat("pgmigrate_success")
            mine0, comp0 = migrated()
            inner0 = vmstat("pgmigrate_success")
            Path("/proc/sys/vm/compact_memory").write_text("1")
            inner1 = vmstat("pgmigrate_success")
            mine1, comp1 = migrated()
            outer1 = vmstat("pgmigrate_success")
            if inner1 > inner0:
                break
        # pgmigrate_success is counted where mm_migrate_pages fires: the traced window encloses
        # the inner reads and lies within the outer ones (equal on a quiet machine)
        assert 0 < inner1 - inner0 <= mine1 - mine0 <= outer1 - outer0
        # what compaction moved is at least what the kernel counted between the inner reads
        # less what anything else could have moved outside them
        assert comp1 - comp0 >= (inner1 - inner0) - ((outer1 - outer0) - (inner1 - inner0))
        mad = [e for e in driven.doc()["sysv"]["events"] if e["pid"] == work.pid and e["call"] == "madvise"]
        assert [(e["advice"], e["size_bytes"]) for e in mad] == [("nohugepage", 256 * MiB)]
    finally:
        work.do("unmap")


@pytest.mark.bpf
def test_huge_page_faults_per_process_by_mapping(work: Work, hugetlb_pool: int) -> None:
    """hfaults without kprobes (issue 27): the drill-in's per-pid fault events, grouped by mapping,
    count a hugetlb mapping's faults apart, one per huge page: equal to the huge pages the kernel
    says the process holds (smaps_rollup's *_Hugetlb), and none of them is called file-backed."""
    from memtop.probes.faultstack import FaultStackProbe

    probe = FaultStackProbe(work.pid)  # what the drill-in attaches on the process, on demand
    probe.load()
    try:
        state = State("bpf")
        state.apply(Batch(now_ns(), tuple(probe.poll())))
        work.do("huge 2")
        held = rollup(work.pid, "Private_Hugetlb") + rollup(work.pid, "Shared_Hugetlb")
        state.apply(Batch(now_ns(), tuple(probe.poll())))
        doc = get_view("process").document(state, Options(pid=work.pid, section="fault_files"))
        assert held == 2 * 2 * MiB
        assert doc["hugetlb_faults"] == held // (2 * MiB), doc["rows"]
        row = next(r for r in doc["rows"] if r["hugetlb"])
        assert row["path"] == "[anon hugetlb]" and not row["file_backed"]
        assert row["count"] == doc["hugetlb_faults"]
    finally:
        work.do("unmap")
        probe.close()
