"""Page cache: the files in it (what cachestat or mincore said of each), the pages added to and
deleted from it per file and per process, and which files thrash (evicted, then read back, within
the window). Rates of the cumulative counters are derived here."""

from __future__ import annotations

import dataclasses
import struct
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.pagecache import CachedFile, CachedFiles, PagecacheActivity
from memtop.state.base import SubState

if TYPE_CHECKING:
    from memtop.state import State

#: the thrashing window: a file evicted and read back within it thrashes
WINDOW_NS = 30_000_000_000
#: samples of a file's figures kept (one per change)
SAMPLES = 64
#: files and processes whose activity is kept (the kernel's maps bound them too): the least
#: recently active go first
MAX_ACTIVE_FILES = 32768
MAX_PIDS = 8192

Sample = tuple[int, int, int]  # (ts_ns, a, b)


I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
_SAMPLE = struct.Struct("=3q")
_TS = struct.Struct("=q")
_COUNTS = struct.Struct("=2q")
_SIZE = _SAMPLE.size
_U64 = (1 << 64) - 1

#: a file's key in :attr:`PagecacheState.file_counts`: its device and inode as one int
#: (``dev << 64 | ino``); an inode beyond 64 bits (only a recording's) keeps its (dev, ino)
FileKey = int | tuple[int, int]


def file_key(dev: int, ino: int) -> FileKey:
    """The key of file (dev, ino) in :attr:`PagecacheState.file_counts`: one int of ~40 B where
    a tuple of two ints was ~120 B a file, every file the pagecache probe ever counted (up to
    MAX_ACTIVE_FILES); a one-to-one map (the inode in the low 64 bits, any device above)."""
    return dev << 64 | ino if 0 <= ino <= _U64 else (dev, ino)


def dev_ino(key: FileKey) -> tuple[int, int]:
    """(dev, ino) of a :func:`file_key`."""
    return key if isinstance(key, tuple) else (key >> 64, key & _U64)


def packed_append(data: bytes, ts_ns: int, a: int, b: int) -> bytes:
    """``data`` (samples packed as int64 triples, the latest last) with (ts_ns, a, b) after it,
    and of those before only the ones the thrashing window can still need (see
    :class:`Samples`). Values beyond int64 are kept at its bounds."""
    try:
        new = _SAMPLE.pack(ts_ns, a, b)
    except struct.error:
        new = _SAMPLE.pack(*(max(I64_MIN, min(v, I64_MAX)) for v in (ts_ns, a, b)))
    d = data + new
    n = len(d) // _SIZE
    # the sample in force at the window's start (the last at or before it), as of now
    start = _TS.unpack_from(new)[0] - WINDOW_NS
    keep_from = 0
    for i in range(n - 1, -1, -1):
        if _TS.unpack_from(d, _SIZE * i)[0] <= start:
            keep_from = i
            break
    keep_from = max(keep_from, n - SAMPLES)
    keep_from = min(keep_from, n - 2) if n >= 2 else 0
    return d[_SIZE * keep_from :] if keep_from > 0 else d


def packed_len(data: bytes) -> int:
    """How many samples packed ``data`` holds."""
    return len(data) // _SIZE


def packed_last(data: bytes) -> tuple[int, int]:
    """(a, b) of the latest sample of packed ``data`` (not empty)."""
    a, b = _COUNTS.unpack_from(data, len(data) - 16)
    return a, b


def packed_since(data: bytes, now_ns: int) -> tuple[Sample, Sample] | None:
    """:func:`_since` of packed samples."""
    n = len(data) // _SIZE
    if n < 2:
        return None
    unpack = _SAMPLE.unpack_from
    first: Sample = unpack(data, 0)
    for i in range(1, n):
        sample: Sample = unpack(data, _SIZE * i)
        if sample[0] > now_ns - WINDOW_NS:
            break
        first = sample
    return first, unpack(data, _SIZE * (n - 1))


