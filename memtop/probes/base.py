"""The probe contract.

A probe declares the kernel hooks it needs (so ``memtop doctor`` can check them before loading),
loads/attaches in ``load()``, returns records from ``poll()`` (cumulative counters, drained
events) and detaches in ``close()``. Probes are synchronous; the bridge runs them in a worker
thread, one compilation at a time.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from memtop.core.errors import ProbeError
from memtop.linux import bcc_compat, tracefs
from memtop.records import Lost, Record
from memtop.runtime import resources

if TYPE_CHECKING:  # imported where a program is built, after the first frame (its regexes cost)
    from memtop.probes import unit

log = logging.getLogger(__name__)


def enumerated(prefix: str, names: Sequence[str], count: str = "") -> dict[str, int]:
    """C names for an enum Python defines as a sequence: ``{prefix + NAME: index}`` for each
    name (upper-cased, ``-`` and spaces as ``_``), and ``{count: len(names)}`` when asked."""
    out = {prefix + n.upper().replace("-", "_").replace(" ", "_"): i for i, n in enumerate(names)}
    if count:
        out[count] = len(names)
    return out


#: a probe memtop starts with is polled this many times less often while nothing on screen needs
#: what it feeds (``Probe.watched`` False: no pane, header figure or notice shown): its BPF
#: counters keep counting in the kernel and the state divides by the real interval, so totals
#: and rates stay exact; the pane shown again has it polled at once (``Source.watch``)
UNWATCHED_EVERY = 5

#: a probe that skips reading a kernel map while the counters its programs bump with each update
#: held (the vmscan and swap-in probes' per-process maps, and every map but their counters while
#: their generation holds: :class:`Generation`) reads it at least once in this many polls all
#: the same: a program preempted between its count and its update for over a tick
MAPS_BACKSTOP = 16


class Held:
    """A count a program bumps before it updates some maps, watched from poll to poll: the maps
    are as last read once the count held at this poll and the one before (a program's bump and
    its updates come microseconds apart, not a tick). :meth:`held` says so; :meth:`forget` (a
    failed poll) makes the next polls read them."""

    def __init__(self) -> None:
        self._last: object = None
        #: polls in a row the count held
        self._still = 0

    def held(self, count: object, moved: bool = False) -> bool:
        """Whether ``count`` (read this poll) held at this poll and the one before, ``moved``
        (something else said the maps changed) not being so."""
        self._still = self._still + 1 if count == self._last and not moved else 0
        self._last = count
        return self._still >= 2

    def forget(self) -> None:
        self._last = None


class Generation:
    """A poll's shortcut past maps that did not change: the program bumps a per-CPU generation
    slot (bpf/common.h ``memtop_generation``) after every update of the maps its probe reads;
    the poll reads the slot first, and when its sum is the one the last complete read began
    with, it hands back that read's records without reading the maps again.

    Why nothing is missed: a CPU's slot only grows, and this poll reads each CPU's after the
    last read did, so an equal sum means no CPU's slot moved between the two reads. An update
    whose bump the last read saw was made before that bump, so before the maps were read after
    it: that read has it. An update whose bump comes after this poll's read of the slot moves
    the sum at the next poll, which reads the maps again. An update made but not yet bumped (its
    program still running) is like one made just after the read: the next poll has it. A ring
    buffer's events are submitted after their program's bump, so a poll that drains the ring
    before reading the slot never hands back totals older than an event it delivers.

    The bump is an atomic add (a full barrier: the maps' stores are visible before it), and the
    poll's reads are syscalls made in order. The maps are read all the same once in
    :data:`MAPS_BACKSTOP` polls, and after a failed poll (:meth:`forget`): a read that raised
    half-way may have left the records it would hand back half-made."""

    def __init__(self) -> None:
        #: the generation the last complete read began with (None: read at the next poll)
        self._seen: int | None = None
        self._polls = 0
        #: polls handed back without reading the maps (for tests and benches)
        self.skipped = 0

    def quiet(self, gen: int, kept: bool = True) -> bool:
        """Whether the maps are as last read (``gen``: the slot's sum, read first this poll) and
        the last read's records can be handed back (``kept``: the probe has them, made for what
        is asked of it now); a poll that gets False reads them and calls :meth:`read` once it
        has. Called once every poll: it counts them."""
        self._polls += 1
        if kept and self._seen is not None and gen == self._seen and not self.backstop:
            self.skipped += 1
            return True
        return False

    @property
    def backstop(self) -> bool:
        """This poll reads every map whatever the counts say (once in MAPS_BACKSTOP polls)."""
        return self._polls % MAPS_BACKSTOP == 0

    def read(self, gen: int) -> None:
        """The maps were read, completely, after the slot showed ``gen``."""
        self._seen = gen

    def forget(self) -> None:
        """A poll failed: the next one reads the maps."""
        self._seen = None


class Probe(ABC):
    name: ClassVar[str] = ""
    #: tracepoints this probe needs, as "category:event"
    tracepoints: ClassVar[tuple[str, ...]] = ()
    #: tracepoints it uses when present but can do without
    optional_tracepoints: ClassVar[tuple[str, ...]] = ()
    #: True when it needs BPF (False for /proc readers)
    needs_bpf: ClassVar[bool] = True
    #: other kernel features: "perf_events", "uprobes"
    features: ClassVar[tuple[str, ...]] = ()
    #: seconds between polls
    cadence_s: ClassVar[float] = 1.0
    #: seconds between polls while nothing on screen needs what it feeds (``watched`` False), for
    #: a probe whose reads cost more than :data:`UNWATCHED_EVERY` ticks' share; None: the
    #: bridge's default, ``cadence_s`` times :data:`UNWATCHED_EVERY` for a probe memtop starts
    #: with (a probe an intent attached keeps ``cadence_s``: it runs because the user asked)
    unwatched_cadence_s: ClassVar[float | None] = None
    #: polled every ``cadence_s`` whatever is on screen: it drains a ring buffer that a poll
    #: :data:`UNWATCHED_EVERY` times rarer could let overflow (process lifecycle in a churn)
    full_cadence: ClassVar[bool] = False
    #: whether what this probe feeds is on screen (``Source.watch``): a probe with costly reads
    #: that only its own pane shows may space them out while False. True unless a front end says
    #: otherwise (snapshots, recordings, the exporter and tests never do).
    watched: bool = True
    #: the parts of its reads a front end may go without (``Source.use_parts``), by name: a
    #: probe whose files feed both exported figures and figures only its pane shows
    optional_parts: ClassVar[tuple[str, ...]] = ()
    #: the optional parts a front end uses; None (every front end but the exporter): all of them.
    #: A part left out is not read at all: the exporter reads only what it exports
    used_parts: frozenset[str] | None = None

    def reads(self, part: str) -> bool:
        """Whether ``part`` (one of ``optional_parts``) is read: some front end uses it."""
        return self.used_parts is None or part in self.used_parts

    @classmethod
    def at_start(cls, proc_root: str | Path) -> Self:
        """The instance memtop attaches at start (a default probe); ``proc_root`` is where it
        reads /proc, for the probes that read it."""
        return cls()

    def missing_tracepoints(self) -> list[str]:
        return [tp for tp in self.tracepoints if not tracefs.tracepoint_exists(tp)]

    @abstractmethod
    def load(self) -> None:
        """Compile and attach; raise MemtopError (with a hint) when that cannot be done."""

    @abstractmethod
    def poll(self) -> list[Record]:
        """Read maps, drain buffers; return records. Must not block for long."""

    def close(self) -> None:  # noqa: B027 - a probe with nothing attached has nothing to do
        """Detach. Idempotent; called on every exit path."""

    def note(self) -> str:
        """A short word for the status bar once attached (e.g. scope)."""
        return ""

    def poll_failed(self) -> None:  # noqa: B027 - most probes keep nothing a failure could spoil
        """A poll raised (the bridge retries it after a backoff): drop what the failed poll may
        have left half-updated or what may be the cause (a cached listing naming what is gone),
        so the retry reads afresh."""


class BpfProbe(Probe):
    """A probe backed by ``bpf/<program>.bpf.c``. Its program compiles alone (``load``) or, for
    the probes attached at start, with theirs as one unit (:func:`load_together`); either way its
    TRACEPOINT_PROBEs attach with it and detach with it."""

    program: ClassVar[str] = ""
    #: compiled in one unit with the other such probes when they load together (memtop's default
    #: probes, which live as long as the app). On-demand probes compile alone, so their maps go
    #: when they detach. A probe that shares a unit must do its checks in ``section()``.
    shares_unit: ClassVar[bool] = False

    def __init__(self) -> None:
        #: this program's share of its compiled unit (memtop.probes.unit.ProgramView)
        self.bpf: Any = None
        self._lost_seen = 0
        #: arrays are read in one batched lookup (False: slot by slot, after the kernel refused)
        self._batch_reads = True
        #: prepared readers of counter arrays read every poll, by table (None: the generic
        #: readers, for a table that is not one or a kernel that refused)
        self._counter_readers: dict[str, bcc_compat.PerCpuCounters | None] = {}

    def defines(self) -> dict[str, int]:
        """The sizes, enums, slots and flags this probe's program shares with Python, by C name.
        Python is their one definition: each reaches clang as ``-DNAME=value``
        (:meth:`define_flags`), and the C file keeps it only as an ``#ifndef NAME`` default,
        which tests/unit/test_bpf_constants.py holds equal to the default probe's value. Values
        that depend on the target or the kernel (a pid, symbol addresses, tracepoint fields) are
        :meth:`cflags` of their own."""
        return {}

    def define_flags(self) -> list[str]:
        return [f"-D{name}={value}" for name, value in self.defines().items()]

    def cflags(self) -> list[str]:
        """Every flag the program is compiled with: :meth:`define_flags`, then what a probe adds
        for this kernel or target."""
        return self.define_flags()

    def section(self) -> unit.Section:
        """The program as configured for this kernel; ProbeError when this kernel cannot run it."""
        missing = self.missing_tracepoints()
        if missing:
            raise ProbeError(
                f"kernel lacks tracepoint(s) {', '.join(missing)}",
                "this kernel cannot feed this pane; see `memtop doctor`",
            )
        from memtop.probes import unit

        return unit.Section.from_file(self.name, resources.bpf_source(self.program), self.cflags())

    def load(self) -> None:
        self.load_section(self.section())

    def load_section(self, section: unit.Section) -> None:
        """Compile ``section`` alone and attach."""
        from memtop.probes import unit

        with bcc_errors(section.origin):
            compiled = unit.Unit.compile([section])
        self.attach(compiled)

    def attach(self, compiled: unit.Unit) -> None:
        """Take this program's share of ``compiled``: load and attach its functions, then
        ``after_load``. A failure leaves the share to ``close``."""
        self.bpf = compiled.view(self.name)
        self._counter_readers.clear()
        with bcc_errors(f"{self.program}.bpf.c"):
            self.bpf.attach_tracepoints()
        self.after_load()

    def after_load(self) -> None:
        """Open ring buffers, attach perf events and so on."""

    def compiled_with(self) -> list[str]:
        """The other probes whose programs were compiled in the same unit as this one's."""
        return self.bpf.shared_with() if self.bpf is not None else []

    def close(self) -> None:
        self._counter_readers.clear()  # bound to the maps' fds
        if self.bpf is not None:
            self.bpf.release()
            self.bpf = None

    def array_slots(self, table: str, n: int) -> list[int]:
        """Slots 0..n-1 of a (per-CPU) array of u64, each summed over the CPUs: one batched lookup
        (memtop.linux.bcc_compat.percpu_sums) rather than a syscall per slot; slot by slot from then on
        where the kernel cannot batch (before 5.6)."""
        if self._batch_reads:
            try:
                return bcc_compat.percpu_sums(self.bpf, table)[:n]
            except OSError:
                self._batch_reads = False
        t = self.bpf[table]
        if hasattr(t, "sum"):  # per-CPU array
            return [int(t.sum(t.Key(i)).value) for i in range(n)]
        return [int(t[t.Key(i)].value) for i in range(n)]

    def _counter_reader(self, table: str) -> bcc_compat.PerCpuCounters | None:
        if table not in self._counter_readers:
            try:
                self._counter_readers[table] = bcc_compat.PerCpuCounters(self.bpf, table)
            except (TypeError, AttributeError, KeyError, OSError):  # not such an array: generic reads
                self._counter_readers[table] = None
        return self._counter_readers[table]

    def counter_slots(self, table: str, n: int) -> list[int]:
        """:meth:`array_slots` of a small per-CPU counter array a poll reads first, every poll,
        by a prepared call (bcc_compat.PerCpuCounters: a cold poll's cheapest read)."""
        reader = self._counter_reader(table)
        if reader is not None:
            try:
                return reader.slots()[:n]
            except OSError:
                self._counter_readers[table] = None
        return self.array_slots(table, n)

    def counter_slot(self, table: str, i: int) -> int:
        """Slot ``i`` of such an array alone, summed over the CPUs (one lookup of one slot)."""
        reader = self._counter_reader(table)
        if reader is not None:
            try:
                return reader.slot(i)
            except OSError:
                self._counter_readers[table] = None
        return self.array_slots(table, i + 1)[i]

    def array_rows(self, table: str, n: int, fields: tuple[str, ...]) -> list[tuple[int, ...]]:
        """Slots 0..n-1 of a per-CPU array of structs of u64 ``fields``, each field summed over
        the CPUs: one batched lookup (memtop.linux.bcc_compat.percpu_rows), slot by slot where the
        kernel cannot batch."""
        if self._batch_reads:
            try:
                return bcc_compat.percpu_rows(self.bpf, table, len(fields))[:n]
            except OSError:
                self._batch_reads = False
        t = self.bpf[table]
        rows = []
        for i in range(n):
            vals = t.getvalue(t.Key(i))
            rows.append(tuple(sum(int(getattr(v, f)) for v in vals) for f in fields))
        return rows

    def read_array_sum(self, table: str) -> int:
        """Sum of a (per-CPU) array's slot 0, e.g. a lost-event counter."""
        t = self.bpf[table]
        key = t.Key(0)
        if hasattr(t, "sum"):  # per-CPU array
            return int(t.sum(key).value)
        return int(t[key].value)

    def lost_record(self, table: str = "lost", what: str = "events") -> Lost:
        return Lost(probe=self.name, what=what, count=self.read_array_sum(table))


@contextmanager
def bcc_errors(what: str) -> Iterator[None]:
    """BCC's bare Exceptions (and failed attach syscalls) as a ProbeError naming ``what``."""
    try:
        yield
    except Exception as exc:
        if type(exc).__module__.startswith("memtop"):
            raise
        raise ProbeError(
            f"{what} failed to load: {str(exc).strip()[:300]}",
            "run `memtop doctor` to check headers and kernel hooks",
        ) from exc


def load_together(probes: Sequence[BpfProbe]) -> list[tuple[BpfProbe, Exception | None]]:
    """Load ``probes`` with their programs compiled as one unit (memtop.probes.unit); each
    probe's outcome, None when it attached. A probe that cannot say what it needs (a missing
    tracepoint) fails alone; a unit that does not compile is given up and each program compiled
    alone, so only a broken one fails; a function the verifier rejects fails only its probe."""
    from memtop.probes import unit

    out: list[tuple[BpfProbe, Exception | None]] = []
    ready: list[tuple[BpfProbe, unit.Section]] = []
    for p in probes:
        try:
            ready.append((p, p.section()))
        except Exception as exc:  # noqa: BLE001 - reported as this probe's outcome
            out.append((p, exc))
    compiled = None
    if len(ready) > 1:
        try:
            with bcc_errors(" + ".join(s.origin or p.name for p, s in ready) + " as one unit"):
                compiled = unit.Unit.compile([s for _, s in ready])
        except ProbeError as exc:
            log.warning("%s; compiling each program alone", exc.message)
    for p, section in ready:
        try:
            if compiled is None:
                p.load_section(section)
            else:
                p.attach(compiled)
        except Exception as exc:  # noqa: BLE001 - reported as this probe's outcome
            p.close()
            if compiled is not None:
                compiled.release(p.name)  # in case it failed before taking its share
            out.append((p, exc))
        else:
            out.append((p, None))
    return out
