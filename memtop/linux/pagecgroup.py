"""Which memory cgroup a file's cached pages are charged to, as the kernel tells it.

The kernel names the memory cgroup of any page frame in ``/proc/kpagecgroup`` (root only: one
u64 per PFN, the inode of the memcg's directory on the hierarchy the memory controller is bound
to; of its closest online ancestor when the memcg is being removed; 0 when uncharged). A file's
pages have no PFN a process can see until it maps them, so for one file:

1. it is mapped read-only with ``MADV_RANDOM``: no readahead around a fault, and the kernel
   neither marks the mapped pages accessed when they are unmapped nor counts their young bits as
   references in reclaim (``vma_has_recency`` in mm/): sampling does not age the file's pages;
2. ``mincore(2)`` finds the resident pages (nothing is faulted);
3. a bounded sample of those, spread over the file, is faulted in by handing their addresses to
   ``write(2)`` on a pipe: a resident page maps with a minor fault, no I/O. The kernel reads
   them, not this process: a page truncated away meanwhile makes the write fail with EFAULT
   where a load from user space would raise SIGBUS (and ``MADV_POPULATE_READ`` or
   ``/proc/self/mem`` would mark the pages accessed);
4. their PFNs are read from ``/proc/self/pagemap`` (bits 0-54 when bit 63, present, is set; 0
   without CAP_SYS_ADMIN), then each PFN's memcg inode from ``/proc/kpagecgroup``;
5. the inode is named by a map of the memory hierarchy's directories (walked once, again on a
   miss at most every ``refresh_s``).

The filemap add tracepoint gives a PFN too, but only for pages added while it runs, and by the
time user space reads /proc/kpagecgroup for it the frame may hold anything else: not exact.

Pure file reading and system calls (no bcc); only ever given fds of regular files the caller
opened safely.
"""

from __future__ import annotations

import ctypes
import os
import resource
import time
from collections import Counter
from dataclasses import dataclass

from memtop.core.text import clean
from memtop.linux import cgroupfs

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
#: pages of a file sampled at most (each costs a fault, two 8-byte reads)
SAMPLE_PAGES = 16
#: the largest mincore vector read in one go; a larger file is looked at in SAMPLE_PAGES windows
MINCORE_WHOLE_PAGES = 1 << 20
WINDOW_PAGES = 1 << 14
PFN_MASK = (1 << 55) - 1
PRESENT = 1 << 63

_libc = ctypes.CDLL(None, use_errno=True)
_mmap = _libc.mmap
_mmap.restype = ctypes.c_void_p
_mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_munmap = _libc.munmap
_munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_madvise = _libc.madvise
_madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_mincore = _libc.mincore
_mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_write = _libc.write
_write.restype = ctypes.c_ssize_t
_write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
_MAP_FAILED = ctypes.c_void_p(-1).value
PROT_READ, MAP_SHARED, MADV_RANDOM = 0x1, 0x01, 1
#: getrusage(2)'s who for the calling thread (Linux; the probe samples in one thread)
RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", 1)


def _err() -> OSError:
    err = ctypes.get_errno()
    return OSError(err, os.strerror(err))


@dataclass(frozen=True, slots=True)
class Owner:
    """What the sample of one file said: ``cgroup`` the memcg holding most of the sampled pages
    (its path below the memory hierarchy, cleaned; None when the kernel did not tell), ``pages``
    of ``sampled`` charged to it, and ``why`` when ``cgroup`` is None."""

    cgroup: str | None
    pages: int = 0
    sampled: int = 0
    why: str = ""


def mincore_pages(fd: int, size: int) -> int:
    """Pages of the file open as ``fd`` (``size`` bytes) in the page cache, by mincore(2) over a
    read-only shared mapping (nothing is read: a mapping's pages are not faulted by mincore)."""
    if size <= 0:
        return 0
    pages = (size + PAGE_SIZE - 1) // PAGE_SIZE
    addr = _mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
    if addr is None or addr == _MAP_FAILED:
        raise _err()
    try:
        vec = (ctypes.c_ubyte * pages)()
        if _mincore(addr, size, vec) != 0:
            raise _err()
        # the low bit is "resident"; the others are reserved (0)
        return sum(1 for b in bytes(vec) if b & 1) if pages < 64 else pages - bytes(vec).count(0)
    finally:
        _munmap(addr, size)


