"""slabtrace: slab allocations by cache and call site, sampled in kernel (on demand, Kernel pane).

bpf/slabtrace.bpf.c runs on kmem:kmem_cache_alloc and kmem:kmalloc: every allocation is counted
per CPU and one in ``sample`` is recorded under (cache, call site). That is the ``slabtrace``
probe (`t`): who allocates, how fast. Frees are not hooked: a free hook runs on every free (it
must look the pointer up to know whether it frees a sampled object), which doubles what tracing
costs a slab-heavy workload, so per call site net growth is its own tracer, ``slabfrees`` (`f`,
the program built with -DFREES): sampled pointers kept, kmem:kfree and kmem:kmem_cache_free
charge a free of one back to its (cache, site) (frees of objects not sampled are counted, not
attributed). ``slabstacks`` (`k`, -DSTACKS) adds each sampled allocation's kernel stack. Call
sites are resolved through /proc/kallsyms to functions. While attached, BPF run-time stats are
held on one second in ten (memtop.probes.bpfstats) so the pane shows the programs' own cost.

Where the kernel's BTF describes the raw tracepoints it hooks with the prototypes the program
reads (and gives ``struct kmem_cache``'s ``name`` and ``size`` offsets), the program runs on raw
tracepoints: no perf tracepoint record is built per event, which alone cost a slab-heavy loop
~1.5x (docs/performance.md). Otherwise it runs on the regular tracepoints, and ``note`` says why.

kmalloc's tracepoint names no cache: its size class (bytes_alloc) and gfp flags name it as the
kernel does (kmalloc-N, kmalloc-cg-N when accounted, kmalloc-rcl-N when reclaimable; above 8 KiB
kmalloc takes pages: "kmalloc-large").
"""

from __future__ import annotations

import threading
from functools import cached_property
from pathlib import Path
from typing import ClassVar

from memtop.core.text import clean
from memtop.linux import btf
from memtop.linux.ksyms import KernelSymbols
from memtop.probes import bpfstats
from memtop.probes.base import BpfProbe, enumerated
from memtop.records import Record
from memtop.records.kernel import SlabTrace

SAMPLE = 64
#: kernel stacks kept per (cache, call site), and frames per stack, in a record
STACKS_PER_SITE = 3
STACK_FRAMES = 12
MAX_SITES = 8192
MAX_LIVE = 65536
#: kmalloc's largest slab size class (KMALLOC_MAX_CACHE_SIZE with SLUB: two pages)
KMALLOC_SLAB_MAX = 8192
#: slots of the program's ``slab_counters`` array (``SLAB_<NAME>``)
COUNTERS = ("allocs", "sampled", "frees", "frees matched", "dropped", "next sample")
#: a kmalloc site's flags -> its cache family's prefix (``KMALLOC_<NAME>``: accounted, reclaimable)
KMALLOC_FAMILIES = {1: "cg", 2: "rcl"}


#: the raw tracepoints' arguments (after the context) as the program reads them
RAW_PROTOTYPES = {
    "kmem_cache_alloc": ["long unsigned int", "const void *", "struct kmem_cache *", "gfp_t", "int"],
    "kmalloc": ["long unsigned int", "const void *", "size_t", "size_t", "gfp_t", "int"],
    "kfree": ["long unsigned int", "const void *"],
    "kmem_cache_free": ["long unsigned int", "const void *", "const struct kmem_cache *"],
}


#: the allocation hooks every slab tracer attaches; the free hooks only the slabfrees probe's
ALLOC_EVENTS = ("kmem_cache_alloc", "kmalloc")
FREE_EVENTS = ("kfree", "kmem_cache_free")


