"""OOM kills: a bounded log that outlives the victims, and notices the app shows on any screen."""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.host import MemInfo
from memtop.records.oom import KillReason, MemoryKillers, OomdMonitored, OomKill, OomScoreAdj, SignalKill
from memtop.state.base import Notice, SubState

if TYPE_CHECKING:
    from memtop.state import State

LOG_LEN = 1000
#: a SIGKILL this soon after a SIGTERM to the same process is the same kill (the SIGTERM ignored)
MERGE_NS = 60_000_000_000
#: processes whose recent signals are remembered (a SIGTERM waiting for its SIGKILL)
RECENT = 4096
SIGKILL, SIGTERM = 9, 15
SIGNAL_NAMES = {SIGKILL: "SIGKILL", SIGTERM: "SIGTERM"}
#: a victim's RSS at a signal is the peak of its samples this close to it (before: a tick or two)
AROUND_NS = 2_000_000_000
#: the growth rate of a forecast is over this much of the latest history
FORECAST_WINDOW_NS = 10_000_000_000
#: a cgroup not sampled for this long has not changed (the cgroups probe sends changes only)
STALE_NS = 2_000_000_000
#: a forecast under this many seconds is announced (once, until it recovers)
FORECAST_NOTICE_S = 60.0
#: limits above this are "no limit" (v1 writes PAGE_COUNTER_MAX pages for unlimited)
NO_LIMIT = 1 << 60
MACHINE = ""  # the machine's forecast, keyed beside the cgroups' paths
#: the rule a userspace killer kills on, when it has only one: earlyoom kills only when
#: MemAvailable and SwapFree are both at or under its thresholds
ONE_RULE = {"earlyoom": "low_memory"}
#: (killer, reason, cgroup) series of the kills counted, at most (a machine that kills in ever
#: new cgroups: the kills beyond count under cgroup "")
KILL_SERIES = 1000


@dataclass(frozen=True, slots=True)
class Forecast:
    """Time to exhaustion at the current growth rate: of a memory cgroup's limit (usage + swap
    against limit + the swap it may use), or of the machine's MemAvailable (path "")."""

    path: str
    used_bytes: int
    limit_bytes: int
    growth_bytes_per_s: float  # over the last FORECAST_WINDOW_NS (negative: shrinking)
    seconds_left: float | None  # None: not growing
    #: who kills when it runs out: "kernel" (a memcg's limit, the machine's MemAvailable at 0), or
    #: the userspace killer whose threshold the machine reaches first ("earlyoom")
    killer: str = "kernel"
    #: the machine's: the MemAvailable the killer kills at (0: the kernel's)
    threshold_bytes: int = 0

    @property
    def margin_bytes(self) -> int:
        return max(0, self.limit_bytes - self.used_bytes)


@dataclass(slots=True)
class SignalKillRow:
    """One process killed by a signal from another task: its SIGTERM and SIGKILL in one row."""

    victim_pid: int
    victim_comm: str
    ts_ns: int  # the first signal
    last_ts_ns: int
    #: (signal, ts_ns, sender pid, sender comm, delivery result), in order
    signals: list[tuple[int, int, int, str, int]] = field(default_factory=list)
    sender_pid: int = 0
    sender_comm: str = ""
    sender_exe: str = ""
    killer: str = ""  # the known memory killer that sent it ("" none)
    #: why, as the killer said (its journal line, systemd-oomd's cgroup xattrs; "" not said), and
    #: the kind of rule ("low_memory", "swap", "pressure"; "" unknown)
    reason: str = ""
    rule: str = ""
    rss_bytes: int | None = None
    swap_bytes: int | None = None
    cgroup: str | None = None
    #: PSI in percent at the first signal: the machine's (avg10) and the victim's cgroup's (its
    #: share of the last interval)
    psi_some: float | None = None
    psi_full: float | None = None
    cgroup_psi_some: float | None = None
    cgroup_psi_full: float | None = None
    threshold_bytes: int = 0
    listed: bool = False

    def has(self, sig: int) -> bool:
        return any(s[0] == sig for s in self.signals)


