"""The bridge: probes in, record batches out.

Probes compile and attach in the background, one compilation at a time (libbcc is not
thread-safe), while the UI is already on screen; the probes queued together that can share a
compilation (the default ones) compile as one unit (memtop/probes/unit.py) and still attach, fail
and detach one by one. ``poll()`` runs every due probe's ``poll`` in a worker thread, stamps
the batch with CLOCK_MONOTONIC (the clock of ``bpf_ktime_get_ns``) and hands it to subscribers
(the state, the recorder). A poll still running when the next one is asked for absorbs it rather
than queueing behind it.

A poll that raises is an event, not a death: the probe stays attached, its status turns
``erroring`` (why, in plain words, and how many polls in a row failed), it is retried after a
backoff that doubles from :data:`BACKOFF_FIRST_S` to :data:`BACKOFF_MAX_S` (the other probes keep
their cadence), and the first poll that succeeds makes it ``attached`` again. Only a load that
cannot work (a missing hook, no permission) is ``failed`` for good.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from memtop.core.errors import MemtopError
from memtop.core.text import clean
from memtop.linux import bcc_compat
from memtop.probes.base import UNWATCHED_EVERY, BpfProbe, Probe, load_together
from memtop.probes.host import collect_host_facts
from memtop.records import Batch, ProbeStatus, Record
from memtop.records.host import HostFacts
from memtop.records.leaks import LeakPreflight
from memtop.records.process import Focus
from memtop.runtime.heap import release_heap, tune_heap
from memtop.stream.source import ReplayControls, Source, Subscriber

if TYPE_CHECKING:
    from memtop.probes.leakrate import LeakRateProbe
    from memtop.probes.procfs import ProcfsProbe

__all__ = ["Bridge", "Source", "Subscriber", "now_ns"]

#: what the drill-in's focus attaches: one process's mappings (no compilation), then its fault
#: stacks and heap growth (BPF, per-pid perf events and tracepoints)
FOCUS_PROBES = ("smaps", "faultstack", "growth")
FOCUS_BPF = ("faultstack", "growth")
#: the allocation tracer the leaks pane shows, and its preflight (the calls counted first)
LEAKS_PROBE = "leaks"
PREFLIGHT_PROBE = "leakrate"
#: the preflight's count on a budget (`--budget`), seconds: its traps are paid from the budget
BUDGET_PREFLIGHT_S = 0.1
#: the working-set probe (the drill-in's w): one measurement at a time
WSS_PROBE = "wss"
NO_BPF = "needs BPF (memtop runs with --no-bpf)"
NO_BPF_HINT = "run memtop without --no-bpf"

log = logging.getLogger(__name__)

T = TypeVar("T")

#: how long stopping waits for a compilation under way, then for a poll, before detaching anyway
#: (what is left is detached by the kernel when the process exits, at the latest at the app's
#: exit deadline)
STOP_WAIT_LOADER_S = 0.6
STOP_WAIT_POLL_S = 0.6

#: a failing poll is retried after BACKOFF_FIRST_S, then twice as long each time it fails again, at
#: most BACKOFF_MAX_S: a cause that goes away (a hostile cgroup removed) is noticed within a minute,
#: while one that stays costs one attempt (and one status record) a minute
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 60.0


def backoff_s(failures: int) -> float:
    """How long to wait before the next attempt after ``failures`` polls in a row failed."""
    return min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2.0 ** min(max(failures - 1, 0), 32))


def poll_reason(exc: BaseException) -> str:
    """Why a poll failed, in plain words, one printable line: the exception's text may carry what
    the probe was reading (a cgroup name, a path), which is untrusted."""
    if isinstance(exc, UnicodeError):
        what = "a name or file that is not valid UTF-8"
    elif isinstance(exc, RecursionError):
        what = "input nested too deeply to parse"
    elif isinstance(exc, MemoryError):
        what = "out of memory"
    elif isinstance(exc, PermissionError):
        what = "permission denied"
    elif isinstance(exc, OSError) and exc.strerror:
        what = exc.strerror[0].lower() + exc.strerror[1:]
    else:
        what = "unexpected error"
    detail = f"{type(exc).__name__}: {exc}"
    # lone surrogates (a surrogate-escaped name) cannot be written anywhere: make them visible
    detail = detail.encode("utf-8", "backslashreplace").decode("utf-8")
    return clean(f"{what} ({detail})", 300)


def now_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


#: seconds between heap trims while running (a trim of a small heap is cheap; once a minute keeps
#: freed memory from piling up between them)
TRIM_EVERY_S = 60.0


async def in_daemon_thread(fn: Callable[[], T], name: str) -> T:
    """``fn()`` in a new daemon thread, awaited. asyncio.to_thread's executor threads are joined
    at interpreter exit, so one stuck in a compilation or a read kept an exited memtop alive
    (issue 19, item 5); a daemon thread never does."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()
    threading.Thread(target=_run_into, args=(loop, fut, fn), name=name, daemon=True).start()
    return await fut