def raw_config(
    path: Path = btf.VMLINUX, events: tuple[str, ...] = (*ALLOC_EVENTS, *FREE_EVENTS)
) -> tuple[list[str], str]:
    """(-D flags for the raw tracepoint program hooking ``events``, "") where this kernel's BTF
    allows it, else ([], why not)."""
    try:
        types = btf.Btf.vmlinux(path)
    except btf.BtfError as exc:
        return [], f"no kernel BTF ({exc})"
    for event in events:
        want = RAW_PROTOTYPES[event]
        got = types.raw_tracepoint_args(event)
        if got != want:
            return [], f"raw tracepoint {event} is {got or 'not described'}, not {want}"
    name = types.member_offset("kmem_cache", "name")
    size = types.member_offset("kmem_cache", "size")
    if name is None or size is None:
        return [], "the kernel's BTF has no struct kmem_cache name/size"
    return ["-DRAW", f"-DKC_NAME_OFF={name}", f"-DKC_SIZE_OFF={size}"], ""


def kmalloc_cache(size: int, flags: int) -> str:
    if size > KMALLOC_SLAB_MAX:
        return "kmalloc-large"
    label = f"{size // 1024}k" if size >= 1024 and size % 1024 == 0 else str(size)
    family = KMALLOC_FAMILIES.get(flags)
    return f"kmalloc-{family}-{label}" if family else f"kmalloc-{label}"


