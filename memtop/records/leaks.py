"""Leaks records: outstanding user allocations by stack (fed by the on-demand leaks probe)."""

from __future__ import annotations

from dataclasses import dataclass

from memtop.records import Record, record

#: upper bounds (exclusive, seconds) of the age histogram's buckets; the last bucket is open
AGE_BUCKETS_S: tuple[float, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: tracing on a budget: the confidence at which a stack is reported as a leak
LEAK_CONFIDENCE = 0.999


@record("leak_stack")
@dataclass(frozen=True, slots=True)
class LeakStack(Record):
    """One (pid, user stack)'s allocations since the probe attached, as cumulative counters:
    outstanding = alloc - free. Sizes are the allocator's usable size (glibc) or the requested
    size. ``age_hist_bytes`` holds outstanding bytes by age (buckets per ``AGE_BUCKETS_S``, plus
    one open bucket) as of ``ages_ts_ns``; ``oldest_ts_ns`` is the birth (CLOCK_MONOTONIC) of the
    oldest outstanding allocation, 0 when there is none."""

    pid: int
    stack_id: int
    frames: tuple[str, ...]  # innermost first: "function+0xoff [module] file:line"
    alloc_bytes: int
    alloc_count: int
    free_bytes: int
    free_count: int
    oldest_ts_ns: int = 0
    age_hist_bytes: tuple[int, ...] = ()
    ages_ts_ns: int = 0

    @property
    def outstanding_bytes(self) -> int:
        return max(0, self.alloc_bytes - self.free_bytes)

    @property
    def outstanding_count(self) -> int:
        return max(0, self.alloc_count - self.free_count)


@record("leak_target")
@dataclass(frozen=True, slots=True)
class LeakTarget(Record):
    """A traced pid: state is attaching | tracing | exited | failed. ``symbols`` were attached,
    ``failed_symbols`` are "name: reason" (one failing symbol is reported, not fatal)."""

    pid: int
    comm: str
    state: str
    message: str = ""
    symbols: tuple[str, ...] = ()
    failed_symbols: tuple[str, ...] = ()
    tracked_allocs: int = 0
    exited_ts_ns: int = 0
    #: the allocator lane it is traced with (memtop.probes.allocators), "" when not known
    allocator: str = ""
    #: how many times it exec'd while traced: each exec drops the old image's allocations (the
    #: state forgets its stacks) and traces the new image's allocator
    execs: int = 0
    #: the files it maps, for profiles: (path, GNU build id in hex or "", lowest start, highest
    #: end, file offset); the frames name them by their base name
    mappings: tuple[tuple[str, str, int, int, int], ...] = ()


@record("leak_calls")
@dataclass(frozen=True, slots=True)
class LeakCalls(Record):
    """Allocation calls the leaks probe has seen since it attached (all its pids, sampled or not):
    the traced programs' allocation rate. ``sample_bytes``: byte sampling's mean interval (0:
    every allocation is recorded, exact)."""

    calls: int
    sample_bytes: int = 0


@record("leak_preflight")
@dataclass(frozen=True, slots=True)
class LeakPreflight(Record):
    """The leaks preflight: calls to the allocator functions the leaks probe would trace, counted
    for ``window_ns`` by entry probes alone (memtop.probes.leakrate), before it attaches.

    ``state``: measuring | measured | exited (a target ended during the count) | failed.
    ``functions``/``calls``: each probed function and its calls in the window; ``alloc_calls``
    and ``free_calls`` sum the allocating and the freeing ones. ``trap_ns``: one trap's cost
    measured on the spot from the targets' extra CPU or system time (0: too little to measure).
    ``program_ns``: the count program's own run time per call as the kernel measured it (BPF
    stats; 0 when unavailable). ``sample_bytes``: what byte sampling would use. ``decision``: ""
    (waiting for the user) | exact | sampled | cancelled; ``decided_by``: user | --sample-bytes |
    proposal | exited."""

    pids: tuple[int, ...]
    state: str
    message: str = ""
    allocator: str = ""
    window_ns: int = 0
    functions: tuple[str, ...] = ()
    calls: tuple[int, ...] = ()
    alloc_calls: int = 0
    free_calls: int = 0
    trap_ns: float = 0.0
    program_ns: float = 0.0
    sample_bytes: int = 0
    decision: str = ""
    decided_by: str = ""

    @property
    def allocs_per_s(self) -> float:
        return self.alloc_calls * 1e9 / self.window_ns if self.window_ns else 0.0

    @property
    def frees_per_s(self) -> float:
        return self.free_calls * 1e9 / self.window_ns if self.window_ns else 0.0


@record("leak_budget")
@dataclass(frozen=True, slots=True)
class LeakBudget(Record):
    """Tracing on a CPU budget (``--budget``): the leaks probe's uprobes attached for ``on_ns``
    of every ``period_ns`` (memtop.probes.leakwindows). ``budget``: the share of one core allowed
    for the targets' added CPU and memtop's; ``own_cpu_ns``: memtop's CPU time on the windows
    (attach, detach, the table's scan) and its polls, measured; ``target_cpu_ns``: the targets'
    added CPU, measured from /proc (their CPU in each window beyond their untraced rate;
    ``measured_windows`` of the windows), estimated for the others from the calls counted at
    memtop.core.leakcost's cost per call; ``cost_scale``: measured over estimated, the last
    windows' (what the next ones are planned with); ``elapsed_ns`` since tracing began. ``p_resolve``: the share of a window's candidates resolved by the next (the
    median stack's; -1 while unknown). ``candidates``: followed now; ``aged_out``: summarised
    away (the bound); ``stacks_dropped``: stacks forgotten with nothing unresolved (the bound on
    stacks)."""

    budget: float
    windows: int
    on_ns: int
    period_ns: int
    calls_per_s: float
    own_cpu_ns: int
    target_cpu_ns: int
    elapsed_ns: int
    p_resolve: float = -1.0
    candidates: int = 0
    aged_out: int = 0
    stacks_dropped: int = 0
    cost_scale: float = 1.0
    measured_windows: int = 0


@record("leak_verdict")
@dataclass(frozen=True, slots=True)
class LeakVerdict(Record):
    """One stack's candidates across budgeted windows: ``born`` (blocks live at a window's end),
    ``resolved`` (freed or their address handed out again, seen in a later window),
    ``unresolved`` now (``unresolved_bytes``), and ``confidence`` that the stack leaks (a
    binomial test of its old unresolved candidates: memtop.probes.leakwindows).
    ``growing_since_ns``: when its unresolved candidates began to pile up (0: they do not)."""

    pid: int
    stack_id: int
    born: int
    resolved: int
    unresolved: int
    unresolved_bytes: int
    confidence: float
    growing_since_ns: int = 0
