"""OOM kills (oom probe, oom:mark_victim)."""

from __future__ import annotations

from dataclasses import dataclass

from memtop.records import Record, record


@record("oom_kill")
@dataclass(frozen=True, slots=True)
class OomKill(Record):
    """One OOM kill. RSS figures are the victim's at the kill, as the kernel's tracepoint gave
    them; ``missing`` names what neither the tracepoint nor /proc could tell (older kernels)."""

    ts_ns: int
    victim_pid: int
    victim_comm: str
    trigger_pid: int
    trigger_comm: str
    scope: str  # "memcg" | "global" | "unknown"
    total_vm_bytes: int
    anon_rss_bytes: int
    file_rss_bytes: int
    shmem_rss_bytes: int
    uid: int
    oom_score_adj: int
    pgtables_bytes: int = 0
    memcg: str = ""  # the OOM memcg's path (the limit that fired), when the kernel log said
    task_memcg: str = ""  # the victim's own memcg (the OOM memcg or below it), when the log said
    #: the OOM memcg's usage, limit and failcnt at the kill, as the kernel printed them
    memcg_usage_bytes: int | None = None
    memcg_limit_bytes: int | None = None
    memcg_failcnt: int | None = None
    loadavg: tuple[float, float, float] = (0.0, 0.0, 0.0)
    missing: tuple[str, ...] = ()
    #: where memtop learnt of the kill: "bpf" (oom:mark_victim, while memtop ran) or "kmsg" (the
    #: kernel's report, already in /dev/kmsg when memtop started: ``ts_ns`` is the report's
    #: timestamp, on the same boot clock)
    source: str = "bpf"
    #: the allocation that invoked the OOM killer, as the kernel's report said ("" / None: unread)
    gfp_mask: str = ""
    order: int | None = None
    #: the report's task table, the largest by RSS first: (pid, comm, rss_bytes, oom_score_adj)
    top_tasks: tuple[tuple[int, str, int, int], ...] = ()