class Samples:
    """A file's (ts_ns, a, b) samples, one per change, the latest last, packed as int64 triples
    in one bytes object: only those the thrashing window can still need are kept. A ``deque`` of
    3-tuples was ~0.6 KiB a file empty and ~0.1 KiB a sample, and with every file the pagecache
    probe counted (up to 32,768) it was what grew most in memtop's RssAnon over a session's first
    minutes (bench/self_memory.py, docs/performance.md); an ``array`` was ~190 B a file with two
    samples, the bytes ~100. Kept: the newest SAMPLES, of them only
    from the one in force at the window's start as of the newest sample's tick (a later view's
    window starts later still), and at least two (two samples equal to the last make a span of
    nothing, one makes no span): :meth:`since` answers as the deque did. Values beyond int64 (a
    recording may hold any uint64) are kept at its bounds, as a process's History keeps them.
    The page cache state's per-file counts hold the bytes alone (:func:`packed_append`)."""

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data = b""

    def append(self, ts_ns: int, a: int, b: int) -> None:
        self._data = packed_append(self._data, ts_ns, a, b)

    def __len__(self) -> int:
        return len(self._data) // _SIZE

    def __getitem__(self, i: int) -> Sample:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("sample index out of range")
        sample: Sample = _SAMPLE.unpack_from(self._data, _SIZE * i)
        return sample

    def __iter__(self) -> Iterator[Sample]:
        for sample in _SAMPLE.iter_unpack(self._data):
            yield sample[0], sample[1], sample[2]


def _since(history: Samples, now_ns: int) -> tuple[Sample, Sample] | None:
    """The sample in force at the window's start and the latest (a sample holds until the next:
    one is kept per change); None with fewer than two."""
    return packed_since(history._data, now_ns)


@dataclass(slots=True)
class FileSeen:
    """A file's latest figures; over the window, (ts_ns, cached, evicted) samples and, from the
    pagecache probe, (ts_ns, pages added, pages deleted) samples."""

    rec: CachedFile
    history: Samples = field(default_factory=Samples)


