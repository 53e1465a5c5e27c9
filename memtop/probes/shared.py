"""shared: System V shm calls, madvise calls asking for or refusing huge pages, memfd_create,
page migrations by reason and khugepaged's collapses, from tracepoints (bpf/shared.bpf.c: slow
paths, or filtered in kernel, so it stays attached; nothing runs on a page fault).

sharedinfo (no BPF): the System V segments (/proc/sysvipc/shm), hugetlb pools and THP's modes
(/sys/kernel/mm), meminfo's huge and shared figures every tick; every ``scan_every`` ticks the
processes' status (RssShmem, HugetlbPages), their memfds (fds) and maps (which segment and memfd
each maps), smaps_rollup (AnonHugePages) for those with the most anonymous memory, and the
tmpfs mounts with their largest files. While the Shared pane is not on screen (``watched``
False) the scans come every ``unwatched_every`` ticks and the pools are read every
``scan_every``; the pane shown again has a scan at its next tick.
"""

from __future__ import annotations

import ctypes
import errno
import math
import os
import re
import stat as stat_mod
import time
from pathlib import Path
from typing import Any, ClassVar, Self

from memtop.core.text import clean
from memtop.linux import tracefs
from memtop.linux.cgroupfs import read_text
from memtop.linux.kernelfs import parse_meminfo
from memtop.linux.procfd import open_files
from memtop.probes.base import BpfProbe, Probe, enumerated
from memtop.records import Record
from memtop.records.shared import (
    HugePools,
    KhugepagedTotals,
    MigrateTotals,
    SharedCall,
    SharedProc,
    SharedScan,
    ShmSegment,
    ShmTable,
    TmpfsMount,
)

#: the calls the program reports, by the number it sends (``SHARED_<CALL>``)
CALLS = ("shmget", "shmat", "shmdt", "shmctl", "madvise", "memfd_create")
#: the madvise behaviours it lets on (``SHARED_MADV_<NAME>``): the others stop in the kernel
ADVICE = {14: "hugepage", 15: "nohugepage", 25: "collapse"}
SHMCTL_CMDS = {0: "IPC_RMID", 1: "IPC_SET", 2: "IPC_STAT", 3: "IPC_INFO", 11: "SHM_LOCK", 12: "SHM_UNLOCK"}
SHMCTL_CMDS |= {13: "SHM_STAT", 14: "SHM_INFO", 15: "SHM_STAT_ANY"}
#: migrate_reason, as the kernel prints it (include/linux/migrate_mode.h); 15 is "newer than this"
MIGRATE_REASONS = (
    "compaction",
    "memory_failure",
    "memory_hotplug",
    "syscall_or_cpuset",
    "mempolicy_mbind",
    "numa_misplaced",
    "contig_range",
    "longterm_pin",
    "demotion",
    "damon",
)
#: slots of the per-reason migration table (the last: reasons newer than MIGRATE_REASONS)
REASON_SLOTS = 16
#: slots of the per-status collapse table (the last: statuses at or beyond it)
STATUS_SLOTS = 64
COLLAPSE_SUCCEEDED = 1
#: the share of a core (at one tick a second) the scans of processes and mounts may take
SCAN_BUDGET = 0.005


class _Event(ctypes.Structure):
    C_STRUCT = "struct shared_event_t"  # in bpf/shared.bpf.c; the layout is checked (memtop.probes.layout)
    _fields_ = [
        ("ts_ns", ctypes.c_uint64),
        ("arg0", ctypes.c_uint64),
        ("arg1", ctypes.c_uint64),
        ("ret", ctypes.c_int64),
        ("pid", ctypes.c_uint32),
        ("tid", ctypes.c_uint32),
        ("call", ctypes.c_uint32),
        ("flags", ctypes.c_int32),
        ("comm", ctypes.c_char * 16),
        ("name", ctypes.c_char * 32),
    ]


