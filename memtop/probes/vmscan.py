"""vmscan: page reclaim, kswapd, slab shrink, compaction and direct/memcg reclaim latency.

A default probe: every hook is on a slow path (reclaim runs when memory is short). Totals come
from kernel maps read once per tick; reclaim episodes arrive through a ring buffer, and their
latencies are also histogrammed in the kernel, so a burst beyond the ring's capacity loses events
(counted) but no histogram counts. The ring is only the episode log: every figure comes from the
maps (per-process histograms included), so the kernel rate-limits the log (``log_per_s``
episodes a second per CPU) and counts the episodes it left out.
"""

from __future__ import annotations

import array
import bisect
import ctypes
import os
from enum import IntEnum
from pathlib import Path
from typing import Any

from memtop.core.text import clean
from memtop.linux.ksyms import text_symbols
from memtop.probes.base import BpfProbe, Generation, Held, enumerated
from memtop.records import Lost, Record
from memtop.records.reclaim import RECLAIM_KINDS, ReclaimEvent, ReclaimTotals
from memtop.records.vmscan import ORIGINS, VmscanTotals

#: log2 latency buckets of each histogram (a u64 of nanoseconds has 64)
HIST_SLOTS = 64
#: (cgroup2 id, kind) entries of the per-cgroup table
MAX_CGROUPS = 4096


class Counter(IntEnum):
    """Slots of the program's ``vmscan_counters`` array (passed as ``-DC_<NAME>=<slot>``)."""

    KSWAPD_WAKE = 0
    KSWAPD_SLEEP = 1
    KCOMPACTD_WAKE = 2
    COMPACT_COUNT = 3
    COMPACT_NS = 4
    SLAB_DROPPED = 5  # shrinker calls not counted: shrinker table full
    PAIRS_DROPPED = 6  # reclaim ends whose begin was not seen
    CGROUPS_DROPPED = 7  # episodes not counted per cgroup: cgroup table full
    UNLISTED = 8  # episodes the log left out (the token bucket was empty)
    #: bumped by every program after it updates a map this probe reads (base.Generation)
    GENERATION = 9


#: episodes logged through the ring per second per CPU, and the burst the log takes at once: a
#: memcg swap storm ends thousands of episodes a second, each logged one costs memtop Python time,
#: and no figure needs them (docs/performance.md)
LOG_PER_S = LOG_BURST = 64