class PagecacheState(SubState):
    key = "pagecache"
    takes = (
        CachedFile,
        CachedFiles,
        PagecacheActivity,
    )

    def __init__(self) -> None:
        self.files: dict[tuple[int, int], FileSeen] = {}
        self.table: CachedFiles | None = None
        self.activity: PagecacheActivity | None = None
        self.activity_prev_ts_ns = 0
        self.activity_ts_ns = 0
        self.totals_prev: tuple[int, int] | None = None
        self.page_bytes = 4096
        #: per file (:func:`file_key`): (ts_ns, added, deleted) at each change, the latest last,
        #: packed (:func:`packed_append`), the least recently changed first. A dict, not an
        #: OrderedDict (~50 B more a file): a file counted again is taken out and put back at the
        #: end, and the least recent go from the front (:meth:`_activity`)
        self.file_counts: dict[FileKey, bytes] = {}
        #: per pid: (comm, added, deleted) now
        self.pid_counts: OrderedDict[int, tuple[str, int, int]] = OrderedDict()
        #: what changed in the latest reading: per file and pid, (added, deleted) since the one before
        self.file_delta: dict[FileKey, tuple[int, int]] = {}
        self.pid_delta: dict[int, tuple[int, int]] = {}

    def apply(self, batch: Batch, state: State) -> None:
        for rec in batch.records:
            if isinstance(rec, CachedFile):
                key = (rec.dev, rec.ino)
                seen = self.files.get(key)
                if seen is None:
                    seen = self.files[key] = FileSeen(rec)
                seen.rec = rec
                seen.history.append(batch.ts_ns, rec.cached_bytes, rec.evicted_bytes or 0)
            elif isinstance(rec, CachedFiles):
                for gone in rec.gone:
                    self.files.pop(gone, None)
                self.table = rec
            elif isinstance(rec, PagecacheActivity):
                self._activity(rec, batch.ts_ns)

    def _activity(self, rec: PagecacheActivity, ts: int) -> None:
        if self.activity is not None:
            self.totals_prev = (self.activity.added, self.activity.deleted)
        self.activity_prev_ts_ns, self.activity_ts_ns = self.activity_ts_ns, ts
        # its totals only: the files and pids it lists are applied below (a full map's 16,384
        # files kept till the next reading were ~3 MiB)
        self.activity = dataclasses.replace(rec, files=(), pids=()) if rec.files or rec.pids else rec
        self.page_bytes = rec.page_bytes
        first = self.totals_prev is None
        self.file_delta, self.pid_delta = {}, {}
        counts = self.file_counts
        # the least recently changed go first, as OrderedDict.popitem(last=False) took them: the
        # dict's order is its keys not counted again in this reading (in the order they had),
        # then those that were (put back at the end): the first of its first keys as they were
        # before it that is still there and not counted again is the one (next(iter()) of a dict
        # scans the holes its front's deletions left: one scan per file would be quadratic)
        front: Iterator[FileKey] | None = None
        touched: set[FileKey] = set()
        if len(counts) + len(rec.files) > MAX_ACTIVE_FILES:
            front = iter(list(islice(counts, 2 * len(rec.files))))
        for dev, ino, a, d in rec.files:
            key = file_key(dev, ino)
            hist = counts.pop(key, None)
            if hist is None:
                # first seen (or pushed out of the kernel's LRU and back): counted from 0
                hist = packed_append(b"", self.activity_prev_ts_ns or ts, 0, 0)
            pa, pd = packed_last(hist)
            if a < pa or d < pd:  # counted again from 0 by the kernel after an eviction
                pa = pd = 0
            if not first:
                self.file_delta[key] = (a - pa, d - pd)
            counts[key] = packed_append(hist, ts, a, d)
            if front is not None:
                touched.add(key)
                while len(counts) > MAX_ACTIVE_FILES:
                    oldest = next((k for k in front if k in counts and k not in touched), None)
                    del counts[next(iter(counts)) if oldest is None else oldest]
        for pid, comm, a, d in rec.pids:
            prev = self.pid_counts.pop(pid, None)
            pa, pd = (prev[1], prev[2]) if prev is not None and prev[1] <= a and prev[2] <= d else (0, 0)
            if not first:
                self.pid_delta[pid] = (a - pa, d - pd)
            self.pid_counts[pid] = (comm, a, d)
            while len(self.pid_counts) > MAX_PIDS:
                self.pid_counts.popitem(last=False)

    def dt_ns(self) -> int:
        return self.activity_ts_ns - self.activity_prev_ts_ns if self.totals_prev is not None else 0

    def activity_rates(
        self,
    ) -> tuple[dict[tuple[int, int], tuple[float, float]], dict[int, tuple[str, float, float]]]:
        """Per file (dev, ino) and per pid: pages added/s and deleted/s over the latest reading
        of the pagecache probe ({} before two); those with no change are absent (0)."""
        dt = self.dt_ns()
        if dt <= 0:
            return {}, {}
        files = {dev_ino(k): (a * 1e9 / dt, d * 1e9 / dt) for k, (a, d) in self.file_delta.items()}
        pids = {
            p: (self.pid_counts[p][0], a * 1e9 / dt, d * 1e9 / dt)
            for p, (a, d) in self.pid_delta.items()
            if p in self.pid_counts
        }
        return files, pids

    def totals_per_s(self) -> tuple[float, float] | None:
        dt = self.dt_ns()
        cur, prev = self.activity, self.totals_prev
        if cur is None or prev is None or dt <= 0:
            return None
        return max(0, cur.added - prev[0]) * 1e9 / dt, max(0, cur.deleted - prev[1]) * 1e9 / dt

    def window(self, seen: FileSeen, now_ns: int) -> tuple[int, int]:
        """(bytes evicted, bytes evicted and read back) over the window. With the pagecache
        probe's counts: pages deleted, and of those as many as were added again (a file with
        pages evicted by reclaim, whose shadow entries cachestat counts). Without: from
        cachestat alone, evictions rose and the cached bytes fell by less (the rest came back)."""
        r = seen.rec
        counts = self.file_counts.get(file_key(r.dev, r.ino))
        span = packed_since(counts, now_ns) if counts is not None else None
        if span is not None:
            (_, a0, d0), (_, a1, d1) = span
            deleted, added = max(0, d1 - d0), max(0, a1 - a0)
            back = min(deleted, added) if (r.evicted_bytes or 0) > 0 else 0
            return deleted * self.page_bytes, back * self.page_bytes
        span = _since(seen.history, now_ns)
        if span is None:
            return 0, 0
        (_, c0, e0), (_, c1, e1) = span
        evicted = max(0, e1 - e0)
        return evicted, max(0, evicted - max(0, c0 - c1))
