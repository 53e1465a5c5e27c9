"""Replay: a recording as a :class:`~memtop.stream.source.Source` (mode ``"replay"``).

The file is read and checked by :class:`~memtop.stream.recfile.Recording` (untrusted input,
within limits). :class:`ReplaySource` plays its batches against the clock (``speed`` × real
time), and can pause, step one batch, jump and go to a time. State is pure, so going back means
starting again from a *checkpoint*: a copy of the subscribers' state taken every
``checkpoint_every`` batches as the replay moves forwards, so a seek applies at most that many
batches (see :meth:`ReplaySource.seek_ns`).
"""

from __future__ import annotations

import bisect
import lzma
import pickle
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from memtop.core.errors import BadRecording
from memtop.records import Batch, ProbeStatus, Record
from memtop.records.process import Focus
from memtop.stream.recfile import Recording
from memtop.stream.source import Subscriber, sleep_until

#: a checkpoint of the subscribers' state every this many batches (see ReplaySource)
CHECKPOINT_EVERY = 64
#: the most memory the checkpoints of one replay take (compressed); beyond, every other one goes
CHECKPOINT_BUDGET_BYTES = 32 << 20


def freeze(obj: Any) -> bytes:
    """A checkpoint of pure-Python state: pickled (memtop's own objects, never read from a file).
    ReplaySource compresses it (:func:`pack`) in the background."""
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def thaw(data: bytes) -> Any:
    """A fresh copy of what :func:`freeze` saved (the checkpoint itself stays as it was)."""
    return pickle.loads(data)  # noqa: S301 - bytes memtop made itself, in memory


def pack(raw: bytes) -> bytes:
    """A frozen state compressed with LZMA's fastest preset: the processes' histories repeat
    themselves at long range, so it is 60-80× smaller than the pickle (zlib, with its 32 KiB
    window, managed ~8× in half the time, and its checkpoints outgrew the budget in an hour of 300
    busy processes). LZMA lets go of the GIL while it works: it runs beside the replay."""
    return lzma.compress(raw, format=lzma.FORMAT_XZ, check=lzma.CHECK_NONE, preset=0)


def unpack(data: bytes) -> bytes:
    return lzma.decompress(data)


