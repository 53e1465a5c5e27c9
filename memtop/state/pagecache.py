"""Page cache: the files in it (what cachestat or mincore said of each), the pages added to and
deleted from it per file and per process, and which files thrash (evicted, then read back, within
the window). Rates of the cumulative counters are derived here."""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
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


class Samples:
    """A file's (ts_ns, a, b) samples, one per change, the latest last, in one flat array of
    64-bit integers: only those the thrashing window can still need are kept. A ``deque`` of
    3-tuples was ~0.6 KiB a file empty and ~0.1 KiB a sample, and with every file the pagecache
    probe counted (up to 32,768) it was what grew most in memtop's RssAnon over a session's first
    minutes (bench/self_memory.py, docs/performance.md). Kept: the newest SAMPLES, of them only
    from the one in force at the window's start as of the newest sample's tick (a later view's
    window starts later still), and at least two (two samples equal to the last make a span of
    nothing, one makes no span): :meth:`since` answers as the deque did. Values beyond int64 (a
    recording may hold any uint64) are kept at its bounds, as a process's History keeps them."""

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data = array("q")

    def append(self, ts_ns: int, a: int, b: int) -> None:
        d = self._data
        try:
            d.extend((ts_ns, a, b))
        except OverflowError:  # what extend took before the value that overflowed goes too
            del d[len(d) - len(d) % 3 :]
            d.extend(max(I64_MIN, min(v, I64_MAX)) for v in (ts_ns, a, b))
        n = len(d) // 3
        # the sample in force at the window's start (the last at or before it), as of now
        start = d[-3] - WINDOW_NS
        keep_from = 0
        for i in range(n - 1, -1, -1):
            if d[3 * i] <= start:
                keep_from = i
                break
        keep_from = max(keep_from, n - SAMPLES)
        keep_from = min(keep_from, n - 2) if n >= 2 else 0
        if keep_from > 0:
            del d[: 3 * keep_from]

    def __len__(self) -> int:
        return len(self._data) // 3

    def __getitem__(self, i: int) -> Sample:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("sample index out of range")
        d = self._data
        return d[3 * i], d[3 * i + 1], d[3 * i + 2]

    def __iter__(self) -> Iterator[Sample]:
        d = self._data
        for i in range(0, len(d), 3):
            yield d[i], d[i + 1], d[i + 2]


def _since(history: Samples, now_ns: int) -> tuple[Sample, Sample] | None:
    """The sample in force at the window's start and the latest (a sample holds until the next:
    one is kept per change); None with fewer than two."""
    if len(history) < 2:
        return None
    first = history[0]
    for sample in history:
        if sample[0] > now_ns - WINDOW_NS:
            break
        first = sample
    return first, history[-1]


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
        #: per file: (ts_ns, added, deleted) at each change, the latest last
        self.file_counts: OrderedDict[tuple[int, int], Samples] = OrderedDict()
        #: per pid: (comm, added, deleted) now
        self.pid_counts: OrderedDict[int, tuple[str, int, int]] = OrderedDict()
        #: what changed in the latest reading: per file and pid, (added, deleted) since the one before
        self.file_delta: dict[tuple[int, int], tuple[int, int]] = {}
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
        self.activity = rec
        self.page_bytes = rec.page_bytes
        first = self.totals_prev is None
        self.file_delta, self.pid_delta = {}, {}
        for dev, ino, a, d in rec.files:
            key = (dev, ino)
            hist = self.file_counts.pop(key, None)
            if hist is None:
                hist = Samples()
                # first seen (or pushed out of the kernel's LRU and back): counted from 0
                hist.append(self.activity_prev_ts_ns or ts, 0, 0)
            pa, pd = hist[-1][1], hist[-1][2]
            if a < pa or d < pd:  # counted again from 0 by the kernel after an eviction
                pa = pd = 0
            if not first:
                self.file_delta[key] = (a - pa, d - pd)
            hist.append(ts, a, d)
            self.file_counts[key] = hist
            while len(self.file_counts) > MAX_ACTIVE_FILES:
                self.file_counts.popitem(last=False)
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
        files = {k: (a * 1e9 / dt, d * 1e9 / dt) for k, (a, d) in self.file_delta.items()}
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
        counts = self.file_counts.get((r.dev, r.ino))
        span = _since(counts, now_ns) if counts is not None else None
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
