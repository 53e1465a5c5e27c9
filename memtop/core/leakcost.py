"""What tracing a program's allocations costs it, from its allocation rate (the leaks preflight).

The preflight puts one entry probe where the leaks probe would put its probe on each function, so
every call it counts pays the same entry trap it will pay once traced: what the count cost per call
is measured (memtop.probes.leakrate), and every call costs that again when traced. On top of that,
an allocating function's probe is a return probe (a second trap, at the return) and runs the leaks
program: exact mode walks the stack and updates three maps, byte sampling only for the sampled
allocations. So the expected cost, in CPU seconds per second of the target's run, is

    (allocations/s + frees/s) x one counted call + allocations/s x (a return trap + the program)

Where the count's cost was too small to measure, one trap is the bench's. The per-trap and
per-program figures below were measured by bench/leaks_cost.py on a 12-frame stack
(docs/performance.md): the trap floor (the same probe points with empty programs) 1,918 ns per
malloc+free pair of three traps, so 639 ns a trap; exact mode (the program's own stack walk, the
address table) adds 566 ns of program per pair, byte sampling (512 KiB) 257 ns.
bench/leaks_preflight.py compares the estimate with the cost measured once tracing runs.

Pure Python: the live source (its non-interactive decision) and the leaks view share it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: one uprobe trap, from bench/leaks_cost.py's trap floor (1,918 ns per pair of three traps): an
#: entry's where the count could not measure it, and always a return probe's
TRAP_NS = 639
#: the leaks program per allocation beyond its traps: exact (stack walk, address table, counters)
#: and sampled
EXACT_PROGRAM_NS = 566
SAMPLED_PROGRAM_NS = 257
#: byte sampling is proposed when exact tracing would take more than this share of a core: past a
#: tenth of a core a CPU-bound target runs a tenth slower, five times memtop's own budget (2 %)
PROPOSE_AT_CPU = 0.10
#: the mean bytes between samples proposed (tcmalloc's default heap-profiling interval)
PROPOSED_SAMPLE_BYTES = 524288
#: the budget the Leaks pane's `B` traces on (a share of one core; `--budget` sets any other)
DEFAULT_BUDGET = 0.01


@dataclass(frozen=True, slots=True)
class Estimate:
    """Expected CPU seconds per second of the target's run, exact and with byte sampling."""

    exact_cpu: float
    sampled_cpu: float
    trap_ns: float
    trap_measured: bool

    @property
    def propose_sampling(self) -> bool:
        return self.exact_cpu > PROPOSE_AT_CPU


def estimate(allocs_per_s: float, frees_per_s: float, trap_ns: float = 0.0) -> Estimate:
    """The cost of tracing at these rates; ``trap_ns``: what the count cost per call, measured
    on the spot (0: the bench's trap)."""
    measured = trap_ns > 0
    trap = trap_ns if measured else float(TRAP_NS)
    entries = (allocs_per_s + frees_per_s) * trap
    returns = allocs_per_s * TRAP_NS
    return Estimate(
        exact_cpu=(entries + returns + allocs_per_s * EXACT_PROGRAM_NS) / 1e9,
        sampled_cpu=(entries + returns + allocs_per_s * SAMPLED_PROGRAM_NS) / 1e9,
        trap_ns=trap,
        trap_measured=measured,
    )
