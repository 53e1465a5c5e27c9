"""What tracing a program's allocations costs it, from its allocation rate (the leaks preflight).

The leaks probe puts a return probe on each allocating function (two traps a call: the entry that
takes the return address, the return) and an entry probe on each freeing one (one trap); exact mode
then walks the stack and updates three maps per allocation, byte sampling only the sampled ones.
So the expected cost, in CPU seconds per second of the target's run, is

    allocations/s x (2 traps + the allocation's program) + frees/s x 1 trap

with the per-trap and per-program figures below, measured by bench/leaks_cost.py on a 12-frame
stack (docs/performance.md): the trap floor (the same probe points with empty programs) 1,314 ns
per malloc+free pair, so 438 ns a trap; exact mode adds 1,487 ns of program per pair on top,
byte sampling (512 KiB) 141 ns. The preflight measures the trap on the spot where it can (the
target's system time while counted, memtop.probes.leakrate); the programs' share is the bench's.

Pure Python: the live source (its non-interactive decision) and the leaks view share it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: one uprobe trap, from bench/leaks_cost.py's trap floor (1,314 ns per pair of three traps)
TRAP_NS = 438
#: the leaks program per allocation beyond its traps: exact (stack walk, three maps) and sampled
EXACT_PROGRAM_NS = 1487
SAMPLED_PROGRAM_NS = 141
#: byte sampling is proposed when exact tracing would take more than this share of a core: past a
#: tenth of a core a CPU-bound target runs a tenth slower, five times memtop's own budget (2 %)
PROPOSE_AT_CPU = 0.10
#: the mean bytes between samples proposed (tcmalloc's default heap-profiling interval)
PROPOSED_SAMPLE_BYTES = 524288


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
    """The cost of tracing at these rates; ``trap_ns`` measured on the spot (0: the bench's)."""
    measured = trap_ns > 0
    trap = trap_ns if measured else float(TRAP_NS)
    traps = allocs_per_s * 2 * trap + frees_per_s * trap
    return Estimate(
        exact_cpu=(traps + allocs_per_s * EXACT_PROGRAM_NS) / 1e9,
        sampled_cpu=(traps + allocs_per_s * SAMPLED_PROGRAM_NS) / 1e9,
        trap_ns=trap,
        trap_measured=measured,
    )
