"""Reclaim records (fed by the vmscan probe, which also feeds the vmscan pane): direct and memcg
reclaim latency, aggregated in kernel maps, plus one event per episode.

Every total is cumulative since the probe attached; rates are derived in ``memtop.state.reclaim``.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtop.records import Record, record

RECLAIM_KINDS = ("direct", "memcg")


@record("reclaim_totals")
@dataclass(frozen=True, slots=True)
class ReclaimTotals(Record):
    """Direct and memcg reclaim latency aggregated in kernel maps (nothing lost to the ring).

    ``histogram``: (kind, log2 bucket index, count) of episode latencies in ns.
    ``pids``: (pid, comm, kind, events, total_ns, max_ns, pages_reclaimed) per process and kind.
    ``unpaired``: reclaim ends whose begin was not seen (began before attach, or evicted).
    """

    histogram: tuple[tuple[str, int, int], ...]
    pids: tuple[tuple[int, str, str, int, int, int, int], ...]
    unpaired: int = 0
    #: (cgroup2 id, kind, events, total_ns, max_ns, pages_reclaimed) per reclaiming task's cgroup2
    cgroups: tuple[tuple[int, str, int, int, int, int], ...] = ()
    #: episodes not counted per cgroup (the kernel's cgroup table was full)
    cgroups_dropped: int = 0
    #: episodes the kernel left out of the event log (its rate limit), apart from ring drops:
    #: every figure above counts them
    unlisted: int = 0
    #: (pid, kind, log2 bucket index, count): each process's latency histogram, so per-cgroup
    #: percentiles need no events; None in recordings made before it existed (their per-cgroup
    #: figures come from the events, which were all logged then)
    pid_hist: tuple[tuple[int, str, int, int], ...] | None = None
    #: (pid, cgroup2 id of its latest episode's task): where a v2 process's reclaim goes when no
    #: read of cgroup.procs listed it
    pid_cgroups: tuple[tuple[int, int], ...] = ()


@record("reclaim_event")
@dataclass(frozen=True, slots=True)
class ReclaimEvent(Record):
    """One direct or memcg reclaim episode, like a drsnoop line. ``ts_ns`` is its end
    (CLOCK_MONOTONIC). A log: the kernel rate-limits it (``ReclaimTotals.unlisted``), and no
    figure is computed from it."""

    ts_ns: int
    pid: int
    tid: int
    comm: str
    kind: str  # "direct" | "memcg"
    latency_ns: int
    pages_reclaimed: int
    cgroup_id: int = 0  # the reclaiming task's cgroup2 id (0: not known)