class ReplaySource:
    """A recording played back as a source. Position ``pos_ns`` is on the recording's own clock
    (CLOCK_MONOTONIC of the machine that recorded); every batch with ``ts_ns <= pos_ns`` has been
    handed to the subscribers.

    Seeking: state is pure, so the state at a time is what the batches up to it make. A subscriber
    that can save and restore its state (:meth:`on_checkpoint`) gets a checkpoint taken every
    ``checkpoint_every`` batches as the replay moves forwards; a seek (backwards, or forwards past a
    checkpoint) restores the nearest checkpoint at or before the target and applies the batches
    from there: at most ``checkpoint_every`` of them. The checkpoints stay within
    ``budget_bytes``: when they would not, every other one is dropped and the spacing doubles.
    Without a checkpointing subscriber a seek backwards starts again from the first batch."""

    mode = "replay"
    playing: bool

    def __init__(
        self,
        recording: Recording,
        *,
        speed: float = 1.0,
        at_s: float | None = None,
        playing: bool = True,
        checkpoint_every: int = CHECKPOINT_EVERY,
        budget_bytes: int = CHECKPOINT_BUDGET_BYTES,
    ) -> None:
        if not recording.index:
            raise BadRecording(
                f"{recording.path} holds no data (the recording stopped before its first sample)"
            )
        self.recording = recording
        self.speed = speed
        self.playing = playing if at_s is None else False
        self._start_at = at_s
        self._subs: list[Subscriber] = []
        self._resets: list[Callable[[], None]] = []
        self._focused: list[int] = []
        self._iter: Iterator[Batch] | None = None
        self.applied = 0  # batches handed out since the last reset (the state holds that many)
        self.pos_ns = recording.first_ts_ns
        self._wall: float | None = None
        self.checkpoint_every = max(1, checkpoint_every)
        self.budget_bytes = budget_bytes
        self._save: Callable[[], bytes] | None = None
        self._restore: Callable[[bytes], None] | None = None
        #: batches applied when taken -> the saved state, compressed (or being compressed, in
        #: the background); keys are multiples of checkpoint_every
        self.checkpoints: dict[int, bytes | Future[bytes]] = {}
        self.checkpoint_bytes = 0  # of the compressed ones
        self._pending: list[int] = []  # keys still being compressed, oldest first
        self._packer: ThreadPoolExecutor | None = None
        #: batches the last seek applied (after restoring a checkpoint, or from the start)
        self.last_seek_applied = 0

    # -- Source protocol ----------------------------------------------------------------------------
    def subscribe(self, fn: Subscriber) -> None:
        self._subs.append(fn)

    def on_reset(self, fn: Callable[[], None]) -> None:
        """``fn`` is called before batches are applied again from the start (a seek backwards)."""
        self._resets.append(fn)

    def on_checkpoint(self, save: Callable[[], bytes], restore: Callable[[bytes], None]) -> None:
        """The subscribers' state can be saved (``save()`` returns it as bytes, e.g.
        :func:`freeze`) and put back (``restore(saved)``, e.g. with :func:`thaw`): seeks then
        start from checkpoints. One checkpointer per source (the app's state)."""
        self._save, self._restore = save, restore

    async def start(self) -> None:
        target = self.recording.first_ts_ns
        if self._start_at is not None:
            target = self.recording.ts_at(self._start_at)
        self.seek_ns(target)
        self._wall = time.monotonic()

    async def poll(self, at: float | None = None) -> Batch | None:
        await sleep_until(at)
        now = time.monotonic()
        last, self._wall = self._wall, now
        if not self.playing or last is None:
            return None
        target = self.pos_ns + int((now - last) * self.speed * 1e9)
        batch = self._advance(min(target, self.recording.last_ts_ns))
        if self.at_end:
            self.playing = False
        return batch

    def settled(self) -> bool:
        return True

    async def wait_settled(self, timeout_s: float = 60.0) -> bool:
        return True

    def statuses(self) -> dict[str, ProbeStatus]:
        return {}  # nothing attaches to the past: the recording's statuses are in its records

    def begin_bpf(self) -> None:
        return None

    @property
    def replay(self) -> ReplaySource:
        return self

    def stop_attaching(self) -> None:
        return None

    def close(self, wait_s: float = 5.0) -> None:
        self._close_iter()
        if self._packer is not None:
            self._packer.shutdown(wait=False, cancel_futures=True)

    async def stop(self) -> None:
        self.close()

    # -- intents: answered from the recording -------------------------------------------------------
    def focus(self, pid: int) -> None:
        """The recording holds what was recorded of ``pid``; the state keeps it from now on."""
        if pid not in self._focused:
            self._focused.append(pid)
            self._publish(Focus(pid, True))

    def unfocus(self, pid: int) -> None:
        if pid in self._focused:
            self._focused.remove(pid)
            self._publish(Focus(pid, False))

    def trace_allocations(
        self, pids: Sequence[int], sample_bytes: int | None = None, budget: float = 0.0
    ) -> bool:
        return False  # nothing can attach to the past

    def measure_allocations(self, pids: Sequence[int]) -> bool:
        return False

    def decline_allocations(self, pids: Sequence[int]) -> None:
        return None

    def trace_kernel(self, tracer: str, on: bool) -> bool:
        return False  # the recording holds what was traced, if anything

    def measure_working_set(self, pid: int, on: bool, window_s: float = 10.0) -> bool:
        return False  # the recording holds what was measured, if anything

    def watch(self, probes: Collection[str] | None) -> bool:
        return False  # the recording holds what was read

    def use_parts(self, parts: Mapping[str, Collection[str]] | None) -> None:
        return None  # the recording holds what was read

    def _publish(self, *records: Record) -> None:
        """``records`` to the subscribers now, at the replay's position (a paused replay too)."""
        batch = Batch(ts_ns=self.pos_ns, records=records)
        for fn in self._subs:
            fn(batch)

    # -- controls -----------------------------------------------------------------------------------
    @property
    def at_end(self) -> bool:
        return self.applied >= len(self.recording.index)

    @property
    def position_s(self) -> float:
        return (self.pos_ns - self.recording.first_ts_ns) / 1e9

    @property
    def duration_s(self) -> float:
        return self.recording.duration_s

    def toggle_play(self) -> bool:
        if not self.playing and self.at_end:
            self.seek_ns(self.recording.first_ts_ns)  # play again from the start
        self.playing = not self.playing
        self._wall = time.monotonic()
        return self.playing

    def step(self, n: int) -> None:
        """Pause and move ``n`` batches (one interval each) forwards or backwards."""
        self.playing = False
        idx = self.recording.index
        cur = max(0, self.applied - 1)
        new = min(len(idx) - 1, max(0, cur + n))
        self.seek_ns(idx[new])

    def jump(self, seconds: float) -> None:
        self.seek_ns(self.pos_ns + int(seconds * 1e9))

    def goto(self, seconds: float) -> None:
        self.seek_ns(self.recording.ts_at(seconds))

    def seek_ns(self, target: int) -> None:
        """Make the subscribers' state the one at ``target`` (clamped to the recording)."""
        rec = self.recording
        target = min(max(target, rec.first_ts_ns), rec.last_ts_ns)
        want = bisect.bisect_right(rec.index, target)  # batches the state must have applied
        if want < self.applied or self._checkpoint_between(self.applied, want):
            self._rewind_to(want)
        base = self.applied
        self._advance(target)
        self.last_seek_applied = self.applied - base
        self.pos_ns = target
        self._wall = time.monotonic()

    # -- internals ----------------------------------------------------------------------------------
    def _checkpoint_between(self, lo: int, hi: int) -> bool:
        """A checkpoint after ``lo`` batches and at most ``hi``: a seek forwards can skip to it."""
        return self._restore is not None and any(lo < k <= hi for k in self.checkpoints)

    def _rewind_to(self, want: int) -> None:
        """Put the state at the nearest checkpoint at or before ``want`` batches (the start if
        there is none): the batches after it are applied by _advance."""
        self._close_iter()
        best = max((k for k in self.checkpoints if k <= want), default=0)
        if best and self._restore is not None:
            self._restore(unpack(self._packed(best)))
            self.applied = best
        else:
            self.applied = 0
            for fn in self._resets:
                fn()
        self.pos_ns = self.recording.index[self.applied - 1] if self.applied else self.recording.first_ts_ns
        if self._focused:  # the state went back in time: it still looks where the user looks
            self._publish(*(Focus(pid, True) for pid in self._focused))

    def _advance(self, target: int) -> Batch | None:
        """Hand out every batch with ts_ns <= target; returns the last one."""
        idx = self.recording.index
        last: Batch | None = None
        while self.applied < len(idx) and idx[self.applied] <= target:
            if self._iter is None:
                self._iter = self.recording.batches(self.applied)
            try:
                batch = next(self._iter)
            except StopIteration:
                self.applied = len(idx)
                break
            self.applied += 1
            for fn in self._subs:
                fn(batch)
            last = batch
            if self._save is not None and self.applied % self.checkpoint_every == 0:
                self._checkpoint()
        self.pos_ns = max(self.pos_ns, target)
        return last

    def _checkpoint(self) -> None:
        if self.applied in self.checkpoints or self._save is None:
            return
        raw = self._save()
        if self._packer is None:
            self._packer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memtop-checkpoint")
        self.checkpoints[self.applied] = self._packer.submit(pack, raw)
        self._pending.append(self.applied)
        # at most two states wait to be compressed (each as big as the state itself)
        while len(self._pending) > 2 or (self._pending and self._done(self._pending[0])):
            self._packed(self._pending[0])

    def _done(self, k: int) -> bool:
        v = self.checkpoints.get(k)
        return not isinstance(v, Future) or v.done()

    def _packed(self, k: int) -> bytes:
        """Checkpoint ``k`` compressed (waiting for it if need be); the budget is kept here."""
        v = self.checkpoints[k]
        if isinstance(v, bytes):
            return v
        data = v.result()
        self.checkpoints[k] = data
        self._pending.remove(k)
        self.checkpoint_bytes += len(data)
        while self.checkpoint_bytes > self.budget_bytes and len(self.checkpoints) > 1:
            # over budget: keep every other one (the spacing doubles, seeks apply at most that)
            self.checkpoint_every *= 2
            for j in [j for j in self.checkpoints if j % self.checkpoint_every and j != k]:
                gone = self.checkpoints.pop(j)
                if isinstance(gone, bytes):
                    self.checkpoint_bytes -= len(gone)
                else:
                    gone.cancel()
                    self._pending.remove(j)
        if k % self.checkpoint_every:  # thinned out by its own arrival
            self.checkpoints.pop(k, None)
            self.checkpoint_bytes -= len(data)
        return data

    def _close_iter(self) -> None:
        if self._iter is not None:
            close = getattr(self._iter, "close", None)
            if callable(close):
                close()
            self._iter = None

    def position_text(self) -> str:
        """The header's position indicator: state, position / length, speed, wall time."""
        mark = "▶" if self.playing else ("■ end" if self.at_end else "⏸")
        text = f"REPLAY {mark} {fmt_clock(self.position_s)} / {fmt_clock(self.duration_s)}"
        if self.speed != 1:
            text += f" ×{self.speed:g}"
        wall = self.recording.wall_time(self.pos_ns)
        if wall is not None:
            text += time.strftime("  %Y-%m-%d %H:%M:%S", time.localtime(wall))
        return text


def fmt_clock(seconds: float) -> str:
    seconds = max(0.0, seconds)
    m, s = divmod(seconds, 60)
    h, m = divmod(int(m), 60)
    return f"{h}:{m:02d}:{s:04.1f}" if h else f"{m:d}:{s:04.1f}"


def parse_time(text: str) -> float:
    """Seconds from ``SS``, ``MM:SS`` or ``H:MM:SS`` (fractions allowed). ValueError otherwise."""
    parts = text.strip().split(":")
    if not 1 <= len(parts) <= 3 or any(p.strip() == "" for p in parts):
        raise ValueError(f"not a time: {text!r}")
    total = 0.0
    for p in parts:
        v = float(p)
        if v < 0 or v != v:
            raise ValueError(f"not a time: {text!r}")
        total = total * 60 + v
    return total