#: seconds a worker thread waits for its next job before it ends (started again by the next):
#: longer than the slowest tick (10 s), so a running app keeps one thread
WORKER_IDLE_S = 30.0


class Due:
    """When a job given to :class:`DaemonWorker` is to run (``time.monotonic()`` seconds), and
    whether it has begun or is not to run at all (under the worker's lock)."""

    __slots__ = ("at", "begun", "dropped")

    def __init__(self, at: float) -> None:
        self.at = at
        self.begun = False
        self.dropped = False


class DaemonWorker:
    """One long-lived daemon thread that runs the functions given to it one at a time, each
    awaited: the polls. A thread per poll (:func:`in_daemon_thread`) cost a thread's creation,
    start-up handshake and exit every tick. The thread ends after :data:`WORKER_IDLE_S` without
    a job, or when :meth:`stop` is called (a new job starts it again), so a source left unclosed
    leaves no thread behind for long; daemon, it never keeps an exiting memtop alive.

    A job may wait for its time in the thread (``due``): the event loop that awaits it then
    sleeps until the job's result comes, one wake-up for a timed poll where a timer firing in
    the loop, then the result, were two."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[
            tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[[], Any], Due | None] | None
        ] = queue.SimpleQueue()
        self._lock = threading.Lock()
        #: wakes a job waiting for its time (told to run now, or dropped)
        self._due_changed = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        #: threads started (for tests: one per run of jobs, not one per job)
        self.started = 0

    async def run(self, fn: Callable[[], T], due: Due | None = None) -> T | None:
        """``fn()`` in the thread, once ``due.at`` has come (at once without ``due``); None
        when the job was dropped (:meth:`drop`) before it began."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T | None] = loop.create_future()
        with self._lock:
            self._jobs.put((loop, fut, fn, due))
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self.started += 1
                self._thread.start()
        return await fut

    def retime(self, due: Due, at: float) -> bool:
        """Run the job of ``due`` at ``at`` instead (0: now): False when it has begun already
        (or was dropped)."""
        with self._lock:
            if due.begun or due.dropped:
                return False
            due.at = at
            self._due_changed.notify_all()
            return True

    def drop(self, due: Due) -> None:
        """The job of ``due``, if it has not begun, is not run: its awaiter gets None."""
        with self._lock:
            if not due.begun:
                due.dropped = True
                self._due_changed.notify_all()

    def stop(self) -> None:
        """End the thread once the job it runs (if any) is done."""
        with self._lock:
            if self._thread is not None:
                self._jobs.put(None)

    def _wait_for(self, due: Due) -> bool:
        """Wait until ``due``'s time (which may change meanwhile) or until it is dropped;
        whether to run it."""
        with self._lock:
            while not due.dropped:
                left = due.at - time.monotonic()
                if left <= 0:
                    break
                self._due_changed.wait(left)
            due.begun = not due.dropped
            return due.begun

    def _serve(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=WORKER_IDLE_S)
            except queue.Empty:
                job = None
            if job is None:
                with self._lock:  # a job put meanwhile is served: this thread goes on
                    if self._jobs.empty():
                        self._thread = None
                        return
                continue
            loop, fut, fn, due = job
            if due is not None and not self._wait_for(due):
                _run_into(loop, fut, lambda: None)
                continue
            _run_into(loop, fut, fn)


def _run_into(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Any], fn: Callable[[], Any]) -> None:
    """``fn()`` here (a worker thread), its result or exception handed to ``fut`` on ``loop``."""
    ok = False
    value: Any = None
    try:
        value, ok = fn(), True
    except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
        value = exc
    try:
        loop.call_soon_threadsafe(_settle, fut, ok, value)
    except RuntimeError:  # the loop is closed: nobody awaits this any more
        pass


