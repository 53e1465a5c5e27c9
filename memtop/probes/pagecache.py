"""pagecacheinfo (no BPF): which files are in the page cache. The files processes hold open
(/proc/PID/fd) or map (/proc/PID/maps), deduplicated by device and inode, and the regular files
below the directories the user names (``--cache-path``, recursive, bounded), each measured with
``cachestat(2)`` (Linux 6.5+: cached, dirty, writeback, evicted and recently evicted pages) or,
where the kernel has no cachestat, ``mincore(2)`` over a read-only mapping (cached pages only).

Refreshing everything every tick would cost a syscall or four per file: the fds and maps are
rescanned every ``scan_every`` ticks, the ``--cache-path`` directories every ``walk_every``;
each tick measures the files that hold the most, the files new since the last tick, and a
rotating slice of the others sized so the refresh takes at most ``budget`` of a core.

Files are opened only to be measured and closed at once (an fd kept would pin a deleted file's
space): an ``O_PATH`` open first (it never opens a device or a FIFO, has no side effect), its
fstat checked (a regular file, the device and inode scanned), then a read-only reopen of that
very inode through /proc/self/fd. A ``--cache-path`` name is opened with ``O_NOFOLLOW``.

pagecache (BPF, ``bpf/pagecache.bpf.c``): pages added to and deleted from the page cache per file
and per process, from the filemap tracepoints, counted in kernel maps read once per tick.
"""

from __future__ import annotations

import ctypes
import errno
import heapq
import os
import stat as stat_mod
import struct
import time
from array import array
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import ClassVar, Self, cast

from memtop.core.text import clean
from memtop.linux import bcc_compat
from memtop.linux.cgroupfs import read_text
from memtop.linux.pagecgroup import Owner, PageOwners, mincore_pages
from memtop.linux.procfd import each_open_file, reopen
from memtop.probes.base import BpfProbe, Probe
from memtop.probes.layout import Packed
from memtop.records import Record
from memtop.records.pagecache import CachedFile, CachedFiles, PagecacheActivity
from memtop.runtime import startup_gc

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
#: cachestat's number: new system calls have one number on every architecture but alpha
NR_CACHESTAT = 451
#: holders kept per file
MAX_HOLDERS = 8
#: the share of a core the probe may take (at one tick a second): half for the refresh, a quarter
#: each for the scan of the processes and the walk of the --cache-path trees
BUDGET = 0.01
#: the size of a file measured without an fstat (:meth:`PagecacheinfoProbe._measure_at`)
UNCHECKED = -1
#: seconds between both page cache probes' polls while their pane is not on screen (the TUI):
#: half the thrashing window (memtop.state.pagecache.WINDOW_NS), see the probes
UNWATCHED_CADENCE_S = 15.0
#: files whose memory cgroup is sampled (the ones holding the most)
OWNER_TOP = 32
#: how a --cache-path file is opened: never through a symlink, never blocking, no controlling tty
NAMED_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOATIME


#: bpf/pagecache.bpf.c's map entries (the layouts are checked: tests/kernel/test_struct_layouts.py)
FILE_KEY = Packed("struct pc_file_key_t", "<QII", ("ino", "dev", "pad"))
COUNTS = Packed("struct pc_counts_t", "<QQ", ("added", "deleted"))
#: followed by comm[16] (read as the bytes after the counts)
PID_COUNTS = Packed("struct pc_pid_counts_t", "<QQ", ("added", "deleted"), whole=False)


class _CachestatRange(ctypes.Structure):
    # struct cachestat_range (include/uapi/linux/mman.h): off, len (0: to the end of the file)
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    # struct cachestat (include/uapi/linux/mman.h), in pages
    _fields_ = [
        ("nr_cache", ctypes.c_uint64),
        ("nr_dirty", ctypes.c_uint64),
        ("nr_writeback", ctypes.c_uint64),
        ("nr_evicted", ctypes.c_uint64),
        ("nr_recently_evicted", ctypes.c_uint64),
    ]


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


#: cachestat through a prototype of syscall(2) with its argument types declared, and one range
#: and one result struct reused: building ctypes objects for each call was half its cost
_cachestat_call = ctypes.CFUNCTYPE(
    ctypes.c_long,
    ctypes.c_long,
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_uint,
    use_errno=True,
)(("syscall", _libc))
_RANGE = _CachestatRange(0, 0)  # the whole file
_RESULT = _Cachestat()
_RANGE_P, _RESULT_P = ctypes.addressof(_RANGE), ctypes.addressof(_RESULT)
#: the walk's cachestat, for 100,000 files at a time: syscall(2) without declared argument types
#: or errno (its arguments boxed once: a third less per call than the prototype above); a call
#: that fails is made again through ``_cachestat_call``, which says why
_CACHESTAT_FAST = _libc["syscall"]
_CACHESTAT_FAST.restype = ctypes.c_long
_FAST_ARGS = (ctypes.c_long(NR_CACHESTAT), ctypes.byref(_RANGE), ctypes.byref(_RESULT))
#: the result's five u64 as a tuple in one call (five ctypes field reads cost more)
_RESULT_BUF = (ctypes.c_char * ctypes.sizeof(_Cachestat)).from_address(_RESULT_P)
_UNPACK = struct.Struct("=5Q").unpack_from


