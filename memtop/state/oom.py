"""OOM kills: a bounded log that outlives the victims, and notices the app shows on any screen."""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.oom import OomKill, SignalKill
from memtop.state.base import Severity, SubState

if TYPE_CHECKING:
    from memtop.state import State

LOG_LEN = 1000
#: a SIGKILL this soon after a SIGTERM to the same process is the same kill (the SIGTERM ignored)
MERGE_NS = 60_000_000_000
#: processes whose recent signals are remembered (a SIGTERM waiting for its SIGKILL)
RECENT = 4096
SIGKILL, SIGTERM = 9, 15
SIGNAL_NAMES = {SIGKILL: "SIGKILL", SIGTERM: "SIGTERM"}


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

    def apply(self, batch: Batch, state: State) -> None:
        for rec in batch.records:
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
        del self._unnoticed[:-20]  # a storm of kills: the latest 20 notices are enough
        del self._unnoticed_signals[:-20]

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

    def _at_kill(self, row: SignalKillRow, rec: SignalKill, state: State) -> None:
        """The victim's memory (read with the event, else memtop's last /proc sample of it), its
        cgroup, and PSI then."""
        from memtop.state.cgroups import CgroupsState
        from memtop.state.host import HostState
        from memtop.state.processes import ProcessesState

        row.rss_bytes, row.swap_bytes = rec.rss_bytes, rec.swap_bytes
        sampled = state.get(ProcessesState).row(rec.victim_pid)
        if sampled is not None and sampled.sample.comm == rec.victim_comm:
            if row.rss_bytes is None:
                row.rss_bytes = sampled.sample.rss_bytes
            if row.swap_bytes is None:
                row.swap_bytes = sampled.sample.swap_bytes
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

    def pop_notices(self) -> list[tuple[str, Severity]]:
        """(plain text, severity) for each kill not yet announced; the app shows them on any
        screen. The text holds traced-system strings: it must be shown without markup."""
        out: list[tuple[str, Severity]] = []
        for k in self._unnoticed:
            scope = {"memcg": f"memcg {k.memcg}".rstrip(), "global": "system-wide"}.get(k.scope, k.scope)
            out.append(
                (
                    f"OOM kill ({scope}): {k.victim_comm} [{k.victim_pid}] "
                    f"anon {k.anon_rss_bytes >> 20} MiB, triggered by {k.trigger_comm} [{k.trigger_pid}]",
                    "error",
                )
            )
        self._unnoticed = []
        for r in self._unnoticed_signals:
            what = f"killed by {r.killer}" if r.killer else "killed by"
            rss = "" if r.rss_bytes is None else f", RSS {r.rss_bytes >> 20} MiB"
            sigs = "+".join(SIGNAL_NAMES.get(s[0], str(s[0])) for s in r.signals)
            out.append(
                (
                    f"{r.victim_comm} [{r.victim_pid}] {what} {r.sender_comm} [{r.sender_pid}] ({sigs}){rss}",
                    "warning",
                )
            )
        self._unnoticed_signals = []
        return out