def collapse_statuses() -> dict[int, str]:
    """mm_collapse_huge_page's status names from its print format (they change between
    kernels); {} when the format cannot be read."""
    base = tracefs.root()
    fmt = read_text(str(base / "events/huge_memory/mm_collapse_huge_page/format")) if base else None
    out: dict[int, str] = {}
    for num, name in re.findall(r'\{\s*(\d+),\s*"(\w+)"\s*\}', fmt or ""):
        out[int(num)] = name
    return out


def _errname(ret: int) -> str:
    if ret >= 0 or ret < -4095:
        return ""
    return errno.errorcode.get(-ret, f"E{-ret}")


def _signed32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


class SharedProbe(BpfProbe):
    """Page migrations by reason and khugepaged's work (slow-path tracepoints, at start). The shm,
    madvise and memfd_create calls are :class:`ShmSnoopProbe`'s, on demand."""

    name = "shared"
    program = "shared"
    shares_unit = True
    #: -DSYSCALLS: the syscall tracepoints (ShmSnoopProbe only)
    syscalls: ClassVar[bool] = False
    tracepoints: ClassVar[tuple[str, ...]] = ()
    optional_tracepoints: ClassVar[tuple[str, ...]] = (
        "migrate:mm_migrate_pages",
        "huge_memory:mm_collapse_huge_page",
        "huge_memory:mm_khugepaged_scan_pmd",
    )
    cadence_s = 1.0

    def __init__(self, max_tids: int = 4096, ringbuf_pages: int = 16) -> None:
        super().__init__()
        self.max_tids = max_tids
        self.ringbuf_pages = ringbuf_pages
        self.has: set[str] = set()
        self._pending: list[SharedCall] = []
        self._statuses: dict[int, str] = {}

    def defines(self) -> dict[str, int]:
        return {
            "MAX_TIDS": self.max_tids,
            "RINGBUF_PAGES": self.ringbuf_pages,
            **enumerated("SHARED_", CALLS),
            **{f"SHARED_MADV_{name.upper()}": n for n, name in ADVICE.items()},
            "SHARED_REASONS": REASON_SLOTS,
            "SHARED_STATUSES": STATUS_SLOTS,
        }

    def cflags(self) -> list[str]:
        flags = self.define_flags()
        if self.syscalls:
            flags.append("-DSYSCALLS")
        for tp, flag in self._optional_flags():
            if tracefs.tracepoint_exists(tp) and (
                tp != "syscalls:sys_enter_memfd_create"
                or (tracefs.tracepoint_exists("syscalls:sys_exit_memfd_create"))
            ):
                flags.append(f"-D{flag}")
                self.has.add(flag)
        return flags

    def _optional_flags(self) -> tuple[tuple[str, str], ...]:
        return (
            ("migrate:mm_migrate_pages", "HAVE_MIGRATE"),
            ("huge_memory:mm_collapse_huge_page", "HAVE_COLLAPSE"),
            ("huge_memory:mm_khugepaged_scan_pmd", "HAVE_SCAN_PMD"),
        )

    def after_load(self) -> None:
        self.bpf["shared_events"].open_ring_buffer(self._on_event)
        self._statuses = collapse_statuses()

    def note(self) -> str:
        if self.syscalls:
            return "" if "HAVE_MEMFD" in self.has else "no memfd_create"
        missing = [
            w for f, w in (("HAVE_MIGRATE", "migrate"), ("HAVE_COLLAPSE", "khugepaged")) if f not in self.has
        ]
        return ("no " + ", ".join(missing)) if missing else ""

    def _on_event(self, _ctx: Any, data: Any, _size: int) -> None:
        ev = _Event()
        ctypes.memmove(ctypes.byref(ev), data, ctypes.sizeof(ev))
        self._pending.append(self._record(ev))

    @staticmethod
    def _record(ev: _Event) -> SharedCall:
        call = CALLS[ev.call] if ev.call < len(CALLS) else f"call{ev.call}"
        ret = int(ev.ret)
        base: dict[str, Any] = {
            "ts_ns": int(ev.ts_ns),
            "pid": int(ev.pid),
            "tid": int(ev.tid),
            "comm": clean(bytes(ev.comm).split(b"\0", 1)[0]),
            "call": call,
            "result": ret,
            "error": _errname(ret),
        }
        a0, a1, flags = int(ev.arg0), int(ev.arg1), int(ev.flags)
        if call == "shmget":
            base |= {"key": _signed32(a0), "size_bytes": a1, "flags": flags}
            if ret >= 0:
                base["shmid"] = ret
        elif call == "shmat":
            base |= {"shmid": _signed32(a0), "flags": flags}
            if ret >= 0:
                base["addr"] = ret & 0xFFFFFFFFFFFFFFFF
        elif call == "shmdt":
            base |= {"addr": a0}
        elif call == "shmctl":
            base |= {"shmid": _signed32(a0), "flags": flags, "cmd": SHMCTL_CMDS.get(flags & 0xFF, str(flags))}
        elif call == "madvise":
            base |= {"addr": a0, "size_bytes": a1, "advice": ADVICE.get(flags, str(flags))}
        elif call == "memfd_create":
            base |= {"flags": flags, "name": clean(bytes(ev.name).split(b"\0", 1)[0])}
        return SharedCall(**base)

    def poll(self) -> list[Record]:
        if self.bpf is None:
            return []
        self.bpf.ring_buffer_consume()
        out: list[Record] = list(self._pending)
        self._pending = []
        if "HAVE_MIGRATE" in self.has:
            rows = []
            table = self.bpf["shared_migrate"]
            for i in range(REASON_SLOTS):
                v = table[table.Key(i)]
                if v.calls:
                    name = MIGRATE_REASONS[i] if i < len(MIGRATE_REASONS) else "other"
                    rows.append(
                        (
                            name,
                            int(v.calls),
                            int(v.succeeded),
                            int(v.failed),
                            int(v.thp_succeeded),
                            int(v.thp_failed),
                            int(v.thp_split),
                        )
                    )
            # sent every poll, changed or not: the state's rates are per poll
            out.append(MigrateTotals(tuple(rows)))
        if self.has & {"HAVE_COLLAPSE", "HAVE_SCAN_PMD"}:
            scans = self.read_array_sum("shared_scan_pmd") if "HAVE_SCAN_PMD" in self.has else None
            coll = []
            if "HAVE_COLLAPSE" in self.has:
                for i, n in enumerate(self.array_slots("shared_collapse", STATUS_SLOTS)):
                    if n:
                        coll.append((self._statuses.get(i, f"status{i}"), n))
            out.append(KhugepagedTotals(scans=scans, collapses=tuple(coll)))
        out.append(self.lost_record("shared_lost"))
        return out


