"""Processes and system-wide memory: the foundation panes' state."""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.processes import ProcEvent, ProcSample
from memtop.state.base import SubState, rate

if TYPE_CHECKING:
    from memtop.state import State

SPARK_LEN = 30
HISTORY_LEN = 3600
EXITED_LEN = 200
GONE_GRACE_NS = 120 * 1_000_000_000
#: at most this many gone processes' rows are kept through the grace: under process churn (a
#: build, a shell loop: hundreds of processes a second) the grace alone kept one row (~2.5 KiB
#: with its sparkline deques and history) per process started in the last two minutes, and an
#: exporter left running grew with the churn's rate. The rows in focus are always kept.
MAX_GONE = 1024


I64_MAX = (1 << 63) - 1


@dataclass(slots=True)
class HistoryPoint:
    ts_ns: int
    anon_bytes: int
    file_bytes: int
    shmem_bytes: int
    swap_bytes: int
    minflt_per_s: float
    majflt_per_s: float


class History:
    """A process's RSS split and fault rates over time, kept small: a point is stored only when a
    value changed (an idle process costs nothing per tick), packed as 64-bit integers (rates in
    thousandths), at most ``cap`` points. Iterating gives the same step series as storing every
    tick: before a change the unchanged values are repeated at the last tick they held, and the
    last values run to the newest tick."""

    FIELDS = 7
    __slots__ = ("cap", "_data", "_last", "_held_ts")

    def __init__(self, cap: int = HISTORY_LEN) -> None:
        self.cap = cap
        self._data = array("q")
        self._last: tuple[int, ...] | None = None
        self._held_ts = 0  # newest tick whose values equal the last stored point's (0: none)

    def _store(self, ts: int, values: tuple[int, ...]) -> None:
        try:
            self._data.append(ts)
            self._data.extend(values)
        except OverflowError:  # beyond int64 (a recording may hold any uint64): kept at the top
            del self._data[len(self._data) - len(self._data) % self.FIELDS :]
            self._data.extend(max(-I64_MAX - 1, min(v, I64_MAX)) for v in (ts, *values))
        n = self.FIELDS
        extra = len(self._data) // n - self.cap
        if extra >= max(1, self.cap // 8):  # drop old points in chunks (amortised O(1))
            del self._data[: extra * n]

    def append(self, p: HistoryPoint) -> None:
        values = (
            p.anon_bytes,
            p.file_bytes,
            p.shmem_bytes,
            p.swap_bytes,
            round(p.minflt_per_s * 1000),
            round(p.majflt_per_s * 1000),
        )
        if values == self._last:
            self._held_ts = p.ts_ns
            return
        if self._held_ts and self._last is not None:
            self._store(self._held_ts, self._last)
        self._held_ts = 0
        self._store(p.ts_ns, values)
        self._last = values

    def hold(self, ts_ns: int) -> None:
        """The values did not change at ``ts_ns`` (same as appending the last point's values)."""
        if self._last is not None:
            self._held_ts = ts_ns

    def _points(self) -> Iterator[tuple[int, ...]]:
        d, n = self._data, self.FIELDS
        start = max(0, len(d) // n - self.cap)
        for i in range(start * n, len(d), n):
            yield tuple(d[i : i + n])
        if self._held_ts and self._last is not None:
            yield (self._held_ts, *self._last)

    def __iter__(self) -> Iterator[HistoryPoint]:
        for ts, a, f, sh, sw, mn, mj in self._points():
            yield HistoryPoint(ts, a, f, sh, sw, mn / 1000, mj / 1000)

    def __len__(self) -> int:
        return min(self.cap, len(self._data) // self.FIELDS) + (1 if self._held_ts else 0)

    def __bool__(self) -> bool:
        return bool(self._data)

    def first_ts_ns(self) -> int:
        for p in self._points():
            return p[0]
        return 0

    def nbytes(self) -> int:
        return self._data.buffer_info()[1] * self._data.itemsize


class IntRing:
    """The last ``cap`` integers appended, oldest first, in a fixed ring of 64-bit integers: a
    process's sparkline window. A ``deque(maxlen=30)`` of ints cost ~2.2 KiB a process (the
    deque's block and an int object per value); this is ~0.3 KiB, which with 1,000 processes is
    ~4 MiB of memtop's RssAnon (bench/self_memory.py, docs/performance.md). Values beyond int64
    (a recording may hold any uint64) are kept at its bounds, as History keeps them."""

    __slots__ = ("cap", "_data", "_start")

    def __init__(self, cap: int = SPARK_LEN) -> None:
        self.cap = cap
        self._data = array("q")
        self._start = 0  # where the oldest value is once the ring is full

    def append(self, value: int) -> None:
        d = self._data
        if not -I64_MAX - 1 <= value <= I64_MAX:
            value = max(-I64_MAX - 1, min(value, I64_MAX))
        if len(d) < self.cap:
            d.append(value)
        else:
            d[self._start] = value
            self._start = (self._start + 1) % self.cap

    def __len__(self) -> int:
        return len(self._data)

    def __bool__(self) -> bool:
        return bool(self._data)

    def __getitem__(self, i: int) -> int:
        n = len(self._data)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("ring index out of range")
        return self._data[(self._start + i) % n]

    def __iter__(self) -> Iterator[int]:
        d, start = self._data, self._start
        yield from d[start:]
        yield from d[:start]


@dataclass(slots=True)
class ProcRow:
    sample: ProcSample
    ts_ns: int
    minflt_per_s: float = 0.0
    majflt_per_s: float = 0.0
    spark: IntRing = field(default_factory=IntRing)
    #: the times of the state's last SPARK_LEN ticks with samples, shared by every row: a row
    #: gets a spark value at each of them while it lives, so its values were read at the last
    #: ``len(spark)`` of these (``spark_ts``). A ring of its own was ~0.3 KiB a process, ~0.3 MiB
    #: of memtop's RssAnon with 1,000 processes
    ticks: IntRing = field(default_factory=IntRing)
    #: how many of the newest spark values are equal (a sparkline of them need not be redrawn)
    spark_same: int = 0
    history: History = field(default_factory=History)
    exited_ns: int = 0  # when it was seen gone (0 = alive)
    first_ts_ns: int = 0
    first_minor_faults: int = 0
    first_major_faults: int = 0

    @property
    def spark_ts(self) -> list[int]:
        """When each spark value was read, oldest first (the RSS growth is over their window)."""
        n = len(self.spark)
        return list(self.ticks)[len(self.ticks) - n :] if n else []


@dataclass(slots=True)
class ExitedRow:
    pid: int
    comm: str
    exited_ns: int
    lifetime_ns: int
    last: ProcSample | None


class ProcessesState(SubState):
    key = "processes"
    takes = (
        ProcSample,
        ProcEvent,
    )

    def __init__(self) -> None:
        self.rows: dict[int, ProcRow] = {}
        self.gone: dict[int, ProcRow] = {}
        self.exited: deque[ExitedRow] = deque(maxlen=EXITED_LEN)
        #: processes that exited between two polls (never read from /proc: a shell's
        #: millisecond children), kept apart so they do not push the others out of ``exited``
        self.exited_between: deque[ExitedRow] = deque(maxlen=EXITED_LEN)
        self.exited_between_total = 0
        self._exit_seen: dict[int, ExitedRow] = {}
        self.samples_ts_ns = 0
        #: the times of the last SPARK_LEN ticks with samples (every row's ProcRow.ticks)
        self.ticks = IntRing()
        #: how long a gone process's row (history, for an open drill-in) is kept
        self.grace_ns = GONE_GRACE_NS

    def row(self, pid: int) -> ProcRow | None:
        return self.rows.get(pid) or self.gone.get(pid)

    def apply(self, batch: Batch, state: State) -> None:
        if not state.panes:
            self._apply_unshown(batch)
            return
        samples = [r for r in batch.records if isinstance(r, ProcSample)]
        for rec in batch.records:
            if isinstance(rec, ProcEvent) and rec.event == "exit":
                self._on_exit(rec)
            elif isinstance(rec, ProcEvent) and rec.event == "exec":
                self._on_exec(rec)
        if not samples:
            return
        ts = batch.ts_ns
        self.samples_ts_ns = ts
        ticks = self.ticks
        ticks.append(ts)
        seen: set[int] = set()
        for s in samples:
            seen.add(s.pid)
            row = self.rows.get(s.pid)
            if row is not None and s is row.sample and not row.minflt_per_s and not row.majflt_per_s:
                # the poller handed back the very sample of last tick (nothing moved) and the
                # rates already read zero: the same as the full path below, without the work
                row.ts_ns = ts
                _spark(row, s.rss_bytes)
                row.history.hold(ts)
                continue
            if row is None or (row.sample.start_time_ns and s.start_time_ns != row.sample.start_time_ns):
                row = ProcRow(
                    sample=s,
                    ts_ns=ts,
                    ticks=ticks,
                    first_ts_ns=ts,
                    first_minor_faults=s.minor_faults,
                    first_major_faults=s.major_faults,
                )
                self.rows[s.pid] = row
            else:
                dt = ts - row.ts_ns
                row.minflt_per_s = rate(s.minor_faults, row.sample.minor_faults, dt)
                row.majflt_per_s = rate(s.major_faults, row.sample.major_faults, dt)
                row.sample, row.ts_ns = s, ts
            _spark(row, s.rss_bytes)
            row.history.append(
                HistoryPoint(
                    ts,
                    s.rss_anon_bytes,
                    s.rss_file_bytes,
                    s.rss_shmem_bytes,
                    s.swap_bytes,
                    row.minflt_per_s,
                    row.majflt_per_s,
                )
            )
        for pid in [p for p in self.rows if p not in seen]:
            row = self.rows.pop(pid)
            row.exited_ns = ts
            # what only the table drew (its sparkline, GROW/s): a gone row keeps what a drill-in
            # into it shows (its sample and history), for the grace
            row.spark, row.spark_same = IntRing(0), 0
            self.gone[pid] = row
            ev = self._exit_seen.pop(pid, None)
            if ev is not None:
                ev.last = row.sample
            else:
                self.exited.appendleft(ExitedRow(pid, row.sample.comm, ts, _lifetime(row, ts), row.sample))
        for pid in [p for p, r in self.gone.items() if ts - r.exited_ns > self.grace_ns]:
            del self.gone[pid]
        if len(self.gone) > MAX_GONE:
            self._trim_gone(state)
        self._exit_seen = {p: e for p, e in self._exit_seen.items() if ts - e.exited_ns < self.grace_ns}

    def _on_exec(self, rec: ProcEvent) -> None:
        """A process that exec'd shows its new name at once (its sample otherwise keeps the old
        comm until the next /proc read)."""
        row = self.rows.get(rec.pid)
        if row is not None:
            row.sample = _with_comm(row.sample, rec.comm)

    def _apply_unshown(self, batch: Batch) -> None:
        """For a front end that shows no pane (the exporter: ``State.panes`` False): each live
        process's row with its sample and fault rates, exactly as :meth:`apply` keeps them, and
        nothing only a pane shows: no sparkline or history (two ring updates a process a tick),
        no gone rows and no exited lists (an exit event, hundreds a tick under other users'
        process churn, costs nothing here unless its process had a row: it leaves at the next
        poll)."""
        samples: list[ProcSample] = []
        rows = self.rows
        for rec in batch.records:
            if isinstance(rec, ProcSample):
                samples.append(rec)
            elif isinstance(rec, ProcEvent) and rec.event == "exec":
                self._on_exec(rec)
        if not samples:
            return
        ts = batch.ts_ns
        self.samples_ts_ns = ts
        for s in samples:
            row = rows.get(s.pid)
            if row is not None and s is row.sample and not row.minflt_per_s and not row.majflt_per_s:
                row.ts_ns = ts  # nothing moved (see apply)
            elif row is None or (row.sample.start_time_ns and s.start_time_ns != row.sample.start_time_ns):
                rows[s.pid] = ProcRow(
                    sample=s,
                    ts_ns=ts,
                    spark=IntRing(0),
                    ticks=self.ticks,
                    history=History(0),
                    first_ts_ns=ts,
                    first_minor_faults=s.minor_faults,
                    first_major_faults=s.major_faults,
                )
            else:
                dt = ts - row.ts_ns
                row.minflt_per_s = rate(s.minor_faults, row.sample.minor_faults, dt)
                row.majflt_per_s = rate(s.major_faults, row.sample.major_faults, dt)
                row.sample, row.ts_ns = s, ts
        if len(rows) != len(samples):
            seen = {s.pid for s in samples}
            for pid in [p for p in rows if p not in seen]:
                del rows[pid]

    def _trim_gone(self, state: State) -> None:
        """Drop the oldest gone rows over MAX_GONE (the dict is in the order they went), but
        never one a drill-in looks at."""
        focus = getattr(state.subs.get("process"), "focused", ())
        excess = len(self.gone) - MAX_GONE
        for pid in [p for p in self.gone if p not in focus][:excess]:
            del self.gone[pid]

    def _on_exit(self, ev: ProcEvent) -> None:
        row = self.rows.get(ev.pid)
        gone = self.gone.get(ev.pid)
        if row is None and gone is not None:
            # a poll saw it gone first and listed it: the event only knows its lifetime better
            for e in self.exited:
                if e.pid == ev.pid and e.exited_ns == gone.exited_ns:
                    e.lifetime_ns = ev.lifetime_ns or e.lifetime_ns
                    return
        lifetime = ev.lifetime_ns
        if not lifetime and row is not None:  # started before memtop: its start time from /proc
            lifetime = _lifetime(row, ev.ts_ns)
        entry = ExitedRow(ev.pid, ev.comm, ev.ts_ns, lifetime, row.sample if row else None)
        if row is None:  # born and gone between two polls
            self.exited_between.appendleft(entry)
            self.exited_between_total += 1
            return
        self.exited.appendleft(entry)
        self._exit_seen[ev.pid] = entry


def _spark(row: ProcRow, value: int) -> None:
    sp = row.spark
    row.spark_same = row.spark_same + 1 if sp and sp[-1] == value else 1
    sp.append(value)


def rss_growth_per_s(row: ProcRow) -> float:
    """How fast RSS grew (negative: shrank), bytes per second, over the sparkline's window (the
    last SPARK_LEN samples): atop's RGROW as a rate; 0 before two samples."""
    n, ticks = len(row.spark), row.ticks
    if n < 2 or len(ticks) < n:
        return 0.0
    dt_ns = ticks[-1] - ticks[len(ticks) - n]
    return (row.spark[-1] - row.spark[0]) * 1e9 / dt_ns if dt_ns > 0 else 0.0


def _lifetime(row: ProcRow, ts: int) -> int:
    return max(0, ts - row.sample.start_time_ns) if row.sample.start_time_ns else 0


def _with_comm(s: ProcSample, comm: str) -> ProcSample:
    from dataclasses import replace

    return replace(s, comm=comm)
