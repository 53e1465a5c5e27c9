"""Cgroups state: each cgroup's latest figures and their rates, which cgroup each process is in,
and what memtop's probes saw per cgroup (memcg reclaim episodes and stalls, swap-in waits, OOM
kills).

Attribution: a process belongs to the memory cgroup whose cgroup.procs listed it last (the memcg
that charges its pages); on a hybrid machine its cgroup2 directory (where PSI is measured) may be
another path, kept beside it. Memcg reclaim goes to its task's memcg by pid: each tick, what a
process's in-kernel totals and latency histogram grew by since the last (the event log is
rate-limited and counts for nothing here). Recordings made before those histograms existed
attribute each logged episode instead, by pid, else (v2) by the cgroup2 id the kernel stamped on
it. An OOM kill's record names the victim's memcg as the kernel saw it: that places a process
killed before any read of cgroup.procs listed it, so its reclaim still counts in its cgroup.
Maps of pids are bounded; a pid not seen in any cgroup is counted as unattributed, never
guessed.
"""

from __future__ import annotations

import os
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.cgroups import CgroupGone, CgroupLayout, CgroupLruGen, CgroupPoll, CgroupSample
from memtop.records.oom import OomKill
from memtop.records.reclaim import ReclaimEvent, ReclaimTotals
from memtop.records.swapin import SwapinProc
from memtop.state.base import SubState, rate

if TYPE_CHECKING:
    from memtop.state import State

#: processes whose last cgroup is remembered after they left every cgroup.procs (exited)
MAX_PIDS = 65536
#: latencies kept per cgroup for its p99 (the most recent episodes; recordings without histograms)
LATENCIES = 2048
#: history points kept per cgroup (the drill-in's chart)
HISTORY = 600
#: reclaim episodes kept for attribution, and for how long (a process read at the next tick)
PENDING, PENDING_NS = 8192, 10_000_000_000
#: cgroups whose probe figures outlive the cgroup (a removed container's kills stay in the log)
MAX_GONE = 1024

_Grown = tuple[int, int, int, int, int, int, dict[int, int]]

#: how far back a cgroup's needed memory looks: memory touched again within this long is needed;
#: refault and activation rates are measured over it and extrapolated to it
NEEDED_WINDOW_NS = 10_000_000_000
#: refaults at or above this many bytes per second are high: with needed memory over the limit,
#: the cgroup is thrashing (the kernel evicts what it reads back at once)
THRASH_REFAULT_BYTES_PER_S = 1 << 20
#: the (ts, refault_anon, refault_file, activate_file) points a row keeps for those rates
WORKINGSET_POINTS = 64
#: MGLRU ages (a CgroupLruGen record) older than this are not used: the probe reads them every few
#: seconds, so older ones mean it stopped (a stale age is never served as current)
LRU_GEN_STALE_NS = 30_000_000_000
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True, slots=True)
class Needed:
    """A cgroup's needed memory, estimated from what memory.stat already counts (nothing is
    written, nothing reclaimed): the memory it cannot lose without paying for it again within
    :data:`NEEDED_WINDOW_NS`, and beside it the cold memory that could go.

    needed = anon + shmem + active_file + activated + refaulting; cold = inactive_file − activated.
    ``activated``: inactive file pages the kernel moved to the active list because they were
    touched again (v2 ``workingset_activate_file``) over the window; ``refaulting``: evicted
    pages read back (``workingset_refault_*``) over the window, the anonymous part at most what
    is on swap. Rates are per second over the window (None: one reading so far, or the figure
    is not in this version's memory.stat)."""

    needed_bytes: int
    cold_bytes: int
    anon_bytes: int
    shmem_bytes: int
    active_file_bytes: int
    inactive_file_bytes: int
    activated_bytes: int
    refaulting_bytes: int
    refault_anon_bytes_per_s: float | None
    refault_file_bytes_per_s: float | None
    activate_file_bytes_per_s: float | None
    #: how long the rates were measured over, seconds (0: one reading)
    measured_s: float
    #: the limit needed memory is held against (the lower of max and high), None without one
    limit_bytes: int | None
    #: refaults high and needed memory over the limit
    thrashing: bool
    #: "lru_gen": needed and cold come from MGLRU's generations (young: born within the window),
    #: "memory.stat": from the active/inactive lists and the workingset counters
    source: str = "memory.stat"
    #: with lru_gen: its pages and its children's in generations younger / older than the window
    young_anon_bytes: int | None = None
    young_file_bytes: int | None = None
    old_anon_bytes: int | None = None
    old_file_bytes: int | None = None