class ShmSnoopProbe(SharedProbe):
    """shmsnoop without kprobes: shmget/shmat/shmdt/shmctl, madvise asking for or refusing huge
    pages (filtered in kernel) and memfd_create, from their syscall tracepoints. On demand (while
    the Shared pane is shown, or a snapshot or --batch of it): an enabled syscall tracepoint makes
    every syscall of every task take the kernel's tracing path."""

    name = "shmsnoop"
    shares_unit = False
    syscalls = True
    tracepoints = (
        "syscalls:sys_enter_shmget",
        "syscalls:sys_exit_shmget",
        "syscalls:sys_enter_shmat",
        "syscalls:sys_exit_shmat",
        "syscalls:sys_enter_shmdt",
        "syscalls:sys_exit_shmdt",
        "syscalls:sys_enter_shmctl",
        "syscalls:sys_exit_shmctl",
        "syscalls:sys_enter_madvise",
        "syscalls:sys_exit_madvise",
    )
    optional_tracepoints = ("syscalls:sys_enter_memfd_create",)

    def _optional_flags(self) -> tuple[tuple[str, str], ...]:
        return (("syscalls:sys_enter_memfd_create", "HAVE_MEMFD"),)


# -- sharedinfo: /proc and /sys ----------------------------------------------------------------


