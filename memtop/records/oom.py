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
    scope: str  # "memcg" | "global" | "cpuset" | "mempolicy" (from the kernel log) | "unknown"
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


@record("signal_kill")
@dataclass(frozen=True, slots=True)
class SignalKill(Record):
    """A SIGKILL or SIGTERM one task sent another (kills probe, signal:signal_generate): how
    userspace memory killers kill. The sender is named by its executable, read when the event was
    drained (``sender_exe`` empty: it was gone); ``killer`` is the known memory killer it matched
    (empty: none). ``rss_bytes``/``swap_bytes``: the victim's, read then (None: already gone; the
    state falls back on the last /proc sample). ``threshold_bytes``: SIGKILLs of processes holding
    less, by senders that are not memory killers, are not listed."""

    ts_ns: int
    sig: int  # 9 SIGKILL, 15 SIGTERM
    victim_pid: int
    victim_comm: str
    sender_pid: int
    sender_tid: int
    sender_comm: str
    sender_exe: str = ""
    killer: str = ""
    result: int = 0  # the kernel's delivery result (0 delivered, 1 ignored, 2 already pending, …)
    group: bool = True  # sent to the whole process, not one thread
    rss_bytes: int | None = None
    swap_bytes: int | None = None
    threshold_bytes: int = 100 << 20


@record("oom_score_adj")
@dataclass(frozen=True, slots=True)
class OomScoreAdj(Record):
    """Every process whose /proc/PID/oom_score_adj is not 0, as (pid, adj) (kills probe, a scan
    every few seconds, sent when it changed): the OOM killer's bias, for the next victim."""

    adjusted: tuple[tuple[int, int], ...]


@record("memory_killers")
@dataclass(frozen=True, slots=True)
class MemoryKillers(Record):
    """The userspace memory killers running and the thresholds they kill at, as memtop read them
    (kills probe, a scan every few seconds, sent when it changed): each (killer, pid, memory
    percent, swap percent, memory KiB, swap KiB, pressure percent, where read). A killer kills when
    MemAvailable is at or under its memory threshold and SwapFree at or under its swap threshold:
    earlyoom's ``-m``/``-s`` (percent of MemTotal / SwapTotal) and ``-M``/``-S`` (KiB, 0 none: the
    lower of the two applies) from its command line; systemd-oomd's ``SwapUsedLimit`` (memory and
    swap used above it: 100 - it free) from oomd.conf; nohang's ``soft_threshold_min_mem`` /
    ``soft_threshold_min_swap`` from the config its command line names. ``pressure percent``: a
    PSI limit (systemd-oomd's ``DefaultMemoryPressureLimit``, nohang's ``soft_threshold_max_psi``),
    shown, not forecast (0: none)."""

    killers: tuple[tuple[str, int, float, float, int, int, float, str], ...]


@record("kill_reason")
@dataclass(frozen=True, slots=True)
class KillReason(Record):
    """Why a userspace killer killed, as it said (kills probe): its journal line (earlyoom's
    ``mem avail: … <= SIGTERM threshold …``, systemd-oomd's ``Killed … due to …``) or the cgroup
    xattrs systemd-oomd and Meta's oomd set (``user.oomd_*``, ``trusted.oomd_*``), nohang's memory
    status lines; ``rule`` the kind of rule it names ("low_memory", "swap", "pressure", "zram",
    "" unknown)."""

    victim_pid: int  # 0: the killer named a cgroup, not a process
    killer: str
    reason: str
    rule: str = ""
    cgroup: str = ""  # the cgroup the killer named (its processes' kills), when it named one


@record("oomd_monitored")
@dataclass(frozen=True, slots=True)
class OomdMonitored(Record):
    """What systemd-oomd watches, as ``oomctl dump`` said (kills probe, at most every 30 s, only
    where oomctl is installed; sent when it changed): its ``SwapUsedLimit``, its default memory
    pressure limit and duration, and each monitored cgroup as (path, rule "swap" or "pressure",
    its pressure limit %, its duration s; None: not given). ``status``: "" when read, else why
    not (one line: systemd-oomd not running, oomctl timed out)."""

    status: str
    dry_run: bool = False
    swap_used_limit_percent: float | None = None
    pressure_limit_percent: float | None = None
    pressure_duration_s: float | None = None
    monitored: tuple[tuple[str, str, float | None, float | None], ...] = ()
