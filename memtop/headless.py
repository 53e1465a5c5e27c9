"""Headless runs without Textual: `memtop record` and `memtop --batch`.

Both drive the bridge directly with asyncio, the same way the app's timer does: start the probes,
wait until they are attached (or have failed), then poll every interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from memtop import __version__, files
from memtop.bridge import Bridge
from memtop.probes.base import Probe
from memtop.recording import Recorder, open_recorder
from memtop.records import Batch, Record
from memtop.state import State
from memtop.state.host import HostState
from memtop.views import Options, View
from memtop.views.header import host_text

if TYPE_CHECKING:
    from memtop.replay import Limits

SETTLE_TIMEOUT_S = 120.0


@dataclass
class RecordResult:
    path: Path
    batches: int
    records: int
    duration_s: float
    size_bytes: int
    reason: str


def _stop_on_signals(stop: asyncio.Event) -> Callable[[], None]:
    """SIGINT/SIGTERM set ``stop`` (the loop then finishes the file); returns an undo."""
    loop = asyncio.get_running_loop()
    sigs = (signal.SIGINT, signal.SIGTERM)
    done: list[signal.Signals] = []
    for sig in sigs:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            done.append(sig)

    def undo() -> None:
        for sig in done:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)

    return undo


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    if seconds <= 0:
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


async def _settle(bridge: Bridge, stop: asyncio.Event, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not bridge.settled() and not stop.is_set() and time.monotonic() < deadline:
        await _wait(stop, 0.05)


async def record(
    probes: list[Probe],
    output: str | Path,
    *,
    interval_s: float = 1.0,
    duration_s: float | None = None,
    force: bool = False,
    on_start: Callable[[Recorder], None] | None = None,
) -> RecordResult:
    """Record until ``duration_s`` is over or SIGINT/SIGTERM arrives; the file is complete either
    way. The target is checked before any probe loads, so a bad path fails at once."""
    files.check_target(output, force)
    stop = asyncio.Event()
    undo = _stop_on_signals(stop)
    bridge = Bridge(probes)
    rec: Recorder | None = None
    reason = "duration"
    try:
        await bridge.start()
        await _settle(bridge, stop)
        statuses = list(bridge.statuses().values())
        prelude: list[Record] = [*statuses, *([bridge.host_facts] if bridge.host_facts else [])]
        # the bridge published a first batch at start, before this recorder existed: carry its
        # probe statuses and host facts into the recording's first batch so a replay knows every
        # probe's fate and the machine it ran on
        rec = open_recorder(
            output, statuses, force=force, interval_s=interval_s, mode=bridge.mode, prelude=prelude
        )
        bridge.subscribe(rec)
        if on_start is not None:
            on_start(rec)
        t0 = time.monotonic()
        ticks = 0
        while not stop.is_set():
            await bridge.poll()
            ticks += 1
            due = t0 + ticks * interval_s
            if duration_s is not None and due - t0 > duration_s + 1e-9:
                break
            await _wait(stop, due - time.monotonic())
        if stop.is_set():
            reason = "signal"
    except BaseException:
        reason = "error"  # the batches so far are still kept
        raise
    finally:
        undo()
        try:
            if rec is not None:
                rec.close(reason)  # a failed close raises WriteFailed: exit 2, never a success
        finally:
            await bridge.stop()
    assert rec is not None
    return RecordResult(rec.path, rec.batches, rec.records, rec.duration_s, rec.path.stat().st_size, reason)


def encodable(out: IO[str], text: str) -> str:
    """``text`` as ``out`` can encode it: what its encoding lacks (a non-ASCII process name on a
    stdout in ASCII or latin-1, LANG=C) becomes a backslash escape, as memtop.text shows control
    characters, rather than a UnicodeEncodeError ending the run."""
    enc = getattr(out, "encoding", None)
    if not enc:
        return text
    try:
        text.encode(enc)
    except UnicodeEncodeError:
        return text.encode(enc, "backslashreplace").decode(enc)
    except LookupError:
        pass
    return text


def _emit(out: IO[str], view: View, state: State, opts: Options, as_json: bool, probes: str) -> None:
    if as_json:
        line = json.dumps(view.document(state, opts), ensure_ascii=False, separators=(",", ":"))
        if encodable(out, line) != line:  # JSON's own escapes keep it valid and lossless
            line = json.dumps(view.document(state, opts), ensure_ascii=True, separators=(",", ":"))
        out.write(line + "\n")
    else:
        stamp = time.strftime("%H:%M:%S")
        host = host_text(state.get(HostState).facts)  # the recorded machine's, in a replay
        where = f"  {host}" if host else ""
        head = f"memtop {__version__} - {stamp}  pane {view.name}  source {state.mode}{where}  {probes}\n"
        out.write(encodable(out, head + view.text(state, opts) + "\n"))
    out.flush()


def _probe_line(state: State) -> str:
    sts = state.statuses.values()
    attached = sum(1 for s in sts if s.state == "attached")
    failed = [s.probe for s in sts if s.state == "failed"]
    text = f"probes {attached}/{len(state.statuses)} attached"
    if failed:
        text += f" (failed: {', '.join(failed)})"
    return text


async def batch_live(
    probes: list[Probe],
    view: View,
    opts: Options,
    *,
    interval_s: float = 1.0,
    count: int | None = None,
    as_json: bool = False,
    out: IO[str] = sys.stdout,
) -> int:
    """Print the pane every interval, like ``top -b``: text, or one JSON document per line. The
    first output comes one interval after the probes attach (rates need two samples)."""
    stop = asyncio.Event()
    undo = _stop_on_signals(stop)
    bridge = Bridge(probes)
    state = State(mode=bridge.mode)

    def apply(b: Batch) -> None:
        state.mode = bridge.mode
        state.apply(b)

    bridge.subscribe(apply)
    printed = 0
    try:
        await bridge.start()
        await _settle(bridge, stop)
        await bridge.poll()
        t0 = time.monotonic()
        ticks = 0
        while not stop.is_set() and (count is None or printed < count):
            ticks += 1
            await _wait(stop, t0 + ticks * interval_s - time.monotonic())
            if stop.is_set():
                break
            await bridge.poll()
            _emit(out, view, state, opts, as_json, _probe_line(state))
            printed += 1
    finally:
        undo()
        await bridge.stop()
    return printed


def batch_replay(
    recording_path: str | Path,
    view: View,
    opts: Options,
    *,
    interval_s: float = 1.0,
    count: int | None = None,
    as_json: bool = False,
    salvage: bool = False,
    out: IO[str] = sys.stdout,
    limits: Limits | None = None,
) -> int:
    """The same output from a recording: a document for the first sample at least ``interval_s``
    of recorded time after the last one printed (a small interval prints every sample)."""
    from memtop.replay import Recording

    rec = Recording.load(recording_path, salvage=salvage, limits=limits)
    state = State(mode="replay")
    printed = 0
    last_ns: int | None = None
    # samples jitter around their interval: 5 % slack keeps a 1 s grid from skipping 0.99 s gaps
    step_ns = int(interval_s * 0.95e9)
    for b in rec.batches():
        state.apply(b)
        if last_ns is None:
            last_ns = b.ts_ns  # like live: the first output one interval in
            continue
        if b.ts_ns - last_ns >= step_ns:
            last_ns = b.ts_ns
            _emit(out, view, state, opts, as_json, _probe_line(state))
            printed += 1
            if count is not None and printed >= count:
                break
    return printed