def parse_sysvipc_shm(text: str) -> list[dict[str, int]]:
    """Rows of /proc/sysvipc/shm by their header's names (rss and swap are bytes there)."""
    lines = text.splitlines()
    if not lines:
        return []
    names = lines[0].split()
    rows = []
    for line in lines[1:]:
        parts = line.split()
        if len(parts) != len(names):
            continue
        try:
            row = {n: int(p, 8) if n == "perms" else int(p) for n, p in zip(names, parts, strict=True)}
        except ValueError:
            continue
        rows.append(row)
    return rows


def _bracketed(text: str | None) -> str:
    if not text:
        return ""
    at, end = text.find("["), text.find("]")
    return text[at + 1 : end] if 0 <= at < end else text.strip()


def tmpfs_mounts(mountinfo: str) -> list[str]:
    """Mount points of tmpfs file systems (the latest mount at a path wins)."""
    seen: dict[str, None] = {}
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fs = right.split()
        parts = left.split()
        if len(parts) >= 5 and fs and fs[0] == "tmpfs":
            mp = parts[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
            seen.pop(mp, None)
            seen[mp] = None
    return list(seen)


class SharedinfoProbe(Probe):
    """System V segments, hugetlb pools, tmpfs, memfds and per-process huge page use (no BPF)."""

    name = "sharedinfo"
    needs_bpf = False
    cadence_s = 1.0
    #: the scan of every process's maps and smaps and of the tmpfs mounts (the pane's process
    #: and mount tables): nothing exported uses it (pools and segments are read without it)
    optional_parts = ("processes",)

    @classmethod
    def at_start(cls, proc_root: str | Path) -> Self:
        return cls(str(proc_root))

    def __init__(
        self,
        proc_root: str = "/proc",
        sys_root: str = "/sys",
        scan_every: int = 5,
        max_procs: int = 4096,
        max_fds: int = 4096,
        smaps_top: int = 32,
        rollup_every: int = 60,
        scan_budget: float = SCAN_BUDGET,
        max_files: int = 2000,
        top_files: int = 50,
        mounts: tuple[str, ...] | None = None,
        unwatched_every: int = 30,
    ) -> None:
        self.proc = proc_root
        self.sys = sys_root
        self.scan_every = scan_every
        self.max_procs = max_procs
        self.max_fds = max_fds
        self.smaps_top = smaps_top
        #: a process's smaps_rollup is read again after this many ticks, or sooner when its
        #: anonymous memory moved by a huge page or more (a read walks its page tables: 5-8 ms
        #: for a large process here)
        self.rollup_every = rollup_every
        self.scan_budget = scan_budget
        self.unwatched_every = unwatched_every
        self._was_watched = True
        #: pid -> (RssAnon when read, tick when read, AnonHugePages)
        self._rollup: dict[int, tuple[int, int, int]] = {}
        self._next_scan = 0
        #: seconds the last scan of the processes and mounts took
        self.last_scan_s = 0.0
        self.max_files = max_files
        self.top_files = top_files
        #: the tmpfs mounts to read (None: every one)
        self.mounts = mounts
        self._tick = 0
        self._segments: dict[int, ShmSegment] = {}
        self._mapped: dict[int, tuple[int, ...]] = {}
        self._last_pools: HugePools | None = None
        self._comms: dict[int, str] = {}

    def load(self) -> None:
        pass  # each source may be missing on its own; the records say which

    def _read(self, *parts: str) -> str | None:
        return read_text(os.path.join(*parts), 1 << 20)

    def _comm(self, pid: int) -> str:
        if pid <= 0:
            return ""
        text = self._read(self.proc, str(pid), "comm")
        return clean(text.rstrip("\n")) if text else ""

    def poll(self) -> list[Record]:
        self._tick += 1
        out: list[Record] = []
        watched, shown_now = self.watched, self.watched and not self._was_watched
        self._was_watched = watched
        scan = self.reads("processes") and (self._tick == 1 or self._tick >= self._next_scan or shown_now)
        procs: list[SharedProc] = []
        mounts: list[TmpfsMount] = []
        processes = smaps_read = 0
        if scan:
            t0 = time.monotonic()
            procs, processes, smaps_read = self._scan_procs()
            mounts = self._scan_tmpfs()
            # a scan costs ~0.15 ms a process here: on a machine with thousands of them the scans
            # space out so that they take at most SCAN_BUDGET of a core (every scan_every ticks
            # at best)
            took_s = time.monotonic() - t0
            self.last_scan_s = took_s
            every = self.scan_every if watched else self.unwatched_every
            self._next_scan = self._tick + max(every, math.ceil(took_s / self.scan_budget))
            mapped: dict[int, list[int]] = {}
            for p in procs:
                for shmid in p.sysv:
                    mapped.setdefault(shmid, []).append(p.pid)
            self._mapped = {k: tuple(sorted(v)) for k, v in mapped.items()}
        out += self._sysv()
        if watched or scan or self._tick % self.scan_every == 0:
            pools = self._pools()
            if pools != self._last_pools:
                out.append(pools)
                self._last_pools = pools
        if scan:
            out += procs
            out += mounts
            out.append(
                SharedScan(
                    pids=tuple(p.pid for p in procs),
                    mounts=tuple(m.mount for m in mounts),
                    processes=processes,
                    smaps_read=smaps_read,
                )
            )
        return out

    def _sysv(self) -> list[Record]:
        text = self._read(self.proc, "sysvipc", "shm")
        if text is None:
            self._segments = {}
            return [ShmTable((), readable=False, why=f"{self.proc}/sysvipc/shm cannot be read")]
        out: list[Record] = []
        now: dict[int, ShmSegment] = {}
        for row in parse_sysvipc_shm(text):
            shmid = row.get("shmid", -1)
            prev = self._segments.get(shmid)
            cpid, lpid = row.get("cpid", 0), row.get("lpid", 0)
            ccomm = prev.creator_comm if prev is not None and prev.cpid == cpid else self._comm(cpid)
            lcomm = prev.last_comm if prev is not None and prev.lpid == lpid else self._comm(lpid)
            seg = ShmSegment(
                shmid=shmid,
                key=row.get("key", 0),
                perms=row.get("perms", 0),
                size_bytes=row.get("size", 0),
                cpid=cpid,
                lpid=lpid,
                nattch=row.get("nattch", 0),
                uid=row.get("uid", 0),
                gid=row.get("gid", 0),
                cuid=row.get("cuid", 0),
                cgid=row.get("cgid", 0),
                atime_s=row.get("atime", 0),
                dtime_s=row.get("dtime", 0),
                ctime_s=row.get("ctime", 0),
                rss_bytes=row.get("rss", 0),
                swap_bytes=row.get("swap", 0),
                creator_comm=ccomm,
                last_comm=lcomm,
                mapped_by=self._mapped.get(shmid, ()),
            )
            now[shmid] = seg
            if seg != prev:
                out.append(seg)
        self._segments = now
        out.append(ShmTable(tuple(sorted(now))))
        return out

    def _pools(self) -> HugePools:
        pools = []
        base = os.path.join(self.sys, "kernel", "mm", "hugepages")
        try:
            names = sorted(os.listdir(base))
        except OSError:
            names = []
        for name in names:
            if not (name.startswith("hugepages-") and name.endswith("kB")):
                continue
            try:
                size = int(name[len("hugepages-") : -2]) * 1024
            except ValueError:
                continue
            vals = []
            for f in ("nr_hugepages", "free_hugepages", "resv_hugepages", "surplus_hugepages"):
                t = self._read(base, name, f)
                try:
                    vals.append(int(t) if t else 0)
                except ValueError:
                    vals.append(0)
            pools.append((size, vals[0], vals[1], vals[2], vals[3]))
        mi = parse_meminfo(self._read(self.proc, "meminfo") or "")
        thp = os.path.join(self.sys, "kernel", "mm", "transparent_hugepage")
        return HugePools(
            pools=tuple(pools),
            hugetlb_bytes=mi.get("Hugetlb", 0),
            anon_huge_bytes=mi.get("AnonHugePages", 0),
            shmem_bytes=mi.get("Shmem", 0),
            shmem_huge_bytes=mi.get("ShmemHugePages", 0),
            shmem_pmd_mapped_bytes=mi.get("ShmemPmdMapped", 0),
            file_huge_bytes=mi.get("FileHugePages", 0),
            thp_enabled=_bracketed(self._read(thp, "enabled")),
            thp_defrag=_bracketed(self._read(thp, "defrag")),
            thp_shmem_enabled=_bracketed(self._read(thp, "shmem_enabled")),
        )

    def _memfds(self, pid: str) -> list[tuple[int, str, int, int]]:
        """(inode, name, size, allocated bytes) of each memfd the process holds open (bounded)."""
        out: dict[int, tuple[int, str, int, int]] = {}
        for of in open_files(self.proc, pid, self.max_fds, named=lambda t: t.startswith("/memfd:")).files:
            name = (of.target() or "")[len("/memfd:") :].removesuffix(" (deleted)")
            out[of.st.st_ino] = (of.st.st_ino, clean(name, 256), of.st.st_size, of.st.st_blocks * 512)
        return list(out.values())

    def _maps(self, pid: str) -> tuple[set[int], set[int]]:
        """(System V shmids, memfd inodes) the process maps, from its maps."""
        text = self._read(self.proc, pid, "maps")
        sysv: set[int] = set()
        memfd: set[int] = set()
        if not text or ("/SYSV" not in text and "/memfd:" not in text):
            return sysv, memfd
        for line in text.splitlines():
            if "/SYSV" in line or "/memfd:" in line:
                parts = line.split(None, 5)
                if len(parts) < 6:
                    continue
                try:
                    inode = int(parts[4])
                except ValueError:
                    continue
                (sysv if parts[5].startswith("/SYSV") else memfd).add(inode)
        return sysv, memfd

    def _scan_procs(self) -> tuple[list[SharedProc], int, int]:
        status_names = {"RssShmem", "HugetlbPages", "RssAnon", "Uid"}
        found: list[
            tuple[int, str, int, dict[str, int], list[tuple[int, str, int, int]], set[int], set[int]]
        ] = []
        n = 0
        try:
            pids = [p for p in os.listdir(self.proc) if p.isdigit()]
        except OSError:
            return [], 0, 0
        for pid in pids[: self.max_procs]:
            text = self._read(self.proc, pid, "status")
            if not text:
                continue
            n += 1
            st: dict[str, int] = {}
            comm = ""
            for line in text.splitlines():
                k, _, v = line.partition(":")
                if k == "Name":
                    comm = clean(v.strip())
                elif k in status_names:
                    parts = v.split()
                    if parts:
                        st[k] = int(parts[0]) * (1 if k == "Uid" else 1024)
            memfds = self._memfds(pid)
            # maps where shared memory is: resident shared pages or a memfd open (the others are
            # read below only when an attached segment's mappers are not all found)
            if st.get("RssShmem") or memfds:
                sysv, mapped_memfd = self._maps(pid)
            else:
                sysv, mapped_memfd = set(), set()
            found.append((int(pid), comm, st.get("Uid", 0), st, memfds, sysv, mapped_memfd))
        attaches = sum(seg.nattch for seg in self._segments.values())
        if attaches > sum(len(f[5]) for f in found):
            # a segment attached but not touched is not in RssShmem: read every maps
            for i, f in enumerate(found):
                if not (f[3].get("RssShmem") or f[4]):
                    sysv, mapped_memfd = self._maps(str(f[0]))
                    found[i] = (*f[:5], sysv, mapped_memfd)
        # smaps_rollup (a walk of the page tables) only for those with the most anonymous memory:
        # AnonHugePages <= RssAnon, and a huge page is 2 MiB
        anon = sorted(
            (f for f in found if f[3].get("RssAnon", 0) >= 2 << 20), key=lambda f: -f[3].get("RssAnon", 0)
        )
        rollup: dict[int, int] = {}
        reads = 0
        cache, now = self._rollup, self._tick
        for f in anon[: self.smaps_top]:
            pid_i, rss_anon = f[0], f[3].get("RssAnon", 0)
            seen = cache.get(pid_i)
            if seen is not None and abs(rss_anon - seen[0]) < (2 << 20) and now - seen[1] < self.rollup_every:
                rollup[pid_i] = seen[2]
                continue
            text = self._read(self.proc, str(pid_i), "smaps_rollup")
            reads += 1
            if text:
                rollup[pid_i] = parse_meminfo(text).get("AnonHugePages", 0)
                cache[pid_i] = (rss_anon, now, rollup[pid_i])
        alive = {f[0] for f in found}
        for gone in [p for p in cache if p not in alive]:
            del cache[gone]
        out = []
        for pid_i, comm, uid, st, memfds, sysv, mapped_memfd in found:
            ahp = rollup.get(pid_i)
            if not (st.get("RssShmem") or st.get("HugetlbPages") or ahp or memfds or sysv):
                continue
            out.append(
                SharedProc(
                    pid=pid_i,
                    comm=comm,
                    uid=uid,
                    rss_shmem_bytes=st.get("RssShmem", 0),
                    hugetlb_bytes=st.get("HugetlbPages", 0),
                    anon_huge_bytes=ahp,
                    memfds=tuple(
                        (ino, name, size, alloc, int(ino in mapped_memfd))
                        for ino, name, size, alloc in memfds
                    ),
                    sysv=tuple(sorted(sysv)),
                )
            )
        return out, n, reads

    def _scan_tmpfs(self) -> list[TmpfsMount]:
        out = []
        # surrogate-escaped: a mount point that is not UTF-8 is still a path to open
        info = read_text(os.path.join(self.proc, "self", "mountinfo"), 1 << 20, errors="surrogateescape")
        for mp in tmpfs_mounts(info or ""):
            if self.mounts is not None and mp not in self.mounts:
                continue
            try:
                vfs = os.statvfs(mp)
                dev = os.lstat(mp).st_dev
            except OSError:
                continue
            files, seen, truncated = self._walk(mp, dev)
            files.sort(key=lambda f: -f[3])
            out.append(
                TmpfsMount(
                    mount=clean(mp),
                    size_bytes=vfs.f_blocks * vfs.f_frsize,
                    used_bytes=(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize,
                    files=tuple(files[: self.top_files]),
                    files_seen=seen,
                    truncated=truncated,
                )
            )
        return out

    def _walk(self, top: str, dev: int) -> tuple[list[tuple[str, int, int, int]], int, bool]:
        """Regular files below ``top`` on its own file system (lstat: no symlink followed, nothing
        opened), at most ``max_files`` entries."""
        files: list[tuple[str, int, int, int]] = []
        stack, seen = [top], 0
        while stack:
            d = stack.pop()
            try:
                it = os.scandir(d)
            except OSError:
                continue
            with it:
                for entry in it:
                    seen += 1
                    if seen > self.max_files:
                        return files, seen - 1, True
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if st.st_dev != dev:
                        continue  # another file system mounted below
                    if stat_mod.S_ISDIR(st.st_mode):
                        stack.append(entry.path)
                    elif stat_mod.S_ISREG(st.st_mode):
                        rel = os.path.relpath(entry.path, top)
                        files.append((clean(rel, 512), st.st_uid, st.st_size, st.st_blocks * 512))
        return files, seen, False