@dataclass(slots=True)
class Probed:
    """What memtop's probes saw in one cgroup (its own processes; the view rolls children up)."""

    reclaim_events: int = 0
    reclaim_ns: int = 0
    reclaim_max_ns: int = 0
    #: log2 latency bucket -> episodes (from the kernel's per-process histograms)
    hist: dict[int, int] = field(default_factory=dict)
    #: the latest episodes' latencies (recordings made before the histograms: from the events)
    latencies: deque[int] = field(default_factory=lambda: deque(maxlen=LATENCIES))
    oom_kills: int = 0  # victims whose memcg this is
    oom_limit_kills: int = 0  # kills whose limit was this memcg's


@dataclass(slots=True)
class CgroupRow:
    sample: CgroupSample
    ts_ns: int
    prev: CgroupSample | None = None
    prev_ts_ns: int = 0
    #: per second, over the last interval: limit hits (v2 events "max", v1 failcnt), OOM kills
    limit_hits_per_s: float | None = None
    #: share of the last interval some / all of its tasks stalled on memory (0..1), from PSI
    psi_some: float | None = None
    psi_full: float | None = None
    #: (ts_ns, usage, anon, file, kernel, shmem, swap) over time; None where unknown
    history: deque[tuple[int, int | None, int | None, int | None, int | None, int | None, int | None]] = (
        field(default_factory=lambda: deque(maxlen=HISTORY))
    )
    #: (ts_ns, refault_anon, refault_file, activate_file) pages, cumulative, one per sample
    workingset: deque[tuple[int, int | None, int | None, int | None]] = field(
        default_factory=lambda: deque(maxlen=WORKINGSET_POINTS)
    )
    #: MGLRU's split of it and its children: (young anon, young file, old anon, old file) bytes,
    #: young being generations born within the window; and when it was read (0: never)
    lru_gen: tuple[int, int, int, int] | None = None
    lru_gen_ts_ns: int = 0
    #: ``sample``'s memory.stat and events as dicts, and the sample they were made of: the
    #: exporter asks a dozen figures of each of 500 cgroups per build, and an idle cgroup's
    #: sample stays the same object from poll to poll
    _dicts_of: CgroupSample | None = None
    _stat: dict[str, int] = field(default_factory=dict)
    _events: dict[str, int] = field(default_factory=dict)
    #: ``needed_figures``'s inputs and answer, while they hold
    _needed_memo: (
        tuple[CgroupSample, object, object, int, object, bool, tuple[int, int, bool] | None] | None
    ) = None

    def _dicts(self) -> None:
        if self._dicts_of is not self.sample:
            # the first of a name wins, as a scan of the pairs found it (a recording is untrusted)
            self._stat = dict(reversed(self.sample.stat))
            self._events = dict(reversed(self.sample.events))
            self._dicts_of = self.sample

    def stat(self, name: str) -> int | None:
        self._dicts()
        return self._stat.get(name)

    def event(self, name: str) -> int | None:
        self._dicts()
        return self._events.get(name)

    def _rates(self, now_ns: int) -> tuple[float, list[float | None]]:
        """(seconds measured over, per-second rates of the workingset counters) over the last
        :data:`NEEDED_WINDOW_NS`: from the last point before the window (or the oldest) to the
        latest, up to ``now_ns`` (a poll that sent nothing means nothing moved)."""
        pts = self.workingset
        if not pts:
            return 0.0, [None, None, None]
        last = pts[-1]
        base = pts[0]
        for p in pts:
            if p[0] <= now_ns - NEEDED_WINDOW_NS:
                base = p
            else:
                break
        dt = max(now_ns, last[0]) - base[0]
        if dt <= 0:
            return 0.0, [None, None, None]
        out: list[float | None] = []
        for i in (1, 2, 3):
            a, b = base[i], last[i]
            out.append(None if a is None or b is None else max(0, b - a) * PAGE_BYTES * 1e9 / dt)
        return dt / 1e9, out

    def needed_figures(self, now_ns: int) -> tuple[int, int, bool] | None:
        """``needed(now_ns)``'s needed bytes, cold bytes and whether it thrashes (what the
        exporter exports of it), the last answer while its inputs hold: the same sample, the
        same workingset points (first, last, how many), the same MGLRU ages (as fresh), and
        those points' counters flat (an idle cgroup's): the rates are then 0 whatever the
        window, and the answer does not depend on ``now_ns``."""
        pts = self.workingset
        first, last = (pts[0], pts[-1]) if pts else (None, None)
        fresh = now_ns - self.lru_gen_ts_ns <= LRU_GEN_STALE_NS
        m = self._needed_memo
        if (
            m is not None
            and m[0] is self.sample
            and m[1] is first
            and m[2] is last
            and m[3] == len(pts)
            and m[4] is self.lru_gen
            and m[5] == fresh
        ):
            return m[6]
        n = self.needed(now_ns)
        out = None if n is None else (n.needed_bytes, n.cold_bytes, n.thrashing)
        flat = first is None or all(p[1:] == first[1:] for p in pts)
        self._needed_memo = (self.sample, first, last, len(pts), self.lru_gen, fresh, out) if flat else None
        return out

    def needed(self, now_ns: int) -> Needed | None:
        """The estimate (:class:`Needed`); None when memory.stat lacks its inputs (a cgroup of
        the cgroup2 tree only, on a hybrid machine)."""
        self._dicts()
        st = self._stat
        if "anon" not in st or "active_file" not in st or "inactive_file" not in st:
            return None
        measured_s, (ra, rf, af) = self._rates(now_ns)
        window_s = NEEDED_WINDOW_NS / 1e9
        anon, shmem = st["anon"], st.get("shmem", 0)
        active, inactive = st["active_file"], st["inactive_file"]
        activated = min(inactive, int((af or 0) * window_s))
        back_anon = int((ra or 0) * window_s)
        if self.sample.swap_bytes is not None:  # what comes back from swap is at most what is there
            back_anon = min(back_anon, self.sample.swap_bytes)
        refaulting = back_anon + int((rf or 0) * window_s)
        needed = anon + shmem + active + activated + refaulting
        cold = max(0, inactive - activated)
        ages = self.lru_gen if now_ns - self.lru_gen_ts_ns <= LRU_GEN_STALE_NS else None
        usage = self.sample.usage_bytes
        if ages is not None and usage is not None and sum(ages) > usage + usage // 8:
            # its LRU pages are charged to it: more than its usage (beyond the skew of two reads)
            # means the listing is not all its own (a cgroup name can forge lines of lru_gen)
            ages = None
        if ages is not None:
            # the kernel's own ages: what was touched within the window sits in the young
            # generations (refaulted and activated pages included), the rest is cold
            needed, cold = ages[0] + ages[1], ages[2] + ages[3]
        limits = [v for v in (self.sample.limit_bytes, self.sample.high_bytes) if v is not None]
        limit = min(limits) if limits else None
        high = (ra or 0) + (rf or 0) >= THRASH_REFAULT_BYTES_PER_S
        return Needed(
            needed_bytes=needed,
            cold_bytes=cold,
            anon_bytes=anon,
            shmem_bytes=shmem,
            active_file_bytes=active,
            inactive_file_bytes=inactive,
            activated_bytes=activated,
            refaulting_bytes=refaulting,
            refault_anon_bytes_per_s=ra,
            refault_file_bytes_per_s=rf,
            activate_file_bytes_per_s=af,
            measured_s=measured_s,
            limit_bytes=limit,
            thrashing=high and limit is not None and needed > limit,
            source="lru_gen" if ages is not None else "memory.stat",
            young_anon_bytes=ages[0] if ages is not None else None,
            young_file_bytes=ages[1] if ages is not None else None,
            old_anon_bytes=ages[2] if ages is not None else None,
            old_file_bytes=ages[3] if ages is not None else None,
        )


