"""Kernel records (the kernel probe and its on-demand tracers): the kernel's own memory
accounting files as read, and what the slab and page-allocator tracers counted in kernel.
Counters are cumulative; rates and growth are derived in ``memtop.state.kernel``."""

from __future__ import annotations

from dataclasses import dataclass

from memtop.records import Record, record


@record("kernel_mem")
@dataclass(frozen=True, slots=True)
class KernelMem(Record):
    """/proc/meminfo as ``(name, bytes)`` (HugePages_ counts stay counts), zsmalloc's pages in
    bytes (vmstat nr_zspages; None when the kernel has no such counter) and whether kernel stacks
    are vmalloc'd (None: the kernel does not say)."""

    meminfo: tuple[tuple[str, int], ...]
    zspages_bytes: int | None = None
    vmap_stack: bool | None = None


@record("slab_caches")
@dataclass(frozen=True, slots=True)
class SlabCaches(Record):
    """/proc/slabinfo: the caches that changed since the last record (all of them when ``full``),
    each ``(name, active_objs, num_objs, objsize, objperslab, pagesperslab, num_slabs)``, and those
    gone. ``readable`` False: the file could not be read (``message`` says why, ``hint`` what to
    do) and nothing here is a measurement."""

    caches: tuple[tuple[str, int, int, int, int, int, int], ...] = ()
    gone: tuple[str, ...] = ()
    full: bool = False
    readable: bool = True
    message: str = ""
    hint: str = ""


@record("buddyinfo")
@dataclass(frozen=True, slots=True)
class BuddyInfo(Record):
    """/proc/buddyinfo: free blocks per order for each (node, zone)."""

    zones: tuple[tuple[int, str, tuple[int, ...]], ...]


@record("vmalloc_callers")
@dataclass(frozen=True, slots=True)
class VmallocCallers(Record):
    """/proc/vmallocinfo summed by caller function and kind: ``(caller, kind, areas, bytes)``, the
    largest ``len(callers)`` of ``ncallers``; totals over every area."""

    callers: tuple[tuple[str, str, int, int], ...] = ()
    ncallers: int = 0
    areas: int = 0
    total_bytes: int = 0
    readable: bool = True
    message: str = ""


@record("alloc_profile")
@dataclass(frozen=True, slots=True)
class AllocProfile(Record):
    """Kernel allocation profiling: ``state`` one of memtop.linux.kernelfs.PROFILING_STATES and what to
    do (``hint``); when on, /proc/allocinfo's format ``version`` and its largest call sites
    ``(bytes, calls, file, line, module, function, accurate)`` of ``nsites``, with totals."""

    state: str
    hint: str = ""
    version: str = ""
    sites: tuple[tuple[int, int, str, int, str, str, bool], ...] = ()
    nsites: int = 0
    total_bytes: int = 0
    total_calls: int = 0
    inaccurate: int = 0


@record("slab_trace")
@dataclass(frozen=True, slots=True)
class SlabTrace(Record):
    """A slab tracer's in-kernel aggregation (the slabtrace, slabfrees and slabstacks probes),
    cumulative since it attached: per (cache, call site) ``(cache, site, sampled allocs, sampled
    bytes, sampled frees matched to those allocs)``; ``sample``: 1 in how many allocations was
    recorded (per CPU); ``events``: every tracepoint hit (sampled or not); ``frees_traced``: the
    free hooks ran (the slabfrees probe; recordings made before there was a choice always
    traced them); when False the frees figures are 0 and mean nothing; ``frees_unmatched``: frees
    of objects not sampled (not attributed); ``dropped``: samples lost to a full map; ``run_ns``/``runs``: the programs'
    own run time as the kernel measured it (BPF_ENABLE_STATS), 0 when it could not. ``stacks``
    (the slabstacks probe only): per (cache, call site) its kernel stacks, ``(cache, site, frames
    from the call site outward, sampled allocs)``, at most a few per site."""

    sites: tuple[tuple[str, str, int, int, int], ...] = ()
    sample: int = 1
    events: int = 0
    allocs: int = 0
    frees_traced: bool = True
    frees: int = 0
    frees_unmatched: int = 0
    dropped: int = 0
    run_ns: int = 0
    runs: int = 0
    stacks: tuple[tuple[str, str, tuple[str, ...], int], ...] = ()


@record("page_alloc")
@dataclass(frozen=True, slots=True)
class PageAlloc(Record):
    """The pagealloc probe: kmem:mm_page_alloc counted by order in kernel (exact, cumulative
    since it attached); ``run_ns``/``runs`` as for SlabTrace."""

    orders: tuple[int, ...] = ()
    run_ns: int = 0
    runs: int = 0