class SlabTraceProbe(BpfProbe):
    """Allocations only: who allocates from which cache, how fast (`t`, Enter)."""

    name = "slabtrace"
    program = "slabtrace"
    tracepoints = tuple(f"kmem:{e}" for e in ALLOC_EVENTS)
    cadence_s = 1.0

    #: collect the kernel stack of each sampled allocation (the slabstacks probe)
    stacks: ClassVar[bool] = False
    #: hook the frees too: per call site net growth (the slabfrees probe)
    frees: ClassVar[bool] = False

    def __init__(self, sample: int = SAMPLE, proc_root: str = "/proc", raw: bool = True) -> None:
        super().__init__()
        self._frames: dict[int, tuple[str, ...]] = {}
        self._want_raw = raw
        self._lock = threading.Lock()
        self.sample = max(1, int(sample))
        self.proc_root = proc_root
        self._syms: KernelSymbols | None = None
        self._stats = bpfstats.Windows()

    def defines(self) -> dict[str, int]:
        return {
            "SAMPLE": self.sample,
            "MAX_SITES": MAX_SITES,
            "MAX_LIVE": MAX_LIVE,
            **enumerated("SLAB_", COUNTERS, "NR_SLAB_COUNTERS"),
            **{f"KMALLOC_{family.upper()}": n for n, family in KMALLOC_FAMILIES.items()},
        }

    def cflags(self) -> list[str]:
        flags = self.define_flags()
        flags += ["-DSTACKS"] if self.stacks else []
        return flags + (["-DFREES"] if self.frees else []) + self._raw_config[0]

    @cached_property
    def _raw_config(self) -> tuple[list[str], str]:
        """-D flags of the raw tracepoint program, or [] and why not."""
        if not self._want_raw:
            return [], "regular tracepoints asked for"
        return raw_config(events=tuple(tp.partition(":")[2] for tp in self.tracepoints))

    @property
    def raw(self) -> bool:
        return bool(self._raw_config[0])

    def note(self) -> str:
        flags, why_not = self._raw_config
        how = "raw tracepoints" if flags else f"tracepoints ({why_not})"
        what = "allocations and frees" if self.frees else "allocations"
        return f"{what}, 1 in {self.sample} sampled, {how}" + (", kernel stacks" if self.stacks else "")

    def after_load(self) -> None:
        self._syms = KernelSymbols(self.proc_root)
        self._stats.tick()

    def _run_stats(self) -> tuple[int, int]:
        return bpfstats.program_stats(self.bpf, self.name)

    def poll(self) -> list[Record]:
        with self._lock:
            return self._poll() if self.bpf is not None else []

    def _poll(self) -> list[Record]:
        syms = self._syms
        by: dict[tuple[str, str], list[int]] = {}
        stacks: dict[tuple[str, str, tuple[str, ...]], int] = {}
        for k, v in self.bpf["sites"].items():
            if int(k.size):
                cache = kmalloc_cache(int(k.size), int(k.flags))
            else:
                cache = clean(bytes(k.name).split(b"\0", 1)[0], 64) or "?"
            site = syms.function(int(k.site)) if syms is not None else f"0x{int(k.site):x}"
            acc = by.setdefault((cache, site), [0, 0, 0])
            acc[0] += int(v.allocs)
            acc[1] += int(v.bytes)
            acc[2] += int(v.frees)
            if self.stacks and int(k.stack) >= 0:
                frames = self._stack(int(k.stack), site)
                stacks[(cache, site, frames)] = stacks.get((cache, site, frames), 0) + int(v.allocs)
        c = dict(zip(COUNTERS, self.array_slots("slab_counters", len(COUNTERS)), strict=True))
        ns, runs = self._run_stats()
        self._stats.tick()
        return [
            SlabTrace(
                sites=tuple((cache, site, a, b, f) for (cache, site), (a, b, f) in sorted(by.items())),
                sample=self.sample,
                events=c["allocs"] + c["frees"],
                allocs=c["allocs"],
                frees_traced=self.frees,
                frees=c["frees"],
                frees_unmatched=c["frees"] - c["frees matched"],
                dropped=c["dropped"],
                run_ns=ns,
                runs=runs,
                stacks=self._top_stacks(stacks),
            )
        ]

    def _stack(self, stack_id: int, site: str) -> tuple[str, ...]:
        """Stack ``stack_id``'s functions from the call site outward (the tracepoint's and the
        allocator's own frames above it dropped), resolved once per id (ids are not reused)."""
        frames = self._frames.get(stack_id)
        if frames is None:
            syms = self._syms
            try:
                addrs = list(self.bpf["slab_stacks"].walk(stack_id))
            except KeyError:
                addrs = []
            names = [syms.function(a) if syms is not None else f"0x{a:x}" for a in addrs]
            if site in names:
                names = names[names.index(site) :]
            frames = self._frames[stack_id] = tuple(clean(n, 96) for n in names[:STACK_FRAMES])
        return frames

    @staticmethod
    def _top_stacks(
        stacks: dict[tuple[str, str, tuple[str, ...]], int],
    ) -> tuple[tuple[str, str, tuple[str, ...], int], ...]:
        """The heaviest STACKS_PER_SITE stacks of every (cache, site)."""
        per: dict[tuple[str, str], list[tuple[int, tuple[str, ...]]]] = {}
        for (cache, site, frames), n in stacks.items():
            per.setdefault((cache, site), []).append((n, frames))
        out = []
        for (cache, site), got in sorted(per.items()):
            got.sort(key=lambda x: (-x[0], x[1]))
            out += [(cache, site, frames, n) for n, frames in got[:STACKS_PER_SITE]]
        return tuple(out)

    def close(self) -> None:
        with self._lock:
            self._stats.close()
            super().close()


class SlabStacksProbe(SlabTraceProbe):
    """The slab tracer with the kernel stack of every sampled allocation (``k`` in the Kernel
    pane): who called the call site. A stack walk per sampled allocation costs more than the
    sampling itself (docs/panes/kernel.md, Cost), so it is its own on-demand probe."""

    name = "slabstacks"
    stacks = True


class SlabFreesProbe(SlabTraceProbe):
    """The slab tracer with the frees hooked too (``f`` in the Kernel pane): per call site net
    growth (sampled allocations less their frees). Every free runs a program whether or not it
    frees a sampled object, which costs as much again as the allocations (docs/panes/kernel.md,
    Cost), so it is its own on-demand probe."""

    name = "slabfrees"
    frees = True
    tracepoints = tuple(f"kmem:{e}" for e in (*ALLOC_EVENTS, *FREE_EVENTS))