def _settle(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if not fut.done():
        fut.set_result(value) if ok else fut.set_exception(value)


def _load(probe: Probe) -> Exception | None:
    try:
        probe.load()
    except Exception as exc:  # noqa: BLE001 - one probe failing is its pane's message
        return exc
    return None


class Bridge:
    """Live source: owns the probes."""

    def __init__(
        self,
        probes: Sequence[Probe],
        *,
        require_bpf: bool = False,
        defer_bpf: bool = False,
        allow_bpf: bool | None = None,
    ) -> None:
        """``defer_bpf``: queued BPF probes wait for :meth:`begin_bpf` (the app calls it once its
        first frame is on screen, so compiling does not compete with drawing it). ``allow_bpf``:
        whether intents may attach BPF probes (default: unless every probe given is a /proc
        reader, i.e. `--no-bpf`)."""
        self.probes: list[Probe] = list(probes)
        #: byte sampling for the leaks probe as `--sample-bytes` said (0: exact; None: not said,
        #: so a non-interactive trace takes the preflight's proposal)
        self.leaks_sample_bytes: int | None = None
        #: `--budget`: trace in windows within this share of a core (0: all the time)
        self.leaks_budget = 0.0
        #: the last leaks preflight's record, and whether its decision is taken without asking
        self._preflight: LeakPreflight | None = None
        self._preflight_auto = False
        self._preflight_probe: LeakRateProbe | None = None
        self.allow_bpf = (
            allow_bpf if allow_bpf is not None else (not self.probes or any(p.needs_bpf for p in self.probes))
        )
        #: pid in focus -> the probes its focus attached
        self._focus: dict[int, list[str]] = {}
        self._last_ts = 0
        self.require_bpf = require_bpf
        self._deferred = defer_bpf
        self._subs: list[Subscriber] = []
        self._status: dict[str, ProbeStatus] = {}
        self._attached: list[Probe] = []
        self._last_poll: dict[str, float] = {}
        #: per probe whose polls fail: (failures in a row, CLOCK_MONOTONIC ns of the first)
        self._failing: dict[str, tuple[int, int]] = {}
        #: per failing probe: time.monotonic() before which it is not polled again (the backoff)
        self._retry_at: dict[str, float] = {}
        #: per probe: CLOCK_MONOTONIC ns of its last successful poll
        self._last_ok_ns: dict[str, int] = {}
        #: the clock of cadences and backoffs (a test steps it instead of sleeping)
        self.clock: Callable[[], float] = time.monotonic
        #: the probes that feed what is on screen (None: all; see watch)
        self._watched: frozenset[str] | None = None
        #: the probes memtop started with: polled less often while not watched (those an intent
        #: attached keep their cadence: the user asked for them)
        self._slowable = frozenset(p.name for p in self.probes)
        #: probes watched again after a slower cadence, polled at the next poll whatever their due
        #: time (under _lock: watch runs in the event loop, the poll in its thread)
        self._catch_up: set[str] = set()
        #: probe name -> the optional parts of it a front end uses (None: all; see use_parts)
        self._used_parts: dict[str, frozenset[str]] | None = None
        self._pending_status: list[Record] = []
        self._lock = threading.Lock()
        # held while probes are polled, so a probe is never closed under a poll in the worker thread
        self._poll_lock = threading.Lock()
        self._queue: list[Probe] = []
        #: taken from the queue and compiling or attaching: neither queued nor attached, yet it
        #: runs once loaded unless removed (an intent to stop it must find it here)
        self._loading: list[Probe] = []
        self._loader: asyncio.Task[None] | None = None
        self._polling = False
        #: the poll in flight (shielded from its awaiter's cancellation; see poll)
        self._poll_task: asyncio.Task[Batch | None] | None = None
        #: when the poll in flight is to run, while it is a timed one (see poll)
        self._poll_due: Due | None = None
        #: the thread the polls run in, kept from poll to poll
        self._poller = DaemonWorker("memtop-poll")
        self._stopped = False
        self.bpf_error: MemtopError | None = None
        #: the host facts last emitted (a recorder opened later puts them in its prelude)
        self.host_facts: HostFacts | None = None
        self._next_trim = 0.0
        tune_heap()
        for p in self.probes:
            self._set_status(ProbeStatus(p.name, "pending", "waiting to attach"))

    # -- state --------------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        with self._lock:
            return "bpf" if any(p.needs_bpf for p in self._attached) else "procfs"

    def statuses(self) -> dict[str, ProbeStatus]:
        with self._lock:
            return dict(self._status)

    @property
    def replay(self) -> ReplayControls | None:
        return None

    def settled(self) -> bool:
        with self._lock:
            return (
                not self._queue
                and not self._loading
                and all(
                    s.state in ("attached", "erroring", "failed", "detached") for s in self._status.values()
                )
            )

    def _set_status(self, status: ProbeStatus) -> None:
        with self._lock:
            self._status[status.probe] = status
            self._pending_status.append(status)

    def _note_host(self) -> None:
        """Emit the host facts with the next batch if they changed (the header tree is known
        after the first compilation, BPF may turn out unavailable)."""
        facts = collect_host_facts(self.bpf_error)
        with self._lock:
            if facts != self.host_facts:
                self.host_facts = facts
                self._pending_status.append(facts)

    def subscribe(self, fn: Subscriber) -> None:
        self._subs.append(fn)

    # -- loading ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Queue every probe for loading and return at once; loading goes on in the background."""
        # /proc readers load at once (no compilation), so the very first poll has data to draw;
        # BPF programs follow in the background, one at a time
        for probe in [p for p in self.probes if not p.needs_bpf]:
            self._load_one(probe)
        self._note_host()
        # the TUI's first frame waits for this poll: probes it does not draw from are read at
        # the next tick (the sharedinfo and pagecacheinfo scans of every process were over half
        # of it with ~200 processes, the cgroups probe most of the rest with 500 memcgs,
        # docs/performance.md)
        self.publish(self.poll_sync(force=True, seen_only=True))
        with self._lock:
            self._queue.extend(p for p in self.probes if p.needs_bpf)
        self._kick()

    def add_probe(self, probe: Probe) -> bool:
        """Attach another probe at run time (drill-in, leaks). False if one by that name runs."""
        with self._lock:
            if self._running(probe.name):
                return False
            self.probes.append(probe)
            self._queue.append(probe)
        self._set_status(ProbeStatus(probe.name, "pending", "waiting to attach"))
        self._kick()
        return True

    def _running(self, name: str) -> bool:
        """A probe by that name is attached, queued or loading (call with the lock held). One
        removed while it loads is closed once loaded (_loaded): it no longer counts."""
        loading = [p for p in self._loading if p in self.probes]
        return any(p.name == name for p in self._attached + self._queue + loading)

    def remove_probe(self, name: str) -> None:
        with self._lock:
            victims = [p for p in self._attached if p.name == name]
            self._attached = [p for p in self._attached if p.name != name]
            self._queue = [p for p in self._queue if p.name != name]
            self.probes = [p for p in self.probes if p.name != name]
        with self._poll_lock:
            for p in victims:
                p.close()
            self._forget_failures(name)
        self._set_status(ProbeStatus(name, "detached", "detached"))

    def probe(self, name: str) -> Probe | None:
        with self._lock:
            for p in self._attached:
                if p.name == name:
                    return p
        return None

    def begin_bpf(self) -> None:
        """Start loading the queued probes, if ``defer_bpf`` held them."""
        self._deferred = False
        self._kick()

    def _kick(self) -> None:
        if self._deferred:
            return
        if self._loader is None or self._loader.done():
            self._loader = asyncio.get_running_loop().create_task(self._load_all())

    async def _load_all(self) -> None:
        while not self._stopped:
            with self._lock:
                if not self._queue:
                    break
                group = [self._queue.pop(0)]
                if isinstance(group[0], BpfProbe) and group[0].shares_unit:
                    # every queued probe that can share its compilation goes with it
                    group += [p for p in self._queue if isinstance(p, BpfProbe) and p.shares_unit]
                    self._queue = [p for p in self._queue if p not in group]
            await in_daemon_thread(functools.partial(self._load_group, group), "memtop-load")
        release_heap()

    def _load_one(self, probe: Probe) -> None:
        self._load_group([probe])

    def _load_group(self, group: list[Probe]) -> None:
        with self._lock:
            self._loading += group
        try:
            self._load_group_now(group)
        finally:
            with self._lock:
                self._loading = [p for p in self._loading if p not in group]

    def _load_group_now(self, group: list[Probe]) -> None:
        probes = [p for p in group if self._may_load(p)]
        for p in group:
            if p.name == PREFLIGHT_PROBE and p not in probes:  # no BPF: its record says why
                self._preflight_done(p, self.bpf_error)
        for p in probes:
            self._set_status(ProbeStatus(p.name, "attaching", "attaching…"))
        t0 = time.monotonic()
        bpf_probes = [p for p in probes if isinstance(p, BpfProbe)]
        if len(bpf_probes) > 1 and len(bpf_probes) == len(probes):
            outcomes: list[tuple[Probe, Exception | None]] = list(load_together(bpf_probes))
        else:
            outcomes = [(p, _load(p)) for p in probes]
        took = time.monotonic() - t0
        for p, exc in outcomes:
            self._loaded(p, exc, took)
        self._note_host()

    def _may_load(self, probe: Probe) -> bool:
        if probe.needs_bpf:
            if self.bpf_error is None:
                try:
                    bcc_compat.check_can_load()
                except MemtopError as exc:
                    self.bpf_error = exc
            if self.bpf_error is not None:
                self._set_status(
                    ProbeStatus(probe.name, "failed", self.bpf_error.message, self.bpf_error.hint)
                )
                return False
        return True

    def _loaded(self, probe: Probe, exc: Exception | None, took: float) -> None:
        if probe.name == PREFLIGHT_PROBE:
            self._preflight_done(probe, exc)
            return
        if exc is not None:
            probe.close()
            if isinstance(exc, MemtopError):
                self._set_status(ProbeStatus(probe.name, "failed", exc.message, exc.hint))
            else:
                log.error("probe %s failed to load", probe.name, exc_info=exc)
                self._set_status(ProbeStatus(probe.name, "failed", f"{type(exc).__name__}: {exc}", ""))
            return
        if self._stopped:
            probe.close()
            return
        with self._lock:
            if probe not in self.probes:  # removed while it loaded
                removed = True
            else:
                removed = False
                self._attached.append(probe)
        if removed:
            probe.close()
            return
        note = probe.note()
        shared = probe.compiled_with() if isinstance(probe, BpfProbe) else []
        together = f" (compiled with {', '.join(shared)})" if shared else ""
        self._set_status(
            ProbeStatus(
                probe.name, "attached", f"attached in {took:.2f}s{together}" + (f"; {note}" if note else "")
            )
        )

    # -- intents ------------------------------------------------------------------------------
    def _procfs(self) -> ProcfsProbe | None:
        from memtop.probes.procfs import ProcfsProbe

        with self._lock:
            return next((p for p in self.probes if isinstance(p, ProcfsProbe)), None)

    def _publish_now(self, *records: Record) -> None:
        """Hand ``records`` to the subscribers at once, in a batch of their own. It carries the
        time of the last batch handed out, so batches stay in time order however a poll running
        in a worker thread (stamped when it ends) interleaves with it."""
        self.publish(Batch(ts_ns=self._last_ts or now_ns(), records=records))

    def focus(self, pid: int) -> None:
        if pid in self._focus:
            return
        procfs = self._procfs()
        root = str(procfs.root) if procfs is not None else "/proc"
        if procfs is not None:
            procfs.follow(pid)  # its stat every tick, however quiet it is
        self._publish_now(Focus(pid, True))
        from memtop.probes.smaps import SmapsProbe

        # smaps first: it loads at once (no compilation), so its totals do not wait for two BPF
        # programs to compile
        probes: list[Probe] = [SmapsProbe(pid, root)]
        if self.allow_bpf:
            from memtop.probes.faultstack import FaultStackProbe
            from memtop.probes.growth import GrowthProbe

            probes += [FaultStackProbe(pid, root), GrowthProbe(pid, root)]
        else:
            for name in FOCUS_BPF:
                self._set_status(ProbeStatus(name, "failed", NO_BPF, NO_BPF_HINT))
        self._focus[pid] = [p.name for p in probes if self.add_probe(p)]

    def unfocus(self, pid: int) -> None:
        names = self._focus.pop(pid, None)
        if names is None:
            return
        procfs = self._procfs()
        if procfs is not None:
            procfs.unfollow(pid)
        for name in names:
            self.remove_probe(name)
        self._publish_now(Focus(pid, False))

    def _leaks_busy(self, pids: Sequence[int]) -> bool | None:
        """True/False when the leaks probe (or its preflight) is already there and has taken
        ``pids`` (running: they join it in its mode) or cannot now; None when it is not there."""
        from memtop.probes.leaks import LeaksProbe

        if not self.allow_bpf:
            self._set_status(ProbeStatus(LEAKS_PROBE, "failed", NO_BPF, NO_BPF_HINT))
            return False
        with self._lock:
            running = next((p for p in self._attached if p.name == LEAKS_PROBE), None)
            queued = any(p.name in (LEAKS_PROBE, PREFLIGHT_PROBE) for p in self._queue)
        if isinstance(running, LeaksProbe):
            running.add_pids(list(pids))
            return True
        if queued or self._preflight_probe is not None:
            return False  # still attaching or measuring: the pids it was asked for are on their way
        return None

    def trace_allocations(
        self, pids: Sequence[int], sample_bytes: int | None = None, budget: float = 0.0
    ) -> bool:
        """``sample_bytes`` None: count the calls first (the preflight), then trace as
        `--sample-bytes` says, else as the preflight proposes (non-interactive front ends). An
        int: the user's choice (0: exact), traced at once."""
        from memtop.probes.leaks import LeaksProbe

        busy = self._leaks_busy(pids)
        if busy is not None:
            return busy
        if sample_bytes is None:
            return self._start_preflight(pids, auto=True)
        pre = self._preflight
        if pre is not None and not pre.decision and set(pids) <= set(pre.pids):
            how = "budget" if budget or self.leaks_budget else "sampled" if sample_bytes else "exact"
            self._preflight = replace(
                pre, decision=how, decided_by="user", sample_bytes=sample_bytes or pre.sample_bytes
            )
            self._publish_now(self._preflight)
        budget = budget or self.leaks_budget
        return self.add_probe(
            LeaksProbe(list(pids), sample_bytes=0 if budget else sample_bytes, budget=budget)
        )

    def measure_allocations(self, pids: Sequence[int]) -> bool:
        busy = self._leaks_busy(pids)
        if busy is not None:
            return busy
        return self._start_preflight(pids, auto=False)

    def decline_allocations(self, pids: Sequence[int]) -> None:
        pre = self._preflight
        if pre is not None and not pre.decision:
            self._preflight = replace(pre, decision="cancelled", decided_by="user")
            self._publish_now(self._preflight)

    def _start_preflight(self, pids: Sequence[int], auto: bool) -> bool:
        from memtop.core.leakcost import PROPOSED_SAMPLE_BYTES
        from memtop.probes.leakrate import LeakRateProbe

        probe = LeakRateProbe(
            list(pids),
            sample_bytes=self.leaks_sample_bytes or PROPOSED_SAMPLE_BYTES,
            # on a budget the count is part of the cost: at 1M calls/s a second of it is a CPU
            # second, a 1 % budget's 100 s; the windows measure the rate again anyway
            window_s=BUDGET_PREFLIGHT_S if self.leaks_budget else 1.0,
            links=bool(self.leaks_budget),
        )
        if not self.add_probe(probe):
            return False
        self._preflight_probe, self._preflight_auto = probe, auto
        self._preflight = LeakPreflight(
            tuple(probe.pids),
            "measuring",
            f"counting allocator calls for {probe.window_s:g} s before tracing",
            sample_bytes=probe.sample_bytes,
        )
        self._publish_now(self._preflight)
        return True

    def _preflight_done(self, probe: Probe, exc: Exception | None) -> None:
        """The preflight counted (or failed): its record, and in a non-interactive session the
        decision and the leaks probe queued (the loader picks it up next, in this thread)."""
        from memtop.core.leakcost import TRAP_NS, estimate
        from memtop.probes.leakrate import LeakRateProbe
        from memtop.probes.leaks import LeaksProbe

        probe.close()  # load() detached its uprobes already; this frees the program
        with self._lock:
            self.probes = [p for p in self.probes if p is not probe]
        self._preflight_probe = None
        pids = tuple(probe.pids) if isinstance(probe, LeakRateProbe) else ()
        rec = probe.result if isinstance(probe, LeakRateProbe) else None
        if rec is None:
            why = exc.message if isinstance(exc, MemtopError) else f"{type(exc).__name__}: {exc}"
            rec = LeakPreflight(pids, "failed", why, sample_bytes=self.leaks_sample_bytes or 0)
            self._set_status(ProbeStatus(PREFLIGHT_PROBE, "failed", why, getattr(exc, "hint", "")))
        else:
            self._set_status(ProbeStatus(PREFLIGHT_PROBE, "detached", probe.note()))
        if self._stopped:
            return
        if self._preflight_auto:
            given = self.leaks_sample_bytes
            if rec.state == "exited":
                rec = replace(rec, decision="cancelled", decided_by="exited")
            elif self.leaks_budget:
                rec = replace(rec, decision="budget", decided_by="--budget")
            elif given is not None:
                rec = replace(rec, decision="sampled" if given else "exact", decided_by="--sample-bytes")
            elif rec.state != "measured":  # nothing measured to propose from: exact, as before
                rec = replace(rec, decision="exact", decided_by="no measurement")
            else:
                est = estimate(rec.allocs_per_s, rec.frees_per_s, rec.trap_ns)
                rec = replace(
                    rec, decision="sampled" if est.propose_sampling else "exact", decided_by="proposal"
                )
            if rec.decision != "cancelled":
                leaks = LeaksProbe(
                    list(pids),
                    sample_bytes=rec.sample_bytes if rec.decision == "sampled" else 0,
                    budget=self.leaks_budget,
                    calls_per_s=rec.allocs_per_s if rec.state == "measured" else 0.0,
                    # the count's traps, spent already: the budget counts them
                    prior_cost_s=(rec.alloc_calls + rec.free_calls) * (rec.trap_ns or TRAP_NS) / 1e9,
                    prior_s=rec.window_ns / 1e9,
                )
                with self._lock:
                    self.probes.append(leaks)
                    self._queue.append(leaks)  # the loader's loop takes it next
                self._set_status(ProbeStatus(LEAKS_PROBE, "pending", "waiting to attach"))
        self._preflight = rec
        with self._lock:
            self._pending_status.append(rec)

    def trace_kernel(self, tracer: str, on: bool) -> bool:
        from memtop.probes.pagealloc import PageAllocProbe
        from memtop.probes.shared import ShmSnoopProbe
        from memtop.probes.slabtrace import SlabFreesProbe, SlabStacksProbe, SlabTraceProbe

        make: dict[str, type[SlabTraceProbe] | type[PageAllocProbe] | type[ShmSnoopProbe]] = {
            "slabtrace": SlabTraceProbe,
            "slabfrees": SlabFreesProbe,
            "slabstacks": SlabStacksProbe,
            "pagealloc": PageAllocProbe,
            "shmsnoop": ShmSnoopProbe,
        }
        if tracer not in make:
            return False
        if not on:
            with self._lock:
                running = self._running(tracer)  # one still compiling too: it must not attach after
            if running:
                self.remove_probe(tracer)
            return running
        if not self.allow_bpf:
            self._set_status(ProbeStatus(tracer, "failed", NO_BPF, NO_BPF_HINT))
            return False
        return self.add_probe(make[tracer]())

    def measure_working_set(self, pid: int, on: bool, window_s: float = 10.0) -> bool:
        from memtop.probes.wss import WssProbe

        with self._lock:
            running = self._running(WSS_PROBE)
        if running:  # stopped, or replaced by this one (one measurement at a time)
            self.remove_probe(WSS_PROBE)
            for names in self._focus.values():
                if WSS_PROBE in names:
                    names.remove(WSS_PROBE)
        if not on:
            return running
        procfs = self._procfs()
        root = str(procfs.root) if procfs is not None else "/proc"
        if not self.add_probe(WssProbe(pid, window_s, root)):
            return False
        if pid in self._focus:  # the drill-in's: it stops when the drill-in closes
            self._focus[pid].append(WSS_PROBE)
        return True

    def watch(self, probes: Collection[str] | None) -> bool:
        old, new = self._watched, None if probes is None else frozenset(probes)
        self._watched = new
        if old is None:
            return False
        now = self.clock()
        with self._lock:
            shown = [
                p
                for p in self._attached
                if p.name not in old
                and (new is None or p.name in new)
                and self.cadence_of(p, watched=False) > p.cadence_s
                and now - self._last_poll.get(p.name, 0.0) >= p.cadence_s * 0.9
            ]
            self._catch_up.update(p.name for p in shown)
            return bool(shown)

    def cadence_of(self, p: Probe, watched: bool) -> float:
        """Seconds between ``p``'s polls while what it feeds is on screen (``watched``) or not."""
        if watched:
            return p.cadence_s
        slower = p.unwatched_cadence_s or 0.0
        if p.name in self._slowable and not p.full_cadence:
            slower = max(slower, p.cadence_s * UNWATCHED_EVERY)
        return max(p.cadence_s, slower)

    def use_parts(self, parts: Mapping[str, Collection[str]] | None) -> None:
        self._used_parts = None if parts is None else {k: frozenset(v) for k, v in parts.items()}

    # -- polling ------------------------------------------------------------------------------
    def poll_sync(self, force: bool = False, seen_only: bool = False) -> Batch:
        """Poll every due attached probe (worker thread); ``seen_only``: only those watched (what
        the first screen draws), when a front end said what it watches."""
        records: list[Record] = []
        now = self.clock()
        with self._lock:
            probes = list(self._attached)
        if seen_only and self._watched is not None:
            probes = [p for p in probes if p.name in self._watched]
        with self._poll_lock:
            records.extend(self._poll_probes(probes, now, force))
        with self._lock:
            status, self._pending_status = self._pending_status, []
            loading = bool(self._queue)
        if not loading and now >= self._next_trim:
            self._next_trim = now + TRIM_EVERY_S
            release_heap()
        return Batch(ts_ns=now_ns(), records=tuple(status) + tuple(records))

    def _poll_probes(self, probes: list[Probe], now: float, force: bool) -> list[Record]:
        records: list[Record] = []
        for p in probes:
            with self._lock:
                if p not in self._attached:  # removed since the list was taken
                    continue
            watched = self._watched
            p.watched = watched is None or p.name in watched
            used = self._used_parts
            p.used_parts = None if used is None else used.get(p.name)
            last = self._last_poll.get(p.name, 0.0)
            with self._lock:
                shown_again = p.name in self._catch_up
                self._catch_up.discard(p.name)
            if not force and not shown_again and now - last < self.cadence_of(p, p.watched) * 0.9:
                continue
            if now < self._retry_at.get(p.name, 0.0):
                continue  # failing: it waits out its backoff (the others keep their cadence)
            self._last_poll[p.name] = now
            try:
                got = p.poll()
            except Exception as exc:  # noqa: BLE001 - a broken poll must not take the app down
                self._poll_failed(p, exc)
                continue
            records.extend(got)
            self._last_ok_ns[p.name] = now_ns()
            if p.name in self._failing:
                self._recovered(p)
        return records

    def _poll_failed(self, p: Probe, exc: Exception) -> None:
        """A poll raised: the probe stays attached, says why and how often, and waits out a backoff
        (what it fed is no longer current: the state and every output go by its status)."""
        ts = now_ns()
        failures, since = self._failing.get(p.name, (0, ts))
        failures += 1
        self._failing[p.name] = (failures, since)
        wait = backoff_s(failures)
        self._retry_at[p.name] = self.clock() + wait
        try:
            p.poll_failed()
        except Exception:  # noqa: BLE001 - its next poll says whether it works
            log.exception("probe %s could not reset after a failed poll", p.name)
        if failures == 1:  # the traceback once per run of failures, not once a minute for weeks
            log.exception("probe %s poll failed; retrying with backoff", p.name)
        else:
            log.debug("probe %s poll failed %d times in a row: %s", p.name, failures, exc)
        self._set_status(
            ProbeStatus(
                p.name,
                "erroring",
                poll_reason(exc),
                f"next attempt in {wait:g} s (the wait doubles up to {BACKOFF_MAX_S:g} s); it recovers "
                "by itself when the cause goes",
                failures=failures,
                since_ns=since,
                last_ok_ns=self._last_ok_ns.get(p.name, 0),
                retry_ns=ts + int(wait * 1e9),
            )
        )

    def _recovered(self, p: Probe) -> None:
        failures, since = self._failing.pop(p.name, (0, 0))
        self._retry_at.pop(p.name, None)
        took_s = max(0.0, (now_ns() - since) / 1e9)
        self._set_status(
            ProbeStatus(
                p.name,
                "attached",
                f"recovered after {failures} failed poll{'s' if failures != 1 else ''} over {took_s:.0f} s",
                last_ok_ns=self._last_ok_ns.get(p.name, 0),
            )
        )

    def _forget_failures(self, name: str) -> None:
        self._failing.pop(name, None)
        self._retry_at.pop(name, None)
        self._last_ok_ns.pop(name, None)

    def publish(self, batch: Batch) -> None:
        self._last_ts = max(self._last_ts, batch.ts_ns)
        for fn in self._subs:
            fn(batch)

    async def poll(self, at: float | None = None) -> Batch | None:
        """The next batch; with ``at`` (``time.monotonic()`` seconds), polled then: the poll
        thread waits for it, so the event loop sleeps until the batch comes. A poll asked for
        while a timed one still waits for its time takes that one over at its own time (now,
        without ``at``: a pane shown again is polled at once, not at the next tick; a timer
        started again at a new interval) and returns its batch."""
        if self._stopped:
            return None
        if self._polling:  # a slow poll absorbs this tick
            due, task = self._poll_due, self._poll_task
            if due is not None and task is not None and self._poller.retime(due, at or 0.0):
                return await asyncio.shield(task)
            return None
        self._polling = True
        due = Due(at) if at is not None else None
        self._poll_due = due
        # shielded: the poll takes the pending statuses in its thread, so an awaiter cancelled
        # meanwhile (the drill-in's first-data worker, when the drill-in is left) must not drop
        # the batch: it is handed on all the same (a status lost so never reached the state)
        self._poll_task = asyncio.get_running_loop().create_task(self._poll_and_publish(due))
        return await asyncio.shield(self._poll_task)

    async def _poll_and_publish(self, due: Due | None = None) -> Batch | None:
        try:
            batch = await self._poller.run(self.poll_sync, due)
        finally:
            self._polling = False
            self._poll_due = None
        if batch is None:  # a timed poll dropped before its time (the source stopped)
            return None
        self.publish(batch)
        return batch

    def _drop_timed_poll(self) -> None:
        """A timed poll still waiting for its time is not made (the source stops)."""
        due = self._poll_due
        if due is not None:
            self._poller.drop(due)

    async def wait_settled(self, timeout_s: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.settled():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    def close(self, wait_s: float = 5.0) -> None:
        """Detach every probe (idempotent, safe from signal/atexit paths). A poll still running
        in a worker finishes first, waited for at most ``wait_s``."""
        self._stopped = True
        self._drop_timed_poll()
        self._poller.stop()
        from memtop.probes import symbols

        symbols.shutdown()  # a poll waiting on a symbol lookup returns now
        self._cancel_preflight()
        with self._lock:
            probes, self._attached = list(self._attached), []
            self._queue.clear()
        if not probes:
            return
        acquired = self._poll_lock.acquire(timeout=wait_s)
        try:
            for p in probes:
                p.close()
        finally:
            if acquired:
                self._poll_lock.release()

    def _cancel_preflight(self, wait_s: float = 1.0) -> None:
        """End a preflight's count now and wait (briefly) for it to detach its uprobes: one left
        to the kernel at exit stays in the target (memtop.linux.bcc_compat.stop_attaching_uprobes)."""
        probe = self._preflight_probe
        if probe is not None:
            probe.cancel(wait_s)

    def stop_attaching(self) -> None:
        """Attach no new uprobe from now on: memtop is exiting (see
        memtop.linux.bcc_compat.stop_attaching_uprobes)."""
        bcc_compat.stop_attaching_uprobes()

    async def stop(self) -> None:
        """Detach everything, promptly: symbol lookups are cut short, a compilation under way is
        waited for briefly (the probe it loads closes itself when it ends), and a poll too."""
        self._stopped = True
        self._drop_timed_poll()  # a poll waiting for its time is not waited for
        from memtop.probes import symbols

        symbols.shutdown()
        self._cancel_preflight()  # its count ends now: it detaches while the loader is waited for
        if self._loader is not None and not self._loader.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._loader), timeout=STOP_WAIT_LOADER_S)
            except (TimeoutError, Exception):  # noqa: BLE001
                pass
        if self._poll_task is not None and not self._poll_task.done():
            # a shielded poll outliving the event loop would be a pending task destroyed
            await asyncio.wait({self._poll_task}, timeout=STOP_WAIT_POLL_S)
        self.close(wait_s=STOP_WAIT_POLL_S)