class _Event(ctypes.Structure):
    C_STRUCT = "struct reclaim_event_t"  # in bpf/vmscan.bpf.c; the layout is checked (memtop.probes.layout)
    _fields_ = [
        ("ts_ns", ctypes.c_uint64),
        ("latency_ns", ctypes.c_uint64),
        ("nr_reclaimed", ctypes.c_uint64),
        ("pid", ctypes.c_uint32),
        ("tid", ctypes.c_uint32),
        ("kind", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
        ("comm", ctypes.c_char * 16),
        ("cgroup_id", ctypes.c_uint64),
    ]


def kind_name(kind: int) -> str:
    """A reclaim kind by the number the program sends; "unknown" past the kinds this memtop
    knows (a program built from a newer bpf/vmscan.bpf.c)."""
    return RECLAIM_KINDS[kind] if kind < len(RECLAIM_KINDS) else "unknown"


def _stalls(v: Any) -> tuple[int, int, int, int]:
    """(events, total_ns, max_ns, pages reclaimed) of a per-process or per-cgroup stall entry."""
    return int(v.events), int(v.total_ns), int(v.max_ns), int(v.reclaimed)


class KernelSymbols:
    """Kernel text addresses to names from /proc/kallsyms (read once, lazily). Shrinkers are
    named by their scan function (``super_cache_scan``, ``deferred_split_scan``…).

    Held compact: the addresses in one array of uint64, the names in one bytes object with an
    array of offsets. As lists of ints and strs the 122,000 text symbols of a 6.18 kernel cost
    24 MiB of RssAnon, a step in a long-running exporter's memory at the first shrinker event
    (bench/soak_export.py); compact they cost about 4 MiB."""

    def __init__(self, path: str | Path = "/proc/kallsyms") -> None:
        self.path = Path(path)
        self._addrs: array.array[int] = array.array("Q")
        self._names = b""
        #: where each name starts in ``_names`` (one more entry: the end)
        self._offsets: array.array[int] = array.array("Q", [0])
        self._loaded = False

    def _load(self) -> None:
        self._loaded = True
        addrs: array.array[int] = array.array("Q")
        names: list[bytes] = []
        try:
            with self.path.open("rb") as fh:
                for addr, name, _module in text_symbols(fh):
                    addrs.append(addr)
                    names.append(name)
        except OSError:
            return
        order = sorted(range(len(addrs)), key=addrs.__getitem__)
        self._addrs = array.array("Q", (addrs[i] for i in order))
        offsets: array.array[int] = array.array("Q", [0])
        for i in order:
            offsets.append(offsets[-1] + len(names[i]))
        self._names = b"".join(names[i] for i in order)
        self._offsets = offsets

    def __len__(self) -> int:
        return len(self._addrs)

    def name(self, addr: int) -> str:
        if not self._loaded:
            self._load()
        i = bisect.bisect_right(self._addrs, addr) - 1
        if i < 0 or not addr:
            return f"0x{addr:x}"
        off = addr - self._addrs[i]
        sym = self._names[self._offsets[i] : self._offsets[i + 1]].decode("utf-8", "replace")
        return clean(sym if off == 0 else f"{sym}+0x{off:x}", 128)


class VmscanProbe(BpfProbe):
    name = "vmscan"
    program = "vmscan"
    shares_unit = True
    tracepoints = (
        "vmscan:mm_vmscan_lru_shrink_inactive",
        "vmscan:mm_vmscan_direct_reclaim_begin",
        "vmscan:mm_vmscan_direct_reclaim_end",
        "vmscan:mm_vmscan_memcg_reclaim_begin",
        "vmscan:mm_vmscan_memcg_reclaim_end",
        "vmscan:mm_vmscan_kswapd_wake",
        "vmscan:mm_vmscan_kswapd_sleep",
        "vmscan:mm_shrink_slab_start",
        "vmscan:mm_shrink_slab_end",
        "compaction:mm_compaction_begin",
        "compaction:mm_compaction_end",
        "compaction:mm_compaction_kcompactd_wake",
    )

    #: "shrinkers": the slab shrinkers' calls, each named by its scan function from
    #: /proc/kallsyms (KernelSymbols: ~4 MiB once the first shrinker runs). Only the Reclaim
    #: pane shows them; the exporter exports none (memtop.export.metrics.EXPORTED_PARTS)
    optional_parts = ("shrinkers",)

    def __init__(
        self,
        ringbuf_pages: int = 256,
        max_tids: int = 8192,
        max_pids: int = 8192,
        max_shrinkers: int = 1024,
        log_per_s: int = LOG_PER_S,
        log_burst: int = LOG_BURST,
    ) -> None:
        super().__init__()
        if ringbuf_pages < 1 or ringbuf_pages & (ringbuf_pages - 1):
            raise ValueError("ringbuf_pages must be a power of two")
        self.ringbuf_pages = ringbuf_pages
        self.max_tids = max_tids
        self.max_pids = max_pids
        self.max_shrinkers = max_shrinkers
        if log_per_s < 0 or log_burst < 1:
            raise ValueError("log_per_s must be >= 0 (0: log every episode), log_burst >= 1")
        self.log_per_s = log_per_s
        self.log_burst = log_burst
        self.symbols = KernelSymbols()
        self._pending: list[Record] = []
        #: events delivered through the ring since load (the state counts them too)
        self.delivered = 0
        #: the reclaim histogram's total, watched from poll to poll (:meth:`_maps_due`)
        self._episodes = Held()
        #: the programs' generation at the last complete read, and that read's records
        self.generation = Generation()
        self._last: tuple[bool, VmscanTotals, ReclaimTotals, Lost] | None = None
        #: the compaction count, watched from poll to poll, and the compaction histogram as last
        #: read (:meth:`_compact_hist`)
        self._compactions = Held()
        self._chist: list[int] | None = None
        #: the per-process and per-cgroup maps as last read (pids, pid cgroups, cgroups, histograms)
        self._maps: tuple[Any, ...] | None = None
        #: map reads done (for tests)
        self.map_reads = 0
        #: the last totals records and what they were made of: the same again is the same object
        self._last_vm: tuple[tuple[Any, ...], VmscanTotals] | None = None
        self._last_rc: tuple[tuple[Any, ...], ReclaimTotals] | None = None

    def defines(self) -> dict[str, int]:
        return {
            "RINGBUF_PAGES": self.ringbuf_pages,
            "MAX_TIDS": self.max_tids,
            "MAX_PIDS": self.max_pids,
            "MAX_SHRINKERS": self.max_shrinkers,
            "MAX_CGROUPS": MAX_CGROUPS,
            "LOG_PER_S": self.log_per_s,
            "LOG_BURST": self.log_burst,
            "HIST_SLOTS": HIST_SLOTS,
            # the records' order is the kernel's numbering: kind k's histogram is slots k * HIST_SLOTS on
            **enumerated("KIND_", RECLAIM_KINDS, "NR_KINDS"),
            **enumerated("ORIGIN_", ORIGINS, "NR_ORIGINS"),
            **{f"C_{c.name}": c.value for c in Counter},
            "NR_COUNTERS": len(Counter),
        }

    def note(self) -> str:
        ring = f"ring {self.ringbuf_pages * os.sysconf('SC_PAGE_SIZE') // 1024} KiB"
        return ring + (f", log {self.log_per_s}/s per CPU" if self.log_per_s else "")

    def after_load(self) -> None:
        self.bpf["vmscan_events"].open_ring_buffer(self._on_event)

    def _on_event(self, _ctx: Any, data: Any, _size: int) -> None:
        ev = ctypes.cast(data, ctypes.POINTER(_Event)).contents
        kind = int(ev.kind)
        self.delivered += 1
        self._pending.append(
            ReclaimEvent(
                ts_ns=int(ev.ts_ns),
                pid=int(ev.pid),
                tid=int(ev.tid),
                comm=clean(bytes(ev.comm).split(b"\0", 1)[0]),
                kind=kind_name(kind),
                latency_ns=int(ev.latency_ns),
                pages_reclaimed=int(ev.nr_reclaimed),
                cgroup_id=int(ev.cgroup_id),
            )
        )

    # -- map readers ------------------------------------------------------------------------------
    def _origins(self) -> tuple[tuple[str, int, int, int], ...]:
        rows = self.array_rows("origins", len(ORIGINS), ("scanned", "reclaimed", "events"))
        return tuple((origin, r[0], r[1], r[2]) for origin, r in zip(ORIGINS, rows, strict=True))

    def _slab(self) -> tuple[tuple[str, int, int, int], ...]:
        merged: dict[str, list[int]] = {}
        for k, v in self.bpf["slab_stats"].items():
            name = self.symbols.name(int(k.value))
            m = merged.setdefault(name, [0, 0, 0])
            m[0] += int(v.count)
            m[1] += int(v.total_ns)
            m[2] += int(v.freed)
        return tuple((name, c, ns, freed) for name, (c, ns, freed) in sorted(merged.items()))

    def _pid_stats(
        self,
    ) -> tuple[tuple[tuple[int, str, str, int, int, int, int], ...], tuple[tuple[int, int], ...]]:
        """Per (process, kind) totals, and each process's latest cgroup2 id."""
        out = []
        cgroups: dict[int, int] = {}
        for k, v in self.bpf["pid_stats"].items():
            kind = int(k.kind)
            if v.cgroup_id:
                cgroups[int(k.pid)] = int(v.cgroup_id)
            out.append((int(k.pid), clean(bytes(v.comm).split(b"\0", 1)[0]), kind_name(kind), *_stalls(v)))
        out.sort()
        return tuple(out), tuple(sorted(cgroups.items()))

    def _pid_hist(self) -> tuple[tuple[int, str, int, int], ...]:
        out = []
        for k, v in self.bpf["reclaim_pid_hist"].items():
            kind, bucket = divmod(int(k.slot), HIST_SLOTS)
            if kind < len(RECLAIM_KINDS):
                out.append((int(k.pid), RECLAIM_KINDS[kind], bucket, int(v.value)))
        out.sort()
        return tuple(out)

    def _cg_stats(self) -> tuple[tuple[int, str, int, int, int, int], ...]:
        out = []
        for k, v in self.bpf["cg_stats"].items():
            kind = int(k.kind)
            out.append((int(k.cgroup_id), kind_name(kind), *_stalls(v)))
        out.sort()
        return tuple(out)

    def poll_failed(self) -> None:
        self._episodes.forget()  # the next polls read the maps: this one may not have
        self._compactions.forget()
        self.generation.forget()

    def _compact_hist(self, compactions: int) -> list[int]:
        """The compaction histogram, read when it may have changed. Only the compaction end's
        program changes it, and each run of it bumps the compaction count first (bpf/vmscan.bpf.c,
        mm_compaction_end): when the count (read before this) held at this poll and the one
        before, no run bumped the histogram since two polls ago (a run's two bumps come
        microseconds apart), so it is as last read. Read at least once in MAPS_BACKSTOP polls
        all the same, as the per-process maps are (:meth:`_maps_due`)."""
        held = self._compactions.held(compactions)
        if self._chist is None or not held or self.generation.backstop:
            self._chist = self.array_slots("compact_hist", HIST_SLOTS)
        return self._chist

    def _maps_due(self, rhist: list[int]) -> bool:
        """Whether the per-process and per-cgroup maps (pid_stats, cg_stats, reclaim_pid_hist)
        must be read this poll. Only the reclaim end's program changes them, and each run of it
        bumps the reclaim histogram first (bpf/vmscan.bpf.c reclaim_end_common(); an entry is
        only evicted by that program's insert): when the histogram's total held at this poll
        and the one before, no run bumped it since two polls ago, and a run's map updates come
        microseconds after its bump, so the maps are as last read. Reading them costs the
        kernel a walk of every bucket (8,192 and more) even when they are empty: ~80 µs each,
        a third of the probe's idle poll. Read at least once in MAPS_BACKSTOP polls all the
        same (a program preempted between its bump and its updates for over a tick)."""
        held = self._episodes.held(sum(rhist))
        return self._maps is None or not held or self.generation.backstop

    def totals(self) -> tuple[VmscanTotals, ReclaimTotals, Lost]:
        """Every kernel map's totals (cumulative since load) and the ring's lost count. The
        generation first (one slot's lookup): when it held since the last complete read (no
        program updated a map since), that read's records again, nothing else read
        (base.Generation: an idle machine's poll is this one lookup). Else every map once; the
        per-process and per-cgroup maps when they may have changed (:meth:`_maps_due`)."""
        gen = self.counter_slot("vmscan_counters", Counter.GENERATION)
        shrinkers = self.reads("shrinkers")
        last = self._last
        if self.generation.quiet(gen, kept=last is not None and last[0] == shrinkers):
            assert last is not None
            return last[1], last[2], last[3]
        vm, rc = self._totals(self.counter_slots("vmscan_counters", len(Counter)), shrinkers)
        lost = self.lost_record("vmscan_lost")
        self._last = (shrinkers, vm, rc, lost)
        self.generation.read(gen)
        return vm, rc, lost

    def _totals(self, c: list[int], shrinkers: bool) -> tuple[VmscanTotals, ReclaimTotals]:
        c = c[: Counter.GENERATION]  # the generation is no figure: records hold the rest
        chist = self._compact_hist(c[Counter.COMPACT_COUNT])
        rhist = self.array_slots("reclaim_hist", len(RECLAIM_KINDS) * HIST_SLOTS)
        vm_parts = (
            self._origins(),
            tuple(c),
            tuple(chist),
            self._slab() if shrinkers else (),
        )
        if self._last_vm is not None and self._last_vm[0] == vm_parts:
            vm = self._last_vm[1]  # nothing moved: the same record (not built and cleaned again)
        else:
            vm = VmscanTotals(
                origins=vm_parts[0],
                kswapd_wakes=c[Counter.KSWAPD_WAKE],
                kswapd_sleeps=c[Counter.KSWAPD_SLEEP],
                kcompactd_wakes=c[Counter.KCOMPACTD_WAKE],
                compaction_count=c[Counter.COMPACT_COUNT],
                compaction_total_ns=c[Counter.COMPACT_NS],
                compaction_hist=tuple((i, n) for i, n in enumerate(chist) if n),
                slab=vm_parts[3],
                slab_dropped=c[Counter.SLAB_DROPPED],
            )
            self._last_vm = (vm_parts, vm)
        if self._maps_due(rhist) or self._maps is None:
            self.map_reads += 1
            pids, pid_cgroups = self._pid_stats()
            self._maps = (pids, pid_cgroups, self._cg_stats(), self._pid_hist())
        rc_parts = (tuple(rhist), tuple(c), *self._maps)
        if self._last_rc is not None and self._last_rc[0] == rc_parts:
            return vm, self._last_rc[1]
        pids, pid_cgroups, cgroups, pid_hist = self._maps
        hist = tuple(
            (kind, i, rhist[k * HIST_SLOTS + i])
            for k, kind in enumerate(RECLAIM_KINDS)
            for i in range(HIST_SLOTS)
            if rhist[k * HIST_SLOTS + i]
        )
        rc = ReclaimTotals(
            histogram=hist,
            pids=pids,
            unpaired=c[Counter.PAIRS_DROPPED],
            cgroups=cgroups,
            cgroups_dropped=c[Counter.CGROUPS_DROPPED],
            unlisted=c[Counter.UNLISTED],
            pid_hist=pid_hist,
            pid_cgroups=pid_cgroups,
        )
        self._last_rc = (rc_parts, rc)
        return vm, rc

    def drain(self) -> list[Record]:
        """Consume the ring buffer: the reclaim events that reached user space since last time."""
        if self.bpf is None:
            return []
        self.bpf.ring_buffer_consume()
        out, self._pending = self._pending, []
        return out

    def poll(self) -> list[Record]:
        if self.bpf is None:
            return []
        # drain first, then totals: a totals record never lags the events it counts
        out = self.drain()
        vm, rc, lost = self.totals()
        out += [vm, rc, lost]
        return out
