"""Kernel state: where MemTotal went (the breakdown over time), the slab caches with their growth,
fragmentation, vmalloc callers, allocation profiling, and what the on-demand slab and page
allocator tracers counted (with their rates between the last two reads).

Slab growth: a cache's bytes and objects are kept as first seen (the baseline a delta is taken
from) and as last read; growth/s is over the interval between the last two reads in which it
changed (a cache not resent did not change: its rate is 0)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memtop.linux import kernelfs
from memtop.records import Batch
from memtop.records.kernel import (
    AllocProfile,
    BuddyInfo,
    KernelMem,
    PageAlloc,
    SlabCaches,
    SlabTrace,
    VmallocCallers,
)
from memtop.state.base import SubState

if TYPE_CHECKING:
    from memtop.state import State

#: breakdown points kept (the stacked chart)
HISTORY = 600
#: caches kept (a machine has a few hundred; a bound all the same)
MAX_CACHES = 4096


@dataclass(slots=True)
class SlabRow:
    slab: kernelfs.Slab
    ts_ns: int
    first: kernelfs.Slab
    first_ts_ns: int
    #: per second over the last interval in which it changed (0 when not resent)
    bytes_per_s: float = 0.0
    objs_per_s: float = 0.0


@dataclass(slots=True)
class Traced:
    """One on-demand tracer's last two reads (for rates) and when it attached."""

    cur: SlabTrace | PageAlloc
    ts_ns: int
    prev: SlabTrace | PageAlloc | None = None
    prev_ts_ns: int = 0


@dataclass
class KernelState(SubState):
    key = "kernel"
    takes = (
        KernelMem,
        SlabCaches,
        BuddyInfo,
        VmallocCallers,
        AllocProfile,
        SlabTrace,
        PageAlloc,
    )

    meminfo: dict[str, int] = field(default_factory=dict)
    zspages_bytes: int | None = None
    vmap_stack: bool | None = None
    #: (ts_ns, breakdown) over time
    history: deque[tuple[int, dict[str, int]]] = field(default_factory=lambda: deque(maxlen=HISTORY))
    slabs: dict[str, SlabRow] = field(default_factory=dict)
    slab_readable: bool | None = None
    slab_message: str = ""
    slab_hint: str = ""
    slab_ts_ns: int = 0
    buddy: tuple[tuple[int, str, tuple[int, ...]], ...] = ()
    vmalloc: VmallocCallers | None = None
    profile: AllocProfile | None = None
    #: the profile read before the last one (growth over that window) and when
    profile_prev: AllocProfile | None = None
    profile_ts_ns: int = 0
    profile_prev_ts_ns: int = 0
    slabtrace: Traced | None = None
    pagealloc: Traced | None = None

    def apply(self, batch: Batch, state: State) -> None:
        ts = batch.ts_ns
        for rec in batch.records:
            if isinstance(rec, KernelMem):
                self.meminfo = dict(rec.meminfo)
                self.zspages_bytes = rec.zspages_bytes
                self.vmap_stack = rec.vmap_stack
                if state.panes:  # the Kernel pane's chart only (a dict a tick, 600 kept)
                    self.history.append((ts, self.breakdown()))
            elif isinstance(rec, SlabCaches):
                self._on_slabs(rec, ts)
            elif isinstance(rec, BuddyInfo):
                self.buddy = rec.zones
            elif isinstance(rec, VmallocCallers):
                self.vmalloc = rec
            elif isinstance(rec, AllocProfile):
                if self.profile is not None and self.profile.state == "on":
                    self.profile_prev, self.profile_prev_ts_ns = self.profile, self.profile_ts_ns
                self.profile, self.profile_ts_ns = rec, ts
            elif isinstance(rec, SlabTrace):
                self.slabtrace = self._traced(self.slabtrace, rec, ts)
            elif isinstance(rec, PageAlloc):
                self.pagealloc = self._traced(self.pagealloc, rec, ts)

    @staticmethod
    def _traced(old: Traced | None, rec: SlabTrace | PageAlloc, ts: int) -> Traced:
        if old is None or type(old.cur) is not type(rec):
            return Traced(rec, ts)
        # a counter that went back is a new attachment: no rate across it
        if isinstance(rec, SlabTrace) and isinstance(old.cur, SlabTrace):
            # another slab tracer (frees traced or not) counts other events: no rate across it
            back = rec.events < old.cur.events or rec.frees_traced != old.cur.frees_traced
        else:
            back = (
                isinstance(rec, PageAlloc)
                and isinstance(old.cur, PageAlloc)
                and sum(rec.orders) < sum(old.cur.orders)
            )
        return Traced(rec, ts) if back else Traced(rec, ts, old.cur, old.ts_ns)

    def _on_slabs(self, rec: SlabCaches, ts: int) -> None:
        self.slab_readable = rec.readable
        self.slab_message, self.slab_hint = rec.message, rec.hint
        if not rec.readable:
            self.slabs.clear()
            return
        prev_ts = self.slab_ts_ns
        self.slab_ts_ns = ts
        sent = set()
        for t in rec.caches:
            s = kernelfs.Slab(*t)
            sent.add(s.name)
            row = self.slabs.get(s.name)
            if row is None:
                if len(self.slabs) >= MAX_CACHES:
                    continue
                self.slabs[s.name] = SlabRow(s, ts, s, ts)
                continue
            dt = ts - (prev_ts or row.ts_ns)
            if dt > 0:
                row.bytes_per_s = (s.total_bytes - row.slab.total_bytes) * 1e9 / dt
                row.objs_per_s = (s.active_objs - row.slab.active_objs) * 1e9 / dt
            row.slab, row.ts_ns = s, ts
        for name in rec.gone:
            self.slabs.pop(name, None)
        if rec.full:  # every cache is in it: one not there is gone
            for name in [n for n in self.slabs if n not in sent]:
                del self.slabs[name]
        for name, row in self.slabs.items():
            if name not in sent:
                row.bytes_per_s = row.objs_per_s = 0.0

    # -- derived ----------------------------------------------------------------------------------
    def breakdown(self) -> dict[str, int]:
        """Where MemTotal went now (memtop.linux.kernelfs.breakdown); {} before the first read."""
        if not self.meminfo:
            return {}
        return kernelfs.breakdown(self.meminfo, self.zspages_bytes, self.vmap_stack)

    def slab_totals(self) -> tuple[int, int]:
        """(bytes held by every cache, as slabinfo gives them; caches)."""
        return sum(r.slab.total_bytes for r in self.slabs.values()), len(self.slabs)