def _limit_hits(s: CgroupSample) -> int | None:
    ev = dict(s.events)
    if "max" in ev:
        return ev["max"]
    return ev.get("failcnt")


class CgroupsState(SubState):
    key = "cgroups"
    takes = (
        CgroupSample,
        CgroupPoll,
        CgroupGone,
        CgroupLayout,
        CgroupLruGen,
        ReclaimEvent,
        ReclaimTotals,
        SwapinProc,
        OomKill,
    )

    def __init__(self) -> None:
        self.layout: CgroupLayout | None = None
        self.rows: dict[str, CgroupRow] = {}
        #: pid -> memory cgroup path; pid -> cgroup2 path (hybrid: another tree), the least
        #: recently changed first. Plain dicts, not OrderedDicts: an OrderedDict's linked node was
        #: ~50 B more a pid, two entries for each process watched (~0.1 MiB of memtop's RssAnon
        #: with 1,000 processes, tracemalloc); :meth:`_remember` keeps the same order
        self.pid_memcg: dict[int, str] = {}
        self.pid_unified: dict[int, str] = {}
        #: cgroup2 id (inode) -> path
        self.id_path: dict[int, str] = {}
        self.probed: dict[str, Probed] = {}
        #: reclaim episodes whose task's cgroup memtop did not know
        self.unattributed = 0
        #: cgroups the probe's last walk left out past its limit (``max_cgroups``; 0: unknown)
        self.over_limit = 0
        self.max_cgroups = 0
        #: when the cgroups probe last polled: a cgroup it sent nothing for stood still until then
        self.polled_ns = 0
        #: why MGLRU's ages are not used, as the cgroups probe last said ("" when they are, or
        #: where the kernel has no MGLRU)
        self.lru_gen_why = ""
        #: per cgroup2 id and kind, the kernel's own aggregate: (events, total_ns, max_ns, pages)
        self.kernel_reclaim: dict[tuple[int, str], tuple[int, int, int, int]] = {}
        self.kernel_dropped = 0
        #: memcg reclaim episodes waiting for their process to show up in a cgroup.procs
        self._pending: deque[ReclaimEvent] = deque(maxlen=PENDING)
        #: per pid, its memcg reclaim totals as last seen: (events, total_ns, max_ns, histogram)
        self._reclaim_seen: dict[int, tuple[int, int, int, dict[int, int]]] = {}
        #: memcg reclaim a process's totals grew by, waiting for the process to show up in a
        #: cgroup.procs: (ts_ns, pid, cgroup2 id, events, total_ns, new max_ns or 0, histogram)
        self._grown: deque[_Grown] = deque(maxlen=PENDING)
        #: whether the reclaim totals carry per-process histograms (else: a recording made before
        #: them, whose per-cgroup figures come from its events)
        self._from_totals = False
        #: per pid: (memcg path, swap-ins, swap-in wait ns), cumulative as the swapin probe sent
        self.swapin: OrderedDict[int, tuple[str, int, int]] = OrderedDict()
        #: per cgroup path, the swap-ins and wait ns of its processes that exited (their pids
        #: forgotten), so its per-cgroup totals stay counters
        self.swapin_gone: dict[str, tuple[int, int]] = {}
        #: pid -> when the poll first found it in no cgroup.procs (exited): its last cgroup is
        #: kept for PENDING_NS (reclaim and kills reported after the exit still find it), then
        #: the pid is forgotten. Without this the pid maps only ever grew under process churn
        #: (up to MAX_PIDS each: +52 MiB in 7 minutes of `memtop export`)
        self._left_ns: dict[int, int] = {}

    # -- attribution ------------------------------------------------------------------------------
    def memcg_of(self, pid: int) -> str | None:
        return self.pid_memcg.get(pid)

    def unified_of(self, pid: int) -> str | None:
        return self.pid_unified.get(pid)

    @staticmethod
    def _remember(m: dict[int, str], pid: int, path: str) -> None:
        """``pid``'s path, moved to the end when it changed (as OrderedDict.move_to_end), the
        least recently changed dropped past MAX_PIDS."""
        if m.get(pid) != path:
            m.pop(pid, None)
            m[pid] = path
            if len(m) > MAX_PIDS:
                del m[next(iter(m))]

    def _remember_all(self, m: dict[int, str], pids: tuple[int, ...], path: str) -> None:
        """:meth:`_remember` of each of ``pids``. Most samples list members already remembered
        in ``path`` (the root cgroup's ~150 processes, every tick its usage moved): that is
        checked in C first, and only a sample with a member new to ``path`` goes through them
        one by one (a Python call each was most of the cgroups state's apply on an idle machine)."""
        if list(map(m.get, pids)).count(path) == len(pids):
            return
        for pid in pids:
            self._remember(m, pid, path)

    def _probed(self, path: str) -> Probed:
        p = self.probed.get(path)
        if p is None:
            p = self.probed[path] = Probed()
            if len(self.probed) > len(self.rows) + MAX_GONE:
                for old in [k for k in self.probed if k not in self.rows][: len(self.probed) // 4]:
                    del self.probed[old]
        return p

    def _path_of(self, pid: int, cgroup_id: int) -> str | None:
        path = self.pid_memcg.get(pid)
        if path is None and self.layout is not None and self.layout.memory_version == 2 and cgroup_id:
            path = self.id_path.get(cgroup_id)
        return path

    # -- apply --------------------------------------------------------------------------------------
    def apply(self, batch: Batch, state: State) -> None:
        ts = batch.ts_ns
        sent: set[str] = set()
        if not self._from_totals:
            self._from_totals = any(
                isinstance(r, ReclaimTotals) and r.pid_hist is not None for r in batch.records
            )
        for rec in batch.records:
            if isinstance(rec, CgroupSample):
                self._on_sample(rec, ts)
                sent.add(rec.path)
            elif isinstance(rec, CgroupPoll):
                self.over_limit, self.max_cgroups = rec.over_limit, rec.max_cgroups
                self.polled_ns = ts
                self._on_poll(sent)
                self._forget_exited(ts)
            elif isinstance(rec, CgroupGone):
                gone = self.rows.pop(rec.path, None)
                if gone is not None and gone.sample.cgroup_id:
                    self.id_path.pop(gone.sample.cgroup_id, None)
            elif isinstance(rec, CgroupLayout):
                self.layout = rec
            elif isinstance(rec, CgroupLruGen):
                self._on_lru_gen(rec, ts)
            elif isinstance(rec, ReclaimEvent):
                if rec.kind == "memcg" and not self._from_totals:  # direct reclaim is the machine's
                    # its process may be one the cgroups probe has not read yet (it started and
                    # stalled within a tick): kept for the next reads of cgroup.procs
                    self._pending.append(rec)
            elif isinstance(rec, ReclaimTotals):
                self.kernel_reclaim = {
                    (cid, kind): (n, tot, mx, pg) for cid, kind, n, tot, mx, pg in rec.cgroups
                }
                self.kernel_dropped = rec.cgroups_dropped
                if self._from_totals:
                    self._on_reclaim_totals(rec, ts)
            elif isinstance(rec, SwapinProc):
                self._on_swapin(rec)
            elif isinstance(rec, OomKill):
                self._on_oom_kill(rec)
        if self._pending:
            self._attribute(ts)
        if self._grown:
            self._attribute_grown(ts)

    def _on_lru_gen(self, rec: CgroupLruGen, ts: int) -> None:
        """MGLRU's generations: each cgroup's pages and its descendants' (memory.stat counts
        them too) split at the window's age; a cgroup the record does not name loses its split."""
        self.lru_gen_why = rec.why
        split: dict[str, list[int]] = {}
        for path, gens in rec.memcgs:
            own = [0, 0, 0, 0]
            for age_ns, anon, file in gens:
                old = 2 if age_ns >= NEEDED_WINDOW_NS else 0
                own[old] += anon
                own[old + 1] += file
            anc = path
            while True:  # to itself and every ancestor
                acc = split.setdefault(anc, [0, 0, 0, 0])
                for i in range(4):
                    acc[i] += own[i]
                if anc == "/" or not anc.startswith("/"):
                    break
                anc = anc.rsplit("/", 1)[0] or "/"
        for path, row in self.rows.items():
            s = split.get(path)
            row.lru_gen = (s[0], s[1], s[2], s[3]) if s is not None else None
            row.lru_gen_ts_ns = ts if s is not None else 0

    def _on_poll(self, sent: set[str]) -> None:
        """A poll ended: the cgroups it sent nothing for did not change (nothing hit its limit,
        nothing stalled)."""
        for path, row in self.rows.items():
            if path not in sent:
                known = row.sample.psi_some_us is not None
                row.limit_hits_per_s = 0.0 if _limit_hits(row.sample) is not None else None
                row.psi_some = row.psi_full = 0.0 if known else None

    def _forget_exited(self, ts: int) -> None:
        """A poll ended: every pid no cgroup lists now starts its grace; those whose grace is
        over leave the pid maps (their swap-ins stay in their cgroup's totals)."""
        live: set[int] = set()
        live_unified: set[int] = set()
        for row in self.rows.values():
            s = row.sample
            live.update(s.pids)
            live_unified.update(s.unified_pids if s.version != 2 else s.pids)
        left = self._left_ns
        for m, alive in ((self.pid_memcg, live), (self.pid_unified, live_unified)):
            for pid in m:
                if pid not in alive:
                    left.setdefault(pid, ts)
        for pid in list(left):
            if pid in live or pid in live_unified:
                del left[pid]  # listed again (a pid reused, or a cgroup read late)
            elif ts - left[pid] >= PENDING_NS:
                del left[pid]
                self.pid_memcg.pop(pid, None)
                self.pid_unified.pop(pid, None)
                self._fold_swapin(pid)

    def _fold_swapin(self, pid: int) -> None:
        gone = self.swapin.pop(pid, None)
        if gone is None:
            return
        path, n, wait = gone
        n0, w0 = self.swapin_gone.get(path, (0, 0))
        self.swapin_gone[path] = (n0 + n, w0 + wait)
        if len(self.swapin_gone) > len(self.rows) + MAX_GONE:  # cgroups long gone first
            for old in [k for k in self.swapin_gone if k not in self.rows][: len(self.swapin_gone) // 4]:
                del self.swapin_gone[old]

    def _on_swapin(self, rec: SwapinProc) -> None:
        sw_path = self.pid_memcg.get(rec.pid)
        if sw_path is not None:
            self.swapin[rec.pid] = (sw_path, rec.swapins, rec.swapin_wait_ns)
            self.swapin.move_to_end(rec.pid)
            if len(self.swapin) > MAX_PIDS:
                self.swapin.popitem(last=False)

    def _on_oom_kill(self, rec: OomKill) -> None:
        victim = rec.task_memcg or self.pid_memcg.get(rec.victim_pid)
        if rec.task_memcg:
            # the kernel's word on the victim's memcg at the kill: a process killed before any
            # read of cgroup.procs listed it (within a tick of joining) still has its reclaim,
            # waiting in _grown, counted in its cgroup
            self._remember(self.pid_memcg, rec.victim_pid, rec.task_memcg)
        if victim:
            self._probed(victim).oom_kills += 1
        if rec.memcg:
            self._probed(rec.memcg).oom_limit_kills += 1

    def _on_reclaim_totals(self, rec: ReclaimTotals, ts: int) -> None:
        """What each process's memcg reclaim grew by since the last totals, queued for its cgroup.
        A process whose totals shrank was evicted from the kernel's LRU map and began again."""
        hists: dict[int, dict[int, int]] = {}
        for pid, kind, bucket, n in rec.pid_hist or ():
            if kind == "memcg":
                hists.setdefault(pid, {})[bucket] = n
        cgroup_ids = dict(rec.pid_cgroups)
        seen: dict[int, tuple[int, int, int, dict[int, int]]] = {}
        for pid, _comm, kind, events, total_ns, max_ns, _pages in rec.pids:
            if kind != "memcg":
                continue
            hist = hists.get(pid, {})
            seen[pid] = (events, total_ns, max_ns, hist)
            old = self._reclaim_seen.get(pid)
            if old is None or events < old[0]:
                old = (0, 0, 0, {})
            if events == old[0] and hist == old[3]:
                continue
            grown = {b: n - old[3].get(b, 0) if n >= old[3].get(b, 0) else n for b, n in hist.items()}
            # a max that rose is an episode of this interval; one that did not was seen already
            new_max = max_ns if max_ns > old[2] else 0
            self._grown.append(
                (
                    ts,
                    pid,
                    cgroup_ids.get(pid, 0),
                    events - old[0],
                    max(0, total_ns - old[1]),
                    new_max,
                    {b: n for b, n in grown.items() if n},
                )
            )
        self._reclaim_seen = seen

    def _attribute_grown(self, ts: int) -> None:
        keep: deque[_Grown] = deque(maxlen=PENDING)
        for g in self._grown:
            t0, pid, cgroup_id, events, total_ns, new_max, hist = g
            path = self._path_of(pid, cgroup_id)
            if path is None:
                if ts - t0 < PENDING_NS:
                    keep.append(g)
                else:
                    self.unattributed += events
                continue
            p = self._probed(path)
            p.reclaim_events += events
            p.reclaim_ns += total_ns
            p.reclaim_max_ns = max(p.reclaim_max_ns, new_max)
            for b, n in hist.items():
                p.hist[b] = p.hist.get(b, 0) + n
        self._grown = keep

    def _attribute(self, ts: int) -> None:
        """Give pending reclaim episodes to their process's cgroup; those whose process no read
        of cgroup.procs listed within PENDING_NS are counted as unattributed."""
        keep: deque[ReclaimEvent] = deque(maxlen=PENDING)
        for ev in self._pending:
            path = self._path_of(ev.pid, ev.cgroup_id)
            if path is None:
                if ts - ev.ts_ns < PENDING_NS:
                    keep.append(ev)
                else:
                    self.unattributed += 1
                continue
            p = self._probed(path)
            p.reclaim_events += 1
            p.reclaim_ns += ev.latency_ns
            p.reclaim_max_ns = max(p.reclaim_max_ns, ev.latency_ns)
            p.latencies.append(ev.latency_ns)
        self._pending = keep

    def _on_sample(self, s: CgroupSample, ts: int) -> None:
        row = self.rows.get(s.path)
        if row is None:
            row = self.rows[s.path] = CgroupRow(s, ts)
        else:
            row.prev, row.prev_ts_ns = row.sample, row.ts_ns
            row.sample, row.ts_ns = s, ts
            dt = ts - row.prev_ts_ns
            prev = row.prev
            cur_hits, prev_hits = _limit_hits(s), _limit_hits(prev)
            row.limit_hits_per_s = (
                rate(cur_hits, prev_hits, dt) if cur_hits is not None and prev_hits is not None else None
            )
            if s.psi_some_us is not None and prev.psi_some_us is not None and dt > 0:
                row.psi_some = min(1.0, max(0, s.psi_some_us - prev.psi_some_us) * 1000 / dt)
                row.psi_full = min(1.0, max(0, (s.psi_full_us or 0) - (prev.psi_full_us or 0)) * 1000 / dt)
        if s.cgroup_id:
            self.id_path[s.cgroup_id] = s.path
        self._remember_all(self.pid_memcg, s.pids, s.path)
        self._remember_all(self.pid_unified, s.unified_pids if s.version != 2 else s.pids, s.path)
        st = dict(s.stat)
        row.history.append(
            (
                ts,
                s.usage_bytes,
                st.get("anon"),
                st.get("file"),
                st.get("kernel"),
                st.get("shmem"),
                s.swap_bytes,
            )
        )
        row.workingset.append((ts, st.get("refault_anon"), st.get("refault_file"), st.get("activate_file")))

    # -- derived ------------------------------------------------------------------------------------
    def swapin_by_path(self) -> dict[str, tuple[int, int]]:
        """(swap-ins, wait ns) per cgroup path, of the processes last seen in it (those that
        exited included)."""
        out: dict[str, tuple[int, int]] = dict(self.swapin_gone)
        for p, s, wait in self.swapin.values():
            n, w = out.get(p, (0, 0))
            out[p] = (n + s, w + wait)
        return out

    def kernel_reclaim_of(self, cgroup_id: int, kind: str = "memcg") -> tuple[int, int, int, int] | None:
        """The kernel's own (events, total_ns, max_ns, pages) for cgroup2 id ``cgroup_id``."""
        return self.kernel_reclaim.get((cgroup_id, kind))
