"""What a front end talks to: a live source (memtop.stream.bridge.Bridge), a replay
(memtop.stream.replay.ReplaySource) or a test's fake. Typed, no bcc: the UI imports this, never the bridge
or a probe (the import-linter contracts in pyproject.toml hold it to that).

A front end never builds a probe or reaches into one: it states *intents* (focus a pid, trace the
allocations of pids) and the source decides what that means. A live source attaches the on-demand
probes; a replay answers from the recording. Either way the intent also reaches the state as a
record (``memtop.records.process.Focus``), so a recording carries it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol

from memtop.records import Batch, ProbeStatus

Subscriber = Callable[[Batch], None]


class ReplayControls(Protocol):
    """What a replayed source adds: moving through the recording."""

    @property
    def playing(self) -> bool: ...
    @property
    def at_end(self) -> bool: ...
    @property
    def position_s(self) -> float: ...
    @property
    def duration_s(self) -> float: ...
    def toggle_play(self) -> bool: ...
    def step(self, n: int) -> None: ...
    def jump(self, seconds: float) -> None: ...
    def goto(self, seconds: float) -> None: ...
    def position_text(self) -> str:
        """The header's position indicator: state, position / length, speed, wall time."""
        ...

    def on_reset(self, fn: Callable[[], None]) -> None:
        """``fn`` runs before batches are applied again from the start (a seek backwards)."""
        ...

    def on_checkpoint(self, save: Callable[[], bytes], restore: Callable[[bytes], None]) -> None:
        """Seeks start from saved states: ``save()`` returns one, ``restore(saved)`` puts it back."""
        ...


async def sleep_until(at: float | None) -> None:
    """Sleep until ``time.monotonic()`` reaches ``at`` (None: return at once): a source whose
    polls are made in the event loop waits for a timed poll here."""
    if at is not None:
        left = at - time.monotonic()
        if left > 0:
            await asyncio.sleep(left)


class Source(Protocol):
    """Batches of records in, intents out."""

    @property
    def mode(self) -> str:
        """One of bpf, procfs or replay; read-only (a live source's follows its attached probes)."""
        ...

    @property
    def replay(self) -> ReplayControls | None:
        """The replay controls of a replayed source; None for a live one."""
        ...

    # -- data ---------------------------------------------------------------------------------------
    def subscribe(self, fn: Subscriber) -> None:
        """``fn`` gets every batch the source hands out (polled, or published by an intent)."""
        ...

    async def start(self) -> None:
        """Begin: the first batch is published before this returns; probes attach in the background."""
        ...

    async def poll(self, at: float | None = None) -> Batch | None:
        """The next batch (also handed to subscribers); None when there is none this tick (a poll
        still running absorbs this one; a paused replay). ``at``: polled at that
        ``time.monotonic()`` (the live source waits in its poll thread, see
        :func:`sleep_until`), else now."""
        ...

    def settled(self) -> bool:
        """Every probe asked for is attached, failed or detached."""
        ...

    async def wait_settled(self, timeout_s: float = 60.0) -> bool: ...

    def statuses(self) -> dict[str, ProbeStatus]: ...

    def begin_bpf(self) -> None:
        """Start compiling the BPF programs held back until the first frame (a no-op when none are)."""
        ...

    # -- intents ------------------------------------------------------------------------------------
    def focus(self, pid: int) -> None:
        """The user looks at ``pid`` closely (the drill-in): follow it every tick and attach what
        describes one process (mappings, fault stacks, heap growth)."""
        ...

    def unfocus(self, pid: int) -> None: ...

    def trace_allocations(
        self, pids: Sequence[int], sample_bytes: int | None = None, budget: float = 0.0
    ) -> bool:
        """Trace the allocations of ``pids`` (the leaks pane), added to any traced already. False
        when that cannot start now (a replay; the tracer still attaching). ``sample_bytes``: the
        user's choice (0: every allocation; N: byte sampling every ~N bytes), at once; None: count
        the calls first (the preflight), then follow `--sample-bytes` or the proposal, unasked.
        ``budget``: trace in windows within that share of one core (`--budget`; 0: all the
        time, or `--budget` when given)."""
        ...

    def measure_allocations(self, pids: Sequence[int]) -> bool:
        """Count the allocator calls of ``pids`` for about a second (the leaks preflight) and wait:
        the rate and the expected cost reach the state, the user chooses (``trace_allocations``
        with ``sample_bytes``, or ``decline_allocations``). False when that cannot start now."""
        ...

    def decline_allocations(self, pids: Sequence[int]) -> None:
        """The user declined to trace after the preflight (recorded as its decision)."""
        ...

    def trace_kernel(self, tracer: str, on: bool) -> bool:
        """Attach (``on``) or detach an on-demand kernel tracer: the Kernel pane's "slabtrace"
        (slab allocations by cache and call site, sampled), "slabfrees" (the same with the frees
        hooked: net growth per call site), "slabstacks" (with kernel stacks) or "pagealloc"
        (page allocations by
        order), the Shared pane's "shmsnoop" (shm, madvise and memfd_create calls). False when
        that cannot be done now (a replay; no BPF; already in that state)."""
        ...

    def measure_working_set(self, pid: int, on: bool, window_s: float = 10.0) -> bool:
        """Measure ``pid``'s working set (the drill-in's ``w``; ``on``), or stop: clear its
        referenced bits and read the pages it touched every ``window_s`` seconds, until stopped
        or its drill-in closes. One measurement at a time: a new one replaces the last. False
        when that cannot be done now (a replay; nothing to stop)."""
        ...

    def watch(self, probes: Collection[str] | None) -> bool:
        """The probes that feed what is on screen now (the TUI's pane or drill-in, its header and
        notices); the others are polled less often and may read their costly parts less often
        still (each record still says when it was read). None, as before any call: everything
        is watched (snapshots, recordings, the exporter). True when a probe now watched was
        polled less often meanwhile: the next poll reads it, so poll now before drawing it."""
        ...

    def use_parts(self, parts: Mapping[str, Collection[str]] | None) -> None:
        """Of each probe named in ``parts``, the optional parts (``Probe.optional_parts``) a front
        end uses: the others are not read at all (the exporter, which reads only what it exports).
        None, as before any call, and a probe not named: every part is read (the TUI,
        snapshots, recordings, batch)."""
        ...

    # -- the end ------------------------------------------------------------------------------------
    def stop_attaching(self) -> None:
        """Attach nothing new from now on: the process is exiting."""
        ...

    def close(self, wait_s: float = 5.0) -> None:
        """Detach everything now (idempotent; safe from any thread and from exit paths)."""
        ...

    async def stop(self) -> None:
        """Detach everything, promptly, from the event loop."""
        ...
