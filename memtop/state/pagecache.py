"""Page cache: the files in it (what cachestat or mincore said of each), the pages added to and
deleted from it per file and per process, and which files thrash (evicted, then read back, within
the window). Rates of the cumulative counters are derived here."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
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
#: processes whose activity is kept (the maps bound them anyway)
MAX_PIDS = 4096


@dataclass
class FileSeen:
    """A file's latest figures and, over the window, (ts_ns, cached, evicted) samples."""

    rec: CachedFile
    history: deque[tuple[int, int, int]]

    def window(self, now_ns: int) -> tuple[int, int]:
        """(bytes evicted, bytes read back) over the window ending at ``now_ns``: evictions rose
        by the first, and the cached bytes fell by less than that (the difference came back).
        A sample holds until the next (one is sent per change)."""
        if len(self.history) < 2:
            return 0, 0
        first = self.history[0]
        for sample in self.history:
            if sample[0] > now_ns - WINDOW_NS:
                break
            first = sample
        last = self.history[-1]
        evicted = max(0, last[2] - first[2])
        back = max(0, evicted - max(0, first[1] - last[1]))
        return evicted, back


class PagecacheState(SubState):
    key = "pagecache"

    def __init__(self) -> None:
        self.files: dict[tuple[int, int], FileSeen] = {}
        self.table: CachedFiles | None = None
        self.activity: PagecacheActivity | None = None
        self.activity_prev: PagecacheActivity | None = None
        self.activity_ts_ns = 0
        self.activity_prev_ts_ns = 0

    def apply(self, batch: Batch, state: State) -> None:
        for rec in batch.records:
            if isinstance(rec, CachedFile):
                key = (rec.dev, rec.ino)
                seen = self.files.get(key)
                if seen is None:
                    seen = self.files[key] = FileSeen(rec, deque(maxlen=SAMPLES))
                seen.rec = rec
                ev = rec.evicted_bytes or 0
                seen.history.append((batch.ts_ns, rec.cached_bytes, ev))
            elif isinstance(rec, CachedFiles):
                keep = set(rec.keys)
                for gone in [k for k in self.files if k not in keep]:
                    del self.files[gone]
                self.table = rec
            elif isinstance(rec, PagecacheActivity):
                self.activity_prev, self.activity_prev_ts_ns = self.activity, self.activity_ts_ns
                self.activity, self.activity_ts_ns = rec, batch.ts_ns

    def activity_rates(
        self,
    ) -> tuple[dict[tuple[int, int], tuple[float, float]], dict[int, tuple[str, float, float]]]:
        """Per file (dev, ino) and per pid: pages added/s and deleted/s between the last two
        readings of the pagecache probe ({} before two)."""
        cur, prev = self.activity, self.activity_prev
        dt = self.activity_ts_ns - self.activity_prev_ts_ns
        if cur is None or prev is None or dt <= 0:
            return {}, {}
        pf = {(d, i): (a, r) for d, i, a, r in prev.files}
        files = {}
        for d, i, a, r in cur.files:
            pa, pr = pf.get((d, i), (0, 0))
            if a >= pa and r >= pr and (a > pa or r > pr):
                files[(d, i)] = ((a - pa) * 1e9 / dt, (r - pr) * 1e9 / dt)
        pp = {p: (a, r) for p, _c, a, r in prev.pids}
        pids = {}
        for p, c, a, r in cur.pids:
            pa, pr = pp.get(p, (0, 0))
            if a >= pa and r >= pr and (a > pa or r > pr):
                pids[p] = (c, (a - pa) * 1e9 / dt, (r - pr) * 1e9 / dt)
        return files, pids

    def totals_per_s(self) -> tuple[float, float] | None:
        cur, prev = self.activity, self.activity_prev
        dt = self.activity_ts_ns - self.activity_prev_ts_ns
        if cur is None or prev is None or dt <= 0:
            return None
        return max(0, cur.added - prev.added) * 1e9 / dt, max(0, cur.deleted - prev.deleted) * 1e9 / dt