def spread(vec: bytes, base: int, count: int) -> list[int]:
    """Up to ``count`` indexes (plus ``base``) of resident pages in the mincore vector ``vec``
    (the low bit of each byte: resident; the others are reserved, 0), one at or after each of
    ``count`` evenly spaced points, without repeats."""
    out: list[int] = []
    n = len(vec)
    for k in range(count):
        i = vec.find(b"\x01", k * n // count)
        if i < 0:
            break
        if not out or out[-1] != base + i:
            out.append(base + i)
    return out


class MemcgNames:
    """The memory hierarchy's directories by inode: what /proc/kpagecgroup's numbers name."""

    def __init__(self, refresh_s: float = 10.0, max_cgroups: int = 100_000) -> None:
        self.refresh_s = refresh_s
        self.max_cgroups = max_cgroups
        self._names: dict[int, str] = {}
        self._walked = -1e18
        self.hierarchy: cgroupfs.Hierarchy | None = cgroupfs.layout().memory

    def _walk(self) -> None:
        h = self.hierarchy
        self._walked = time.monotonic()
        if h is None:
            return
        names: dict[int, str] = {}
        for path, d in cgroupfs.walk(h.mountpoint, self.max_cgroups):
            try:
                names[os.stat(d, follow_symlinks=False).st_ino] = clean(path, 1024)
            except OSError:
                continue
        self._names = names

    def name(self, ino: int) -> str | None:
        """The cgroup path of memcg inode ``ino`` (None when no directory has it)."""
        got = self._names.get(ino)
        if got is None and time.monotonic() - self._walked >= self.refresh_s:
            self._walk()  # a cgroup made since the last walk
            got = self._names.get(ino)
        return got


class PageOwners:
    """Samples files' pages for their memcg: /proc/self/pagemap, /proc/kpagecgroup and a pipe
    held open between samples (:meth:`close`). ``why`` says what is missing when it cannot."""

    def __init__(self, sample_pages: int = SAMPLE_PAGES, names: MemcgNames | None = None) -> None:
        self.sample_pages = sample_pages
        self.names = names if names is not None else MemcgNames()
        self.why = ""
        #: sampled pages that had been evicted by the time they were touched (read back by memtop)
        self.read_in = 0
        self._pagemap = self._kpc = -1
        self._pipe: tuple[int, int] | None = None
        if self.names.hierarchy is None:
            self.why = "no memory controller mounted"
            return
        try:
            self._kpc = os.open("/proc/kpagecgroup", os.O_RDONLY | os.O_CLOEXEC)
            self._pagemap = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
            self._pipe = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            self.why = (
                f"/proc/kpagecgroup or pagemap unreadable ({exc.strerror}; needs root and CONFIG_MEMCG)"
            )
            self.close()

    def close(self) -> None:
        for fd in (self._kpc, self._pagemap, *(self._pipe or ())):
            if fd >= 0:
                os.close(fd)
        self._kpc = self._pagemap = -1
        self._pipe = None

    def _resident(self, addr: int, pages: int) -> list[int]:
        """Indexes of up to ``sample_pages`` resident pages of the mapping, spread over it."""
        if pages <= MINCORE_WHOLE_PAGES:
            windows = [(0, pages)]
        else:
            step = pages // self.sample_pages
            windows = [(k * step, min(WINDOW_PAGES, step)) for k in range(self.sample_pages)]
        per = max(1, self.sample_pages // len(windows))
        out: list[int] = []
        for first, n in windows:
            vec = (ctypes.c_ubyte * n)()
            if _mincore(addr + first * PAGE_SIZE, n * PAGE_SIZE, vec) != 0:
                raise _err()
            out += spread(bytes(vec), first, per)
        return out[: self.sample_pages]

    def _inodes(self, addr: int, idx: list[int]) -> list[int]:
        """The memcg inode of each sampled page that could be mapped (0: not charged)."""
        assert self._pipe is not None
        r, w = self._pipe
        out = []
        one = ctypes.c_ubyte()
        for i in idx:
            va = addr + i * PAGE_SIZE
            # still resident? A page evicted since the file's mincore would be read from disk by
            # the touch, and charged to memtop's memcg (a thrashing file loses pages by the ms)
            if _mincore(va, PAGE_SIZE, ctypes.byref(one)) != 0 or not one.value & 1:
                continue
            majflt = resource.getrusage(RUSAGE_THREAD).ru_majflt
            # the kernel reads the byte: a fault it cannot serve is EFAULT here, never SIGBUS
            if _write(w, va, 1) != 1:
                continue
            os.read(r, 16)
            if resource.getrusage(RUSAGE_THREAD).ru_majflt != majflt:
                # evicted in between after all: this thread read it, so it is memtop's page now,
                # not a sample of whose it was
                self.read_in += 1
                continue
            entry = int.from_bytes(os.pread(self._pagemap, 8, (va // PAGE_SIZE) * 8), "little")
            pfn = entry & PFN_MASK
            if not entry & PRESENT or pfn == 0:
                continue
            raw = os.pread(self._kpc, 8, pfn * 8)
            if len(raw) == 8:
                out.append(int.from_bytes(raw, "little"))
        return out

    def owner(self, fd: int, size_bytes: int) -> Owner:
        """The memcg of the file open read-only as ``fd`` (``size_bytes`` long), by a sample of
        its resident pages."""
        if self.why:
            return Owner(None, why=self.why)
        pages = (size_bytes + PAGE_SIZE - 1) // PAGE_SIZE
        if pages == 0:
            return Owner(None, why="empty file")
        length = pages * PAGE_SIZE
        addr = _mmap(None, length, PROT_READ, MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            return Owner(None, why=f"cannot be mapped ({os.strerror(ctypes.get_errno())})")
        try:
            if _madvise(addr, length, MADV_RANDOM) != 0:
                # without it, unmapping would mark the sampled pages accessed: not sampled
                return Owner(None, why=f"madvise failed ({os.strerror(ctypes.get_errno())})")
            idx = self._resident(addr, pages)
            if not idx:
                return Owner(None, why="nothing resident when last sampled")
            inodes = self._inodes(addr, idx)
        finally:
            _munmap(addr, length)
        return self._tally(inodes)

    def _tally(self, inodes: list[int]) -> Owner:
        charged = Counter(i for i in inodes if i)
        if not charged:
            why = "pages not charged to a memory cgroup" if inodes else "no page could be sampled"
            return Owner(None, 0, len(inodes), why)
        ino, n = charged.most_common(1)[0]
        name = self.names.name(ino)
        if name is None:
            return Owner(None, n, len(inodes), f"memory cgroup inode {ino} not found (removed?)")
        return Owner(name, n, len(inodes))