class OomState(SubState):
    key = "oom"
    takes = (
        MemInfo,
        OomScoreAdj,
        MemoryKillers,
        OomdMonitored,
        KillReason,
        SignalKill,
        OomKill,
    )

    def __init__(self) -> None:
        self.kills: deque[OomKill] = deque(maxlen=LOG_LEN)
        self.total = 0
        #: kills the kernel log held when memtop started (not counted in ``total``)
        self.before_start = 0
        self._unnoticed: list[OomKill] = []
        #: processes killed by another task's signal that memtop lists (a known memory killer's,
        #: or a SIGKILL of a process holding more than the threshold), newest first
        self.signal_kills: deque[SignalKillRow] = deque(maxlen=LOG_LEN)
        self.signal_total = 0
        self._recent: OrderedDict[int, SignalKillRow] = OrderedDict()
        self._unnoticed_signals: list[SignalKillRow] = []
        #: (ts_ns, MemAvailable, swap free) over the window, for the machine's forecast
        self._available: deque[tuple[int, int, int]] = deque(maxlen=256)
        self.swap_total_bytes = 0
        #: the latest forecasts, by cgroup path ("" the machine), computed each batch
        self.forecasts: dict[str, Forecast] = {}
        self._warned: set[str] = set()
        self._unnoticed_forecasts: list[Forecast] = []
        #: pid -> oom_score_adj of the processes whose adj is not 0 (the kills probe's scan)
        self.adj: dict[int, int] = {}
        self.mem_total_bytes = 0
        #: the userspace memory killers running and their thresholds (MemoryKillers.killers)
        self.killers: tuple[tuple[str, int, float, float, int, int, float, str], ...] = ()
        #: kills seen while memtop ran, by (killer, reason, cgroup): the kernel's by its constraint,
        #: known userspace killers' by their rule (the exporter's counter; never goes down)
        self.kill_counts: dict[tuple[str, str, str], int] = {}
        #: systemd-oomd's monitored cgroups as oomctl said (None: oomctl not installed, not run)
        self.oomd: OomdMonitored | None = None
        #: per memcg whose forecast is flat whatever the time: what it was made of (its sample,
        #: its history's last point, when its row was updated, the machine's swap) and it
        self._flat: dict[str, tuple[object, object, int, int, Forecast]] = {}

    def apply(self, batch: Batch, state: State) -> None:
        for rec in batch.records:
            if isinstance(rec, MemInfo):
                self._available.append((batch.ts_ns, rec.available_bytes, rec.swap_free_bytes))
                self.swap_total_bytes = rec.swap_total_bytes
                self.mem_total_bytes = rec.total_bytes
                continue
            if isinstance(rec, OomScoreAdj):
                self.adj = dict(rec.adjusted)
                continue
            if isinstance(rec, MemoryKillers):
                self.killers = rec.killers
                continue
            if isinstance(rec, OomdMonitored):
                self.oomd = rec
                continue
            if isinstance(rec, KillReason):
                self._on_reason(rec)
                continue
            if isinstance(rec, SignalKill):
                self._on_signal(rec, state)
                continue
            if isinstance(rec, OomKill):
                self.kills.appendleft(rec)  # the log's history comes oldest first, before any live kill
                if rec.source == "kmsg":  # happened before memtop started: not news, no notice
                    self.before_start += 1
                    continue
                self.total += 1
                self._unnoticed.append(rec)
                from memtop.state.cgroups import CgroupsState

                cgroup = rec.task_memcg or state.get(CgroupsState).memcg_of(rec.victim_pid) or ""
                self._count("kernel", rec.scope, cgroup)
        del self._unnoticed[:-20]  # a storm of kills: the latest 20 notices are enough
        del self._unnoticed_signals[:-20]
        self._forecast(state)

    def _forecast(self, state: State) -> None:
        """Each limited memcg's and the machine's time to exhaustion; a notice for each that fell
        under FORECAST_NOTICE_S. O(cgroups): a few history points each."""
        from memtop.state.cgroups import CgroupsState

        now = state.ts_ns
        out: dict[str, Forecast] = {}
        flat, keep = self._flat, {}
        swap_total = self.swap_total_bytes
        for path, row in state.get(CgroupsState).rows.items():
            smp = row.sample
            limit = smp.limit_bytes
            if limit is None or limit >= NO_LIMIT or smp.usage_bytes is None or not row.history:
                continue
            stale = now - row.ts_ns > STALE_NS
            memo = flat.get(path)
            if (
                memo is not None
                and stale
                and memo[0] is smp
                and memo[1] is row.history[-1]
                and memo[2] == row.ts_ns
                and memo[3] == swap_total
            ):
                # an idle memcg (500 of them, each tick): the same answer as the last tick's
                out[path], keep[path] = memo[4], memo
                continue
            # swap it may still use: its own swap limit (v1 memsw - limit, v2 swap.max), at most
            # the machine's swap
            room = (
                self.swap_total_bytes
                if smp.swap_limit_bytes is None
                else min(smp.swap_limit_bytes, self.swap_total_bytes)
            )
            used = smp.usage_bytes + (smp.swap_bytes or 0)
            # from its latest sample (this batch's may come after this state's apply); a cgroup
            # is sent only when it changed, so one not sent for a while has been flat since
            at = now if stale else row.ts_ns
            then = None
            for point in reversed(row.history):
                then = point
                if point[0] <= at - FORECAST_WINDOW_NS:
                    break
            rate = 0.0
            if then is not None and then[1] is not None and at > then[0]:
                rate = (used - then[1] - (then[6] or 0)) * 1e9 / (at - then[0])
            out[path] = f = _forecast(path, used, limit + room, rate, age_ns=now - at)
            if stale and then is row.history[-1] and at > then[0] and rate == 0.0:
                # its window starts at its last point, which is its sample now: flat (no growth,
                # no time left to count down) at every later tick until a new sample comes
                keep[path] = (smp, then, row.ts_ns, swap_total, f)
        if self._available:
            # the killers' thresholds only while the kills probe reads them (an earlyoom that
            # exited while it failed would otherwise be forecast against)
            kills = state.statuses.get("kills")
            out[MACHINE] = self._machine(kills is not None and kills.state == "attached")
        self.forecasts = out
        self._flat = keep
        for path, f in out.items():
            if f.seconds_left is not None and f.seconds_left < FORECAST_NOTICE_S:
                if path not in self._warned:
                    self._warned.add(path)
                    self._unnoticed_forecasts.append(f)
            else:
                self._warned.discard(path)
        del self._unnoticed_forecasts[:-20]

    def _machine(self, with_killers: bool) -> Forecast:
        """The machine's forecast: when MemAvailable reaches the first threshold a killer kills
        at. The kernel's is 0; a userspace killer's (earlyoom's, systemd-oomd's) is MemAvailable
        at or under its memory threshold while SwapFree is at or under its swap threshold (no
        swap: always): it kills when both are reached, the later of the two."""
        ts, avail, swap_free = self._available[-1]
        then_ts, then_avail, then_swap = ts, avail, swap_free
        for t, a, sw in reversed(self._available):
            then_ts, then_avail, then_swap = t, a, sw
            if t <= ts - FORECAST_WINDOW_NS:
                break
        span_s = (ts - then_ts) / 1e9
        rate = (then_avail - avail) / span_s if span_s > 0 else 0.0
        swap_rate = (then_swap - swap_free) / span_s if span_s > 0 else 0.0
        # the kernel's: MemAvailable at 0 (the "limit" is what is available; only the margin and
        # the rate matter)
        best = _forecast(MACHINE, 0, avail, rate)
        for name, _pid, mem_pct, swap_pct, mem_kib, swap_kib, _psi, _where in (
            self.killers if with_killers else ()
        ):
            mem_at = _threshold(self.mem_total_bytes, mem_pct, mem_kib)
            swap_at = _threshold(self.swap_total_bytes, swap_pct, swap_kib)
            mem_s = _reach(avail, mem_at, rate)
            swap_s = 0.0 if self.swap_total_bytes == 0 else _reach(swap_free, swap_at, swap_rate)
            if mem_s is None or swap_s is None:
                continue  # one of its two conditions is not coming: it will not kill
            left = max(mem_s, swap_s)
            if best.seconds_left is None or left <= best.seconds_left:
                best = Forecast(MACHINE, mem_at, avail, rate, left, killer=name, threshold_bytes=mem_at)
        return best

    def _on_signal(self, rec: SignalKill, state: State) -> None:
        row = self._recent.get(rec.victim_pid)
        if row is None or rec.ts_ns - row.last_ts_ns > MERGE_NS or row.victim_comm != rec.victim_comm:
            row = SignalKillRow(rec.victim_pid, rec.victim_comm, rec.ts_ns, rec.ts_ns)
            self._recent[rec.victim_pid] = row
            while len(self._recent) > RECENT:
                self._recent.popitem(last=False)
        self._recent.move_to_end(rec.victim_pid)
        if not row.has(rec.sig) or rec.sender_pid != row.sender_pid:
            row.signals.append((rec.sig, rec.ts_ns, rec.sender_pid, rec.sender_comm, rec.result))
        row.last_ts_ns = rec.ts_ns
        row.threshold_bytes = rec.threshold_bytes
        if rec.killer or not row.killer:  # the known killer stays the one named
            row.sender_pid, row.sender_comm, row.sender_exe = rec.sender_pid, rec.sender_comm, rec.sender_exe
            row.killer = rec.killer or row.killer
        if row.rss_bytes is None:
            self._at_kill(row, rec, state)
        if not row.listed and (
            row.killer or (row.has(SIGKILL) and (row.rss_bytes or 0) > row.threshold_bytes)
        ):
            row.listed = True
            self.signal_kills.appendleft(row)
            self.signal_total += 1
            self._unnoticed_signals.append(row)
            if row.killer:
                self._count(row.killer, row.rule or ONE_RULE.get(row.killer, "unknown"), row.cgroup or "")

    def _count(self, killer: str, reason: str, cgroup: str) -> None:
        key = (killer, reason, cgroup)
        if key not in self.kill_counts and len(self.kill_counts) >= KILL_SERIES:
            key = (killer, reason, "")
        self.kill_counts[key] = self.kill_counts.get(key, 0) + 1

    def _on_reason(self, rec: KillReason) -> None:
        """A killer's own reason, read after the kill (its journal line comes later): on the row
        of that victim by that killer."""
        if rec.victim_pid:
            rows = [r for r in (self._recent.get(rec.victim_pid),) if r is not None]
        else:  # a cgroup's kill: its processes' rows not yet explained (the latest minute's)
            under = rec.cgroup.rstrip("/") + "/"
            rows = [
                r
                for r in self._recent.values()
                if not r.reason and r.cgroup and (r.cgroup == rec.cgroup or r.cgroup.startswith(under))
            ]
        for row in rows:
            if row.killer == rec.killer:
                row.reason = rec.reason
                row.rule = rec.rule or row.rule

    def _at_kill(self, row: SignalKillRow, rec: SignalKill, state: State) -> None:
        """The victim's memory (read with the event, else memtop's last /proc sample of it), its
        cgroup, and PSI then."""
        from memtop.state.cgroups import CgroupsState
        from memtop.state.host import HostState
        from memtop.state.processes import ProcessesState

        row.rss_bytes, row.swap_bytes = rec.rss_bytes, rec.swap_bytes
        sampled = state.get(ProcessesState).row(rec.victim_pid)
        if sampled is not None and sampled.sample.comm == rec.victim_comm:
            # The peak around the signal: read with the event (or by /proc after the signal), a
            # killed process may already be freeing its memory (exit tears it down); the sample
            # before it is up to a tick old. Before the signal it only grew, after it only shrinks.
            rss, swap = sampled.sample.rss_bytes, sampled.sample.swap_bytes
            lo, hi = rec.ts_ns - AROUND_NS, rec.ts_ns + AROUND_NS // 2
            for p in sampled.history:
                if lo <= p.ts_ns <= hi:
                    rss = max(rss, p.anon_bytes + p.file_bytes + p.shmem_bytes)
                    swap = max(swap, p.swap_bytes)
            row.rss_bytes = rss if row.rss_bytes is None else max(row.rss_bytes, rss)
            row.swap_bytes = swap if row.swap_bytes is None else max(row.swap_bytes, swap)
        cgroups = state.get(CgroupsState)
        row.cgroup = cgroups.memcg_of(rec.victim_pid)
        psi = state.get(HostState).pressure
        if psi is not None:
            row.psi_some, row.psi_full = psi.some_avg10, psi.full_avg10
        unified = cgroups.unified_of(rec.victim_pid) or row.cgroup
        cg = cgroups.rows.get(unified) if unified is not None else None
        if cg is not None and cg.psi_some is not None:
            row.cgroup_psi_some = cg.psi_some * 100
            row.cgroup_psi_full = None if cg.psi_full is None else cg.psi_full * 100

    def pop_notices(self) -> list[Notice]:
        """One notice for each kill not yet announced; the app shows them on any screen but the
        OOM pane's. The text holds traced-system strings: it must be shown without markup."""
        out: list[Notice] = []
        for k in self._unnoticed:
            scope = {"memcg": f"memcg {k.memcg}".rstrip(), "global": "system-wide"}.get(k.scope, k.scope)
            out.append(
                Notice(
                    f"OOM kill ({scope}): {k.victim_comm} [{k.victim_pid}] "
                    f"anon {k.anon_rss_bytes >> 20} MiB, triggered by {k.trigger_comm} [{k.trigger_pid}]",
                    "error",
                    pane="oom",
                    key=f"oom:{k.ts_ns}:{k.victim_pid}",
                )
            )
        self._unnoticed = []
        for r in self._unnoticed_signals:
            what = f"killed by {r.killer}" if r.killer else "killed by"
            rss = "" if r.rss_bytes is None else f", RSS {r.rss_bytes >> 20} MiB"
            sigs = "+".join(SIGNAL_NAMES.get(s[0], str(s[0])) for s in r.signals)
            out.append(
                Notice(
                    f"{r.victim_comm} [{r.victim_pid}] {what} {r.sender_comm} [{r.sender_pid}] ({sigs}){rss}",
                    "warning",
                    pane="oom",
                    key=f"signal:{r.ts_ns}:{r.victim_pid}",
                )
            )
        self._unnoticed_signals = []
        for f in self._unnoticed_forecasts:
            what = f"memcg {f.path}" if f.path else "the machine"
            out.append(
                Notice(
                    f"{what} runs out of memory in about {f.seconds_left:.0f} s at the current growth "
                    f"({f.margin_bytes >> 20} MiB left)",
                    "warning",
                )
            )
        self._unnoticed_forecasts = []
        return out


def _forecast(path: str, used: int, limit: int, rate: float, age_ns: int = 0) -> Forecast:
    """``age_ns``: how old the figures are (the time left counts from now)."""
    left = max(0, limit - used)
    return Forecast(path, used, limit, rate, max(0.0, left / rate - age_ns / 1e9) if rate > 0 else None)


def _threshold(total: int, percent: float, kib: int) -> int:
    """A killer's threshold in bytes: ``percent`` of ``total``, or ``kib`` when given and lower."""
    at = int(total * percent / 100)
    return min(at, kib * 1024) if kib > 0 else at


def _reach(now: int, at: int, fall_per_s: float) -> float | None:
    """Seconds until a figure falling at ``fall_per_s`` reaches ``at`` (0: already; None: not
    falling)."""
    if now <= at:
        return 0.0
    return (now - at) / fall_per_s if fall_per_s > 0 else None