def cachestat(fd: int) -> tuple[int, int, int, int, int]:
    """(cached, dirty, writeback, evicted, recently evicted) pages of the whole file open as
    ``fd``; OSError (ENOSYS: the kernel has no cachestat) otherwise. Not thread-safe (one
    result buffer): the probe that calls it polls in one thread."""
    if _cachestat_call(NR_CACHESTAT, fd, _RANGE_P, _RESULT_P, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    cs = _RESULT
    return (cs.nr_cache, cs.nr_dirty, cs.nr_writeback, cs.nr_evicted, cs.nr_recently_evicted)


def open_checked(path: str, key: tuple[int, int] | None, follow: bool) -> tuple[int, os.stat_result] | None:
    """A read-only fd of the regular file at ``path`` (of device and inode ``key`` when given)
    and its fstat, or None. ``follow`` False: the last component is not followed (O_NOFOLLOW);
    True for /proc's magic links (fd/N, map_files/…), which name the inode itself. An O_PATH
    open first: it does not open what it names (no device's open, no FIFO to block on)."""
    try:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    except OSError:
        return None
    try:
        st = os.fstat(pfd)
        if not stat_mod.S_ISREG(st.st_mode) or (key is not None and (st.st_dev, st.st_ino) != key):
            return None
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(f"/proc/self/fd/{pfd}", flags | os.O_NOATIME)
        except PermissionError:  # O_NOATIME: only the owner or CAP_FOWNER
            fd = os.open(f"/proc/self/fd/{pfd}", flags)
        return fd, st
    except OSError:
        return None
    finally:
        os.close(pfd)


@dataclass(slots=True)
class _File:
    """A file the probe knows: where to reopen it and what it last sent of it."""

    key: tuple[int, int]
    path: str
    #: the /proc links (fd/N, map_files/…) naming the inode itself to open it by ("magic"),
    #: tried first (:meth:`ways`: then ``named``, the names a walk found). A tuple: tuples of
    #: strings are dropped from the collector's lists, a list a file was 100,000 more objects
    #: each of its full passes walked (docs/performance.md). Empty for a file only the walk
    #: found: its ``path`` is its one way (:meth:`ways`), two tuples fewer for each of 100,000.
    #: Strings, not (path, magic) pairs: a pair was 56 B more a way, two ways a file of the
    #: ~9,000 that 2,100 processes held (:meth:`ways` pairs them when asked)
    opens: tuple[str, ...]
    size_bytes: int = 0
    #: pid, comm, pid, comm … of up to MAX_HOLDERS processes holding it, in the order the scan
    #: met them: one flat tuple, not a dict (a dict was 224 B a file with 1 to 5 holders, and
    #: with 2,100 processes the probe knew 8,400 files; docs/performance.md)
    holders: tuple[int | str, ...] = ()
    under_path: bool = False
    #: (cached, dirty, writeback, evicted, recently evicted) pages, mincore: (cached, 0, …)
    pages: tuple[int, int, int, int, int] | None = None
    sent: CachedFile | None = None
    #: ticks since it was last measured
    measured_tick: int = -1
    #: the memory cgroup its sampled pages are charged to (None: not sampled yet)
    owner: Owner | None = None
    #: names the walk found it by (not magic), tried after ``opens``
    named: tuple[str, ...] = ()

    def holder_pairs(self) -> tuple[tuple[int, str], ...]:
        """(pid, comm) of each holder, sorted (as a CachedFile lists them)."""
        h = self.holders
        return tuple(sorted((cast(int, h[i]), cast(str, h[i + 1])) for i in range(0, len(h), 2)))

    def ways(self) -> tuple[tuple[str, bool], ...]:
        """(path, magic) to open it by: ``opens``, or the name the walk found it by."""
        if self.opens or self.named or not self.under_path:
            return tuple((p, True) for p in self.opens) + tuple((p, False) for p in self.named)
        return ((self.path, False),)


class PagecacheinfoProbe(Probe):
    """The files in the page cache: processes' open and mapped files, ``--cache-path`` trees."""

    name = "pagecacheinfo"
    needs_bpf = False
    cadence_s = 1.0
    #: only the Page cache pane shows what it reads (the exporter watches everything): off the
    #: pane its scans and refresh were a tenth of memtop's idle CPU at every 5 s, still its
    #: poll thread's second cost (docs/performance.md). At most half the thrashing window
    #: (memtop.state.pagecache.WINDOW_NS): the pane shown again reads a file's evictions over
    #: its window from the sample in force at its start, which is then at most this much older
    unwatched_cadence_s = UNWATCHED_CADENCE_S
    #: "files": a record for each file listed, with its holders, name and memory cgroup. The
    #: exporter exports only the listed files' sum (and the --cache-path files): without it the
    #: probe still finds, measures and ranks every file (the sum is the same), but keeps no
    #: holders, reads no names, samples no cgroups and sends a record only for a file under a
    #: --cache-path (12,000 files' holders were ~3 MiB of the exporter's heap)
    optional_parts = ("files",)

    @classmethod
    def at_start(cls, proc_root: str | Path) -> Self:
        return cls(str(proc_root))

    def __init__(
        self,
        proc_root: str = "/proc",
        paths: tuple[str, ...] = (),
        scan_every: int = 5,
        walk_every: int = 30,
        max_procs: int = 8192,
        max_fds: int = 16384,
        max_files: int = 200_000,
        top_n: int = 64,
        list_top: int = 500,
        resend_every: int = 30,
        budget: float = BUDGET,
        method: str = "",
        owner_top: int = OWNER_TOP,
        owner_every: int = 10,
    ) -> None:
        self.proc = proc_root
        self.paths = paths
        self.scan_every = scan_every
        self.walk_every = walk_every
        self.max_procs = max_procs
        self.max_fds = max_fds
        self.max_files = max_files
        self.top_n = top_n
        self.list_top = list_top
        self.resend_every = resend_every
        self.budget = budget
        #: the files holding the most whose memory cgroup is sampled, every ``owner_every`` ticks
        self.owner_top = owner_top
        self.owner_every = owner_every
        self._owners: PageOwners | None = None
        self._next_owner = 0
        self.last_owner_s = 0.0
        #: "cachestat" or "mincore" ("": cachestat, mincore when the kernel has none)
        self.method = method or "cachestat"
        #: whether the processes' open and mapped files are found (configure)
        self.scan_procs = True
        self._tick = 0
        #: whether the "files" part is read this poll (optional_parts)
        self._per_file = True
        self._files: dict[tuple[int, int], _File] = {}
        self._path_files: dict[tuple[int, int], _File] = {}
        #: (maps' dev field, inode) -> the key stat gave (maps name devices as the superblock's,
        #: which stat may not: overlayfs, btrfs)
        self._map_keys: dict[tuple[str, int], tuple[int, int] | None] = {}
        self._next_scan = 0
        self._next_walk = 0
        self._cursor = 0
        #: seconds a file's measurement took, smoothed (sizes the rotating slice)
        self.per_file_s = 20e-6
        self.last_scan_s = 0.0
        self.last_walk_s = 0.0
        self.last_refresh_s = 0.0
        #: every file known (the processes' and the walk's, merged at each scan), in one order
        self._all: dict[tuple[int, int], _File] = {}
        self._order: list[_File] = []
        #: the files holding the most at the last scan (measured every tick)
        self._top: list[_File] = []
        #: files listed before and not since the last CachedFiles (gone, or out of the listing)
        self._gone: list[tuple[int, int]] = []
        #: the files sent to the state: the top ``list_top`` by cached, dirty, recently evicted
        self._listed: set[tuple[int, int]] = set()
        #: past the last listed file's cached, dirty, recently evicted pages at the last rank: a
        #: file measured at or above one of these is listed at once
        self._floors = (1, 1, 1)
        #: cached and dirty pages of every file known (not only the listed)
        self._totals = [0, 0]
        self._scan_info: dict[str, int | bool | str] = {}
        #: the device of the proc root's own procfs (None: not a procfs, a test's fake root) and
        #: the inodes of its files the scan finds held open (a set while it runs, then sorted
        #: in an array). A /proc file has no page cache (it is never listed), but memtop itself
        #: holds two or three of them a process it watches (stat, schedstat, oom_score_adj): as
        #: _Files they were ~0.5 KiB each, ~1.5 MiB of memtop's RssAnon with 1,000 processes.
        #: Counted, so ``files_known`` and the ``max_files`` cut are what they were
        self._proc_dev: int | None = None
        self._proc_files: set[int] = set()
        self._proc_inodes = array("q")
        #: how many of those the walk did not find too (set by _merge)
        self._proc_known = 0
        self._walk_info: dict[str, int | bool | str] = {}
        self._walk_truncated = False
        #: files the last walk found new, and the seconds it took measuring them
        self.walk_new = 0
        self.walk_measure_s = 0.0

    def _budget(self) -> float:
        """The share of a core it may take now: a quarter of ``budget`` while the Page cache
        pane is not on screen (``watched`` False; snapshots, recordings and the exporter leave
        it True), what it feeds elsewhere (the totals, the exporter) then older."""
        return self.budget if self.watched else self.budget / 4

    def configure(self, paths: tuple[str, ...], procs: bool = True) -> None:
        """``paths``: the --cache-path trees; ``procs``: whether every process's open and mapped
        files are listed too (the exporter's ``--page-cache-listing``: off, only the trees)."""
        self.paths = tuple(paths)
        self.scan_procs = procs
        if not procs:
            self._proc_inodes = array("q")  # no scan: none found

    def load(self) -> None:
        pass  # nothing to attach; a file that cannot be opened is left out

    def close(self) -> None:
        if self._owners is not None:
            self._owners.close()
            self._owners = None

    def note(self) -> str:
        return "mincore: cached pages only" if self.method == "mincore" else ""

    def poll_failed(self) -> None:
        self._next_scan = self._tick + 1

    # -- the scans: which files ------------------------------------------------------------------
    def _scan_procs(self) -> dict[tuple[int, int], _File]:
        found: dict[tuple[int, int], _File] = {}
        truncated = False
        try:
            st = os.stat(os.path.join(self.proc, "self", "stat"))
            self._proc_dev = st.st_dev if os.path.ismount(self.proc) else None
        except OSError:
            self._proc_dev = None
        self._proc_files = set()
        try:
            pids = [p for p in os.listdir(self.proc) if p.isdigit()]
        except OSError:
            pids = []
        if len(pids) > self.max_procs:
            pids, truncated = pids[: self.max_procs], True
        try:
            self_fds = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            self_fds = -1  # no /proc mounted here: each_open_file finds nothing either
        try:
            procs, fds, truncated = self._scan_pids(pids, found, self_fds, truncated)
        finally:
            if self_fds >= 0:
                os.close(self_fds)
        self._scan_info = {"processes": procs, "fds_seen": fds, "truncated": truncated}
        self._proc_inodes = array("q", sorted(self._proc_files))
        self._proc_files = set()
        return found

    def _scan_pids(
        self, pids: list[str], found: dict[tuple[int, int], _File], self_fds: int, truncated: bool
    ) -> tuple[int, int, bool]:
        procs = fds = 0
        for pid in pids:
            comm_text = read_text(os.path.join(self.proc, pid, "comm"), 256)
            if comm_text is None:
                continue
            procs += 1
            comm = clean(comm_text.rstrip("\n"), 64)
            # one int object per process, not one per file it holds: the holders of ~8,400
            # files of 2,100 processes were ~40,000 ints (~1 MiB of memtop's RssAnon)
            holder = int(pid)
            n = self._scan_fds(pid, holder, comm, found, self_fds)
            fds += n
            truncated |= n >= self.max_fds
            self._scan_maps(pid, holder, comm, found)
            if len(found) + len(self._proc_files) >= self.max_files:
                truncated = True
                break
        return procs, fds, truncated

    def _hold(
        self, found: dict[tuple[int, int], _File], key: tuple[int, int], pid: int, comm: str
    ) -> _File | None:
        if key[0] == self._proc_dev:  # a /proc file: counted, never listed (_proc_files)
            if len(found) + len(self._proc_files) < self.max_files:
                self._proc_files.add(key[1])
            return None
        f = found.get(key)
        if f is None:
            if len(found) + len(self._proc_files) >= self.max_files:
                return None
            prev = self._files.get(key)
            f = _File(key, prev.path if prev else "", (), size_bytes=prev.size_bytes if prev else 0)
            if prev is not None:
                f.pages, f.sent, f.measured_tick = prev.pages, prev.sent, prev.measured_tick
                f.owner = prev.owner
            found[key] = f
        if not self._per_file:
            return f  # without the "files" part, no holders are kept
        h = f.holders
        # a scan meets a process's files one process at a time: a pid already among the
        # holders is the last one added
        if len(h) < 2 * MAX_HOLDERS and not (h and h[-2] == pid):
            f.holders = (*h, pid, comm)
        return f

    def _scan_fds(
        self, pid: str, holder: int, comm: str, found: dict[tuple[int, int], _File], self_fds: int
    ) -> int:
        """The regular files ``pid`` holds open, each by one lookup of its /proc/PID/fd link (an
        O_PATH open, procfd.each_open_file). A file not known yet (from the last scan, the walk
        or another pid) is measured there and then, reopened through /proc/self/fd: it is not
        looked up by its link again. Its name (a readlink) is read only when it is listed
        (:meth:`_name`)."""
        link_dir = os.path.join(self.proc, pid, "fd") + "/"
        walked, tick = self._path_files, self._tick
        # the walk's cachestat (no argument conversion; a failure is asked again the slow way,
        # which says why): the first scan measures every held file, 10,000 in the bench
        call, unpack, close = _CACHESTAT_FAST, _UNPACK, os.close
        nr, range_p, result_p = _FAST_ARGS

        def visit(name: str, pfd: int, st: os.stat_result) -> None:
            key = (st.st_dev, st.st_ino)
            f = self._hold(found, key, holder, comm)
            if f is None:
                return
            f.size_bytes = st.st_size
            if len(f.opens) < 2:
                f.opens += (link_dir + name,)
            if f.pages is not None:
                return
            under = walked.get(key)
            if under is not None and under.pages is not None:
                f.pages, f.measured_tick = under.pages, under.measured_tick
                return
            try:
                fd = reopen(pfd, self_fds)
            except OSError:
                return  # measured by the refresh, the slow way, which says why not
            try:
                if self.method == "cachestat" and call(nr, fd, range_p, result_p, 0) == 0:
                    f.pages = unpack(_RESULT_BUF)
                else:
                    f.pages = self._read_pages(fd, st.st_size)
                f.measured_tick = tick
            except OSError:
                pass
            finally:
                close(fd)

        return each_open_file(self.proc, pid, self.max_fds, visit)

    def _scan_maps(self, pid: str, holder: int, comm: str, found: dict[tuple[int, int], _File]) -> None:
        text = read_text(os.path.join(self.proc, pid, "maps"), 8 << 20, errors="surrogateescape")
        if not text:
            return
        seen: set[tuple[str, int]] = set()
        for line in text.splitlines():
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[5].startswith("/"):
                continue
            try:
                inode = int(parts[4])
            except ValueError:
                continue
            mkey = (parts[3], inode)
            if inode == 0 or mkey in seen:
                continue
            seen.add(mkey)
            link = os.path.join(self.proc, pid, "map_files", parts[0])
            if mkey not in self._map_keys:
                try:
                    st = os.stat(link)
                    self._map_keys[mkey] = (st.st_dev, st.st_ino) if stat_mod.S_ISREG(st.st_mode) else None
                except OSError:
                    continue
            key = self._map_keys[mkey]
            if key is None:
                continue
            f = self._hold(found, key, holder, comm)
            if f is None:
                continue
            if len(f.opens) < 2:
                f.opens += (link,)
            if not f.path:
                f.path = clean(parts[5], 1024)

    def _walk(self) -> dict[tuple[int, int], _File]:
        """Regular files below ``paths``, at most ``max_files`` in all: no symlink followed below
        the directories named, nothing opened but directories and regular files. A file's type
        and inode come from the directory entry (no stat each), its device from its directory's
        fstat. A file new to the walk is measured at once, opened by its name in the directory
        open (a lookup of one component, not of the whole path); measuring checks its type,
        device and inode against the file opened."""
        out: dict[tuple[int, int], _File] = {}
        self._walk_truncated = False
        self.walk_new = 0
        self.walk_measure_s = 0.0
        for top in self.paths:
            stack = [(top, True)]
            while stack:
                d, named = stack.pop()
                # the directory the user named may be a symlink; one found below is never followed
                flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC
                try:
                    dfd = os.open(d, flags if named else flags | os.O_NOFOLLOW)
                except OSError:
                    continue
                try:
                    self._walk_dir(d, dfd, out, stack)
                except OSError:
                    pass
                finally:
                    os.close(dfd)
                if self._walk_truncated:
                    break
        self._walk_info = {"files_under_paths": len(out), "truncated": self._walk_truncated}
        return out

    def _walk_dir(
        self, d: str, dfd: int, out: dict[tuple[int, int], _File], stack: list[tuple[str, bool]]
    ) -> None:
        dev = os.fstat(dfd).st_dev
        old, held_files, max_files = self._path_files, self._files, self.max_files
        prefix = d.rstrip("/") + "/"
        # a file new to the walk is measured at once by its name in the directory open: an open,
        # cachestat and close (its fstat when it is listed: _verify_listed). This loop runs for
        # every file of the trees (100,000 in the bench): the calls bound once, no call per file
        open_, close, call, unpack, tick = os.open, os.close, _CACHESTAT_FAST, _UNPACK, self._tick
        nr, range_p, result_p = _FAST_ARGS
        fast = self.method == "cachestat"
        # the new files and their names in two lists (a tuple each was one more object a file)
        new: list[_File] = []
        names: list[str] = []
        with os.scandir(dfd) as it:
            for entry in it:
                try:
                    # the type from the directory entry (no stat), files first: most entries are
                    if not entry.is_file(follow_symlinks=False):
                        if entry.is_dir(follow_symlinks=False):
                            stack.append((prefix + entry.name, False))
                        continue  # a symlink, FIFO, socket or device: never opened
                    key = (dev, entry.inode())
                except OSError:
                    continue
                if len(out) >= max_files:
                    self._walk_truncated = True
                    break
                prev = old.get(key)
                if prev is not None:
                    out[key] = prev  # known: its figures and where to open it kept
                    continue
                # the path is cleaned once, by the record it goes in (if it is listed)
                name = entry.name
                path = prefix + name
                f = out[key] = _File(key, path, (), under_path=True)
                held = held_files.get(key)
                if held is not None:
                    f.pages, f.sent, f.measured_tick = held.pages, held.sent, held.measured_tick
                    f.owner = held.owner
                    continue
                new.append(f)
                names.append(name)
        # the new files measured after the directory is read: timed as one (two clock reads a
        # file cost as much as the Python of the loop above)
        self.walk_new += len(new)
        t0 = time.monotonic()
        for f, name in zip(new, names, strict=True):
            if fast:
                try:
                    fd = open_(name, NAMED_FLAGS, dir_fd=dfd)
                except OSError:
                    fd = -1  # EPERM for O_NOATIME, or gone: the slow way says which
                if fd >= 0:
                    try:
                        if call(nr, fd, range_p, result_p, 0) == 0:
                            f.pages = unpack(_RESULT_BUF)
                            f.measured_tick = tick
                            f.size_bytes = UNCHECKED
                    finally:
                        close(fd)
            if f.pages is None:  # the slow way: mincore, or what failed
                self._measure_at(f, dfd, name)
                fast = self.method == "cachestat"
        # what the walk's cadence leaves out: measuring is the refresh's work
        self.walk_measure_s += time.monotonic() - t0

    def _measure_at(self, f: _File, dfd: int, name: str) -> None:
        """Measure a file the walk just found, by its name in the directory open as ``dfd``:
        an open, cachestat and close, no fstat (a quarter of the cost of 100,000 files). Its
        size and that it is the regular file the directory named (its inode) are checked when it
        is listed (:meth:`_verify_listed`) or measured again by the rotation; until then its
        figures count in the totals only (a file swapped in between the directory read and the
        open: a FIFO's figures are 0, and the next walk drops what is not a regular file)."""
        try:
            fd = os.open(name, NAMED_FLAGS, dir_fd=dfd)
        except PermissionError:  # O_NOATIME: only the owner or CAP_FOWNER
            try:
                fd = os.open(name, NAMED_FLAGS & ~os.O_NOATIME, dir_fd=dfd)
            except OSError:
                return
        except OSError:
            return
        try:
            pages: tuple[int, int, int, int, int] | None = None
            if self.method == "cachestat":
                if _cachestat_call(NR_CACHESTAT, fd, _RANGE_P, _RESULT_P, 0) != 0:
                    if ctypes.get_errno() != errno.ENOSYS:
                        return
                    self.method = "mincore"  # this kernel has no cachestat (before 6.5)
                else:
                    r = _RESULT
                    f.pages = (r.nr_cache, r.nr_dirty, r.nr_writeback, r.nr_evicted, r.nr_recently_evicted)
                    f.measured_tick, f.size_bytes = self._tick, UNCHECKED
                    return
            st = os.fstat(fd)
            if not stat_mod.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != f.key:
                return  # replaced since the directory was read: measured again at the next walk
            f.size_bytes = st.st_size
            if pages is None:
                pages = (mincore_pages(fd, st.st_size), 0, 0, 0, 0)
            f.pages, f.measured_tick = pages, self._tick
        except OSError:
            return
        finally:
            os.close(fd)

    # -- measuring -------------------------------------------------------------------------------
    def _open(self, path: str, key: tuple[int, int], magic: bool) -> tuple[int, os.stat_result] | None:
        if magic:
            return open_checked(path, key, True)
        # a name the walk found a regular file: opened as read_text opens (no symlink followed,
        # never blocking: a FIFO renamed into its place opens at once and fails the check)
        try:
            fd = os.open(path, NAMED_FLAGS)
        except PermissionError:  # O_NOATIME: only the owner or CAP_FOWNER
            try:
                fd = os.open(path, NAMED_FLAGS & ~os.O_NOATIME)
            except OSError:
                return None
        except OSError:
            return None
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            return None
        if not stat_mod.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != key:
            os.close(fd)
            return None
        return fd, st

    def _measure(self, f: _File) -> bool:
        """Read the file's pages now; False when it could not be opened (gone, replaced)."""
        for path, magic in f.ways():
            opened = self._open(path, f.key, magic)
            if opened is None:
                continue
            fd, st = opened
            try:
                f.size_bytes = st.st_size
                f.pages = self._read_pages(fd, st.st_size)
                f.measured_tick = self._tick
                return True
            except OSError:
                continue
            finally:
                os.close(fd)
        return False

    def _read_pages(self, fd: int, size: int) -> tuple[int, int, int, int, int]:
        """(cached, dirty, writeback, evicted, recently evicted) pages of the regular file open
        as ``fd`` (``size`` bytes): cachestat, or mincore (cached pages only) where the kernel
        has no cachestat."""
        if self.method == "cachestat":
            try:
                return cachestat(fd)
            except OSError as exc:
                if exc.errno != errno.ENOSYS:
                    raise
                self.method = "mincore"  # this kernel has no cachestat (before 6.5)
        return (mincore_pages(fd, size), 0, 0, 0, 0)

    def _name(self, f: _File) -> str:
        """The file's name: the one the walk or maps gave, else where a holder's fd link points,
        read on first use (a readlink for each of 10,000 held files would cost more than
        measuring them; only the listed are named). "" when every link is gone."""
        if not f.path:
            for link, magic in f.ways():
                if not magic:  # a name the walk found (cleaned by the record, as the walk's are)
                    f.path = link
                    break
                try:
                    f.path = clean(os.readlink(link), 1024)
                    break
                except OSError:
                    continue
        return f.path

    def _sample_owners(self) -> None:
        """The memory cgroup of the ``owner_top`` files holding the most (a sample of their
        resident pages each, memtop/linux/pagecgroup.py): a few dozen system calls a file, so
        only for those and only every ``owner_every`` ticks; a file keeps what it had."""
        if self._owners is None:
            self._owners = PageOwners()
        owners = self._owners
        for f in self._top[: self.owner_top]:
            if not f.pages or not f.pages[0]:
                continue
            got: Owner | None = None
            for path, magic in f.ways():
                opened = self._open(path, f.key, magic)
                if opened is None:
                    continue
                fd, st = opened
                try:
                    got = owners.owner(fd, st.st_size)
                except OSError as exc:
                    got = Owner(None, why=f"not sampled ({exc.strerror})")
                finally:
                    os.close(fd)
                break
            f.owner = got or Owner(None, why="cannot be opened safely (gone, or not a regular file)")

    def _record(self, f: _File) -> CachedFile:
        pages = f.pages or (0, 0, 0, 0, 0)
        exact = self.method == "cachestat"
        owner = f.owner or Owner(
            None, why=f"not sampled: only the {self.owner_top} files holding the most are"
        )
        return CachedFile(
            dev=f.key[0],
            ino=f.key[1],
            path=self._name(f),
            size_bytes=max(0, f.size_bytes),
            cached_bytes=pages[0] * PAGE_SIZE,
            dirty_bytes=pages[1] * PAGE_SIZE if exact else None,
            writeback_bytes=pages[2] * PAGE_SIZE if exact else None,
            evicted_bytes=pages[3] * PAGE_SIZE if exact else None,
            recently_evicted_bytes=pages[4] * PAGE_SIZE if exact else None,
            method=self.method,
            holders=f.holder_pairs(),
            under_path=f.under_path,
            cgroup=owner.cgroup or "",
            cgroup_pages=owner.pages if owner.cgroup else 0,
            cgroup_sampled_pages=owner.sampled,
            cgroup_why=owner.why,
        )

    def _as_sent(self, f: _File) -> bool:
        """Whether :meth:`_record` of ``f`` now would equal what it sent (``f.sent``), told from
        what the record is made of, no record made (~26 a poll were made only to be found equal:
        the files measured at each tick, most of them unchanged). The record's strings are the
        cleaner's fixed points, so an input equal to the field sent makes that very field. A
        file with no name yet is not told (:meth:`_name` may read one now)."""
        s = f.sent
        if s is None or not f.path:
            return False
        pages = f.pages or (0, 0, 0, 0, 0)
        owner = f.owner
        if owner is None:
            cgroup = ("", 0, 0, f"not sampled: only the {self.owner_top} files holding the most are")
        else:
            cgroup = (owner.cgroup or "", owner.pages if owner.cgroup else 0, owner.sampled, owner.why)
        exact = self.method == "cachestat"
        return (
            s.cached_bytes == pages[0] * PAGE_SIZE
            and s.size_bytes == max(0, f.size_bytes)
            and s.method == self.method
            and (s.dirty_bytes, s.writeback_bytes, s.evicted_bytes, s.recently_evicted_bytes)
            == (
                (pages[1] * PAGE_SIZE, pages[2] * PAGE_SIZE, pages[3] * PAGE_SIZE, pages[4] * PAGE_SIZE)
                if exact
                else (None, None, None, None)
            )
            and s.path == f.path
            and s.under_path == f.under_path
            and (s.cgroup, s.cgroup_pages, s.cgroup_sampled_pages, s.cgroup_why) == cgroup
            and s.holders == f.holder_pairs()
        )

    def _choose(self, fresh: list[_File]) -> list[_File]:
        """What to measure this tick: the files a scan found new or changed (``fresh``), the files
        that held the most at the last scan, and a rotating slice of the others as large as the
        budget allows."""
        chosen = {id(f): f for f in fresh}
        for f in self._top:
            chosen.setdefault(id(f), f)
        files = self._order
        if files:
            room = int(self._budget() / 2 / max(self.per_file_s, 1e-7)) - len(chosen)
            n = min(len(files), max(16, room))
            start = self._cursor % len(files)
            for i in range(n):
                f = files[(start + i) % len(files)]
                chosen.setdefault(id(f), f)
            self._cursor = start + n
        return list(chosen.values())

    def _merge(self) -> list[_File]:
        """After a scan or a walk: one table of every file known, and the files to measure now
        (new ones, and those whose holders changed)."""
        every = dict(self._path_files)
        for key, f in self._files.items():
            under = every.get(key)
            if under is not None:
                f.under_path = True
                if under.measured_tick > f.measured_tick:
                    f.pages, f.measured_tick = under.pages, under.measured_tick
                f.owner = f.owner or under.owner
                # once: a walk merged without a scan in between finds it there already
                for path, magic in under.ways():
                    if magic and path not in f.opens:
                        f.opens += (path,)
                    elif not magic and path not in f.named:
                        f.named += (path,)
            every[key] = f
        fresh = []
        for f in every.values():
            if f.pages is None:
                fresh.append(f)
            elif f.sent is not None and (
                f.sent.under_path != f.under_path or f.sent.holders != f.holder_pairs()
            ):
                fresh.append(f)
        for k in self._all:
            if k not in every:
                self._drop(k)
        self._all = every
        dev = self._proc_dev
        self._proc_known = len(self._proc_inodes)
        if self._proc_known and any(k[0] == dev for k in self._path_files):  # a walk of /proc
            self._proc_known = sum(1 for ino in self._proc_inodes if (dev, ino) not in every)
        self._order = list(every.values())
        return fresh

    def _drop(self, key: tuple[int, int]) -> None:
        """A file gone: out of the totals, and out of the listing (the state is told)."""
        f = self._all.get(key)
        if f is not None and f.pages is not None:
            self._totals[0] -= f.pages[0]
            self._totals[1] -= f.pages[1]
            f.pages = None
        if key in self._listed:
            self._listed.discard(key)
            self._gone.append(key)

    def _rank(self) -> None:
        """After a scan: the files holding the most (measured every tick until the next rank)
        and the listing, the top ``list_top`` files by cached, dirty and recently evicted pages
        (a figure of 0 lists nothing); the files that left it are sent as gone."""
        # this runs over every file known (110,000 in the bench): the keys are C (attrgetter,
        # itemgetter), not a lambda a file, and the rarer figures are ranked among the files
        # that have them only
        measured = [f for f in self._order if f.pages is not None and any(f.pages)]
        pages: list[tuple[int, int, int, int, int]] = [f.pages for f in measured]  # type: ignore[misc]
        # summed afresh at each rank: between ranks they follow each measurement (a file held
        # and under a --cache-path is two objects, whose figures can differ until it is measured)
        self._totals[0] = sum(map(itemgetter(0), pages))
        self._totals[1] = sum(map(itemgetter(1), pages))
        # by cached pages first (ties: by the other figures)
        by_cached = heapq.nlargest(max(self.top_n, self.list_top), measured, key=attrgetter("pages"))
        self._top = by_cached[: self.top_n]
        listed: set[tuple[int, int]] = set()
        floors = []
        for slot in (0, 1, 4):
            if slot == 0:
                best = by_cached[: self.list_top]
            else:
                having = [f for f, p in zip(measured, pages, strict=True) if p[slot]]
                best = heapq.nlargest(self.list_top, having, key=lambda f: f.pages[slot] if f.pages else 0)
            best = [f for f in best if f.pages and f.pages[slot]]
            listed.update(f.key for f in best)
            # a file joins by this figure only past the listing's last file (ties stay out: 100,000
            # files of one page each must not all join); while fewer than list_top have it, any
            full = len(best) >= self.list_top
            floors.append(best[-1].pages[slot] + 1 if full and best[-1].pages else 1)
        self._floors = (floors[0], floors[1], floors[2])
        for k in self._listed - listed:
            self._gone.append(k)
            f = self._all.get(k)
            if f is not None:
                f.sent = None
        self._listed = listed

    def _verify_listed(self) -> None:
        """The listed files the walk measured without an fstat measured again with one (their
        size, and that each is the regular file found); one that is not is dropped."""
        for key in list(self._listed):
            f = self._all.get(key)
            if f is not None and f.size_bytes == UNCHECKED and not self._measure(f):
                self._drop(key)

    def _qualifies(self, f: _File) -> bool:
        p = f.pages
        if p is None:
            return False
        c, d, r = self._floors
        return (p[0] > 0 and p[0] >= c) or (p[1] > 0 and p[1] >= d) or (p[4] > 0 and p[4] >= r)

    def poll(self) -> list[Record]:
        self._tick += 1
        self._per_file = self.reads("files")
        out: list[Record] = []
        changed = False
        if self._tick == 1 or self._tick >= self._next_scan:
            t0 = time.monotonic()
            # a _File a file, no cycle among them: the collector would only walk them (six
            # full passes over the 110,000 of the bench, a sixth of its first poll)
            with startup_gc.paused():
                self._files = self._scan_procs() if self.scan_procs else {}
            self.last_scan_s = time.monotonic() - t0
            # the scans and the walk take a quarter of the budget each, the refresh the rest
            self._next_scan = self._tick + max(self.scan_every, int(self.last_scan_s * 4 / self._budget()))
            changed = True
        if self.paths and (self._tick == 1 or self._tick >= self._next_walk):
            t0 = time.monotonic()
            with startup_gc.paused():
                self._path_files = self._walk()
            # the walk's own cost sets its cadence: measuring the files it found new is the
            # refresh's (the first walk of 100,000 files would otherwise wait 400 ticks)
            self.last_walk_s = time.monotonic() - t0 - self.walk_measure_s
            self._next_walk = self._tick + max(self.walk_every, int(self.last_walk_s * 4 / self._budget()))
            changed = True
        fresh = self._merge() if changed else []
        t0 = time.monotonic()
        todo = self._choose(fresh)
        totals = self._totals
        for f in todo:
            before = f.pages
            if not self._measure(f) and before is not None:
                self._drop(f.key)  # gone or replaced: measured again once a scan finds it
                continue
            if f.pages is None:
                continue
            if before is not None:
                totals[0] -= before[0]
                totals[1] -= before[1]
            totals[0] += f.pages[0]
            totals[1] += f.pages[1]
        took = time.monotonic() - t0
        self.last_refresh_s = took
        if todo:
            self.per_file_s = 0.7 * self.per_file_s + 0.3 * (took / len(todo))
        if changed:
            self._rank()
            self._verify_listed()
            # the listing may have changed: every listed file is sent if new (a file the rank
            # left out is below every floor: it does not qualify)
            listed_now = self._listed
            todo = [f for f in self._order if f.key in listed_now]
        if self.owner_top and self._per_file and self._tick >= self._next_owner:
            t0 = time.monotonic()
            self._sample_owners()
            self.last_owner_s = time.monotonic() - t0
            self._next_owner = self._tick + self.owner_every
        if self._tick % self.resend_every == 0:
            # the whole listing again now and then: files are sent when they change, and a
            # recording begun after the first poll (once the BPF probes attached) or a replay
            # seeking to its middle must not lack the files that held still
            for f in self._order:
                f.sent = None
            todo = self._order
        for f in todo:
            if f.pages is None:
                continue
            if f.key not in self._listed:
                if not self._qualifies(f):
                    continue
                if f.size_bytes == UNCHECKED and not self._measure(f):
                    continue  # its size and inode checked before it is shown (_measure_at)
                self._listed.add(f.key)
            if not self._per_file and not f.under_path:
                continue  # listed (it counts in the sum), but no record asked for
            if self._as_sent(f):
                continue  # its record would be the one it sent: not made to be compared
            rec = self._record(f)
            if rec != f.sent:
                out.append(rec)
                f.sent = rec
        # a file that left the listing at the rank and came back in the same poll is not gone
        gone = tuple(sorted({k for k in self._gone if k not in self._listed}))
        self._gone = []
        out.append(
            CachedFiles(
                gone=gone,
                method=self.method,
                paths=tuple(clean(p, 1024) for p in self.paths),
                processes=int(self._scan_info.get("processes", 0)),
                fds_seen=int(self._scan_info.get("fds_seen", 0)),
                files_known=len(self._all) + self._proc_known,
                files_under_paths=int(self._walk_info.get("files_under_paths", 0)),
                truncated=bool(self._scan_info.get("truncated") or self._walk_info.get("truncated")),
                why=self._why(),
                cached_bytes=totals[0] * PAGE_SIZE,
                dirty_bytes=totals[1] * PAGE_SIZE if self.method == "cachestat" else None,
                listed_cached_bytes=self._listed_cached_pages() * PAGE_SIZE,
            )
        )
        return out

    def _listed_cached_pages(self) -> int:
        """Cached pages of the files listed: the sum of their records' figures as the state holds
        them (a listed file's record is sent whenever a figure of it changes)."""
        files = self._all
        return sum(
            f.pages[0] for f in (files.get(k) for k in self._listed) if f is not None and f.pages is not None
        )

    def measured(self) -> list[CachedFile]:
        """Every file known and measured, with its latest figures (listed or not)."""
        return [self._record(f) for f in self._all.values() if f.pages is not None]

    def _why(self) -> str:
        parts = []
        if self._scan_info.get("truncated"):
            parts.append(f"processes' files cut at {self.max_files} files / {self.max_fds} fds a process")
        if self._walk_info.get("truncated"):
            parts.append(f"--cache-path walk cut at {self.max_files} files")
        return "; ".join(parts)


def _file_counts(entry: bytes, key_size: int) -> tuple[int, int, int, int]:
    """(device, inode, pages added, pages deleted) of a pc_files entry, its key (``key_size``
    bytes) then its value."""
    ino, kdev, _pad = FILE_KEY.unpack_from(entry)
    added, deleted = COUNTS.unpack_from(entry, key_size)
    # the kernel's dev_t (major << 20 | minor) as stat's st_dev encodes it
    return os.makedev(kdev >> 20, kdev & 0xFFFFF), ino, added, deleted


def _entries(keys: bytes, values: bytes, n: int, ksz: int, vsz: int) -> bytes:
    """A map dump's keys and values as one buffer of entries, each its key then its value (the
    sizes multiples of 8: copied 8 bytes at a time, a strided copy per word of an entry)."""
    if ksz % 8 or vsz % 8:
        return b"".join(keys[i * ksz : (i + 1) * ksz] + values[i * vsz : (i + 1) * vsz] for i in range(n))
    kw, vw = ksz // 8, vsz // 8
    width = kw + vw
    buf = bytearray(n * (ksz + vsz))
    out = memoryview(buf).cast("Q")
    k, v = memoryview(keys).cast("Q"), memoryview(values).cast("Q")
    for w in range(kw):
        out[w::width] = k[w::kw]
    for w in range(vw):
        out[kw + w :: width] = v[w::vw]
    return bytes(buf)


class PagecacheProbe(BpfProbe):
    """Pages added to and deleted from the page cache per file and per process (filemap
    tracepoints, counted in kernel maps)."""

    name = "pagecache"
    program = "pagecache"
    shares_unit = True
    #: only the Page cache pane shows it; its two map dumps (up to 16,384 files) were a quarter
    #: of memtop's idle CPU when read every tick off the pane (docs/performance.md); its counters
    #: count on in the kernel meanwhile, and the pane shown again divides by the real interval
    unwatched_cadence_s = UNWATCHED_CADENCE_S
    #: the per-file and per-process maps (the pane's tables): the exporter exports the totals only
    optional_parts = ("per_file",)
    tracepoints: ClassVar[tuple[str, ...]] = (
        "filemap:mm_filemap_add_to_page_cache",
        "filemap:mm_filemap_delete_from_page_cache",
    )

    def __init__(self, max_files: int = 16384, max_pids: int = 4096) -> None:
        super().__init__()
        self.max_files = max_files
        self.max_pids = max_pids
        #: what the last poll read: the files as the map's entries (key then value) in one
        #: buffer, only those that changed decoded and sent again (a dict of each entry's key and
        #: value bytes was ~130 B a file, 16,384 at most; :meth:`poll`), and per pid as sent
        self._files = b""
        self._pids: dict[int, tuple[str, int, int]] = {}

    def defines(self) -> dict[str, int]:
        return {"PC_MAX_FILES": self.max_files, "PC_MAX_PIDS": self.max_pids, "PC_ADDED": 0, "PC_DELETED": 1}

    def poll(self) -> list[Record]:
        if self.bpf is None:
            return []
        added, deleted = self.array_slots("pc_totals", 2)
        if not self.reads("per_file"):
            return [PagecacheActivity(added=added, deleted=deleted, page_bytes=PAGE_SIZE)]
        # the maps in a few batched lookups: a syscall per entry would cost 16,384 a tick. Each
        # file's entry is compared as its raw bytes and only one that changed since the last
        # poll is decoded: unpacking every entry of a full map was ~9 ms of a poll, the bytes
        # ~3.5. An entry (key and value) not among the last poll's changed or is new; a map
        # dump holds a key once (a hash map's batched lookup reads each bucket once, and a key
        # has one bucket), so the entries are the files
        keys, values, n_files, key_size, value_size = bcc_compat.map_dump(self.bpf, "pc_files")
        files_now = _entries(keys, values, n_files, key_size, value_size)
        del keys, values
        size = key_size + value_size
        last_files = self._files
        if files_now == last_files:
            changed: list[bytes] = []
        else:
            last = {last_files[i : i + size] for i in range(0, len(last_files), size)}
            changed = [
                e for e in (files_now[i : i + size] for i in range(0, len(files_now), size)) if e not in last
            ]
            del last
        keys, values, n, ksz, vsz = bcc_compat.map_dump(self.bpf, "pc_pids")
        pids_now: dict[int, tuple[str, int, int]] = {}
        for i in range(n):
            pid = int.from_bytes(keys[i * ksz : i * ksz + 4], "little")
            a, d = PID_COUNTS.unpack_from(values, i * vsz)
            comm = values[i * vsz + 16 : i * vsz + 32]
            prev = self._pids.get(pid)
            name = prev[0] if prev is not None else clean(comm.split(b"\0", 1)[0], 16)
            pids_now[pid] = (name, a, d)
        files = tuple(sorted(_file_counts(e, key_size) for e in changed))
        pids = tuple(sorted((p, *v) for p, v in pids_now.items() if self._pids.get(p) != v))
        self._files, self._pids = files_now, pids_now
        return [
            PagecacheActivity(
                added=added,
                deleted=deleted,
                files=files,
                pids=pids,
                files_tracked=n_files,
                pids_tracked=len(pids_now),
                page_bytes=PAGE_SIZE,
            )
        ]
