"""Front ends without Textual, all on the Runner: `memtop record`, `memtop --batch` (live and
from a recording) and `memtop snapshot` in JSON, text or a view's own format.

Each starts the source, states its intents (a pid in focus, allocations to trace), waits until the
probes are attached (or have failed), then ticks on the Runner's grid.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memtop import __version__
from memtop.core.errors import Interrupted
from memtop.headless.snapshots import SnapshotRequest, options_for, render_file, write
from memtop.headless.start import begin, stop_on_signals
from memtop.linux import files
from memtop.records import Record
from memtop.runtime import startup_gc
from memtop.state import State
from memtop.state.host import HostState
from memtop.stream.recording import Recorder, open_recorder
from memtop.stream.runner import Runner, wait_or_stop
from memtop.stream.source import Source
from memtop.views import Options, View, get_view, wall_ns
from memtop.views.header import host_text, probe_count, summary_line

if TYPE_CHECKING:
    from memtop.stream.recfile import Limits

#: a snapshot whose view waits for a first complete read (the drill-in's mappings) waits at most this
READY_WAIT_S = 10.0


@dataclass
class RecordResult:
    path: Path
    batches: int
    records: int
    duration_s: float
    size_bytes: int
    reason: str


#: (their names here before memtop.headless.start had them)
_stop_on_signals = stop_on_signals
_begin = begin


async def record(
    source: Source,
    output: str | Path,
    *,
    interval_s: float = 1.0,
    duration_s: float | None = None,
    force: bool = False,
    leak_pids: Sequence[int] = (),
    on_start: Callable[[Recorder], None] | None = None,
    on_tick: Callable[[Recorder], None] | None = None,
) -> RecordResult:
    """Record until ``duration_s`` is over or SIGINT/SIGTERM arrives; the file is complete either
    way. The target is checked before any probe loads, so a bad path fails at once."""
    files.check_target(output, force)
    stop = asyncio.Event()
    undo = _stop_on_signals(stop)
    runner = Runner(source, interval_s=interval_s)
    rec: Recorder | None = None
    reason = "duration"
    try:
        await _begin(runner, stop, None, leak_pids)
        statuses = list(source.statuses().values())
        facts = runner.state.get(HostState).facts
        prelude: list[Record] = [*statuses, *([facts] if facts is not None else [])]
        # the source published a first batch at start, before this recorder existed: carry its
        # probe statuses and host facts into the recording's first batch so a replay knows every
        # probe's fate and the machine it ran on
        rec = open_recorder(
            output, statuses, force=force, interval_s=interval_s, mode=source.mode, prelude=prelude
        )
        runner.subscribe(rec)
        if on_start is not None:
            on_start(rec)
        async for n in runner.ticks(stop):
            if on_tick is not None:
                on_tick(rec)
            if duration_s is not None and (n + 1) * interval_s > duration_s + 1e-9:
                break
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
            await runner.stop()
    assert rec is not None
    return RecordResult(rec.path, rec.batches, rec.records, rec.duration_s, rec.path.stat().st_size, reason)


async def snapshot(
    source: Source, req: SnapshotRequest, *, interval_s: float = 1.0, leak_pids: Sequence[int] = ()
) -> Path:
    """`memtop snapshot` in JSON, text or a view's own format: no Textual. Ctrl-C abandons it
    (Interrupted, exit 130); SIGTERM too."""
    view = get_view(req.pane)
    opts = options_for(view, req.pid, req.section)
    stop = asyncio.Event()
    undo = _stop_on_signals(stop)
    runner = Runner(source, interval_s=interval_s, checkpoints=False)
    try:
        await _begin(runner, stop, req.pid if view.sections else None, leak_pids, view.while_shown)
        after_s = req.after_s
        if req.working_set_s and req.pid is not None:  # the user's flag: one window, then write
            runner.source.measure_working_set(req.pid, True, req.working_set_s)
            after_s = max(after_s, req.working_set_s + 1.0)
        await runner.tick()
        # started: the collector held since the command line comes back (as an app's first frame
        # gives it back); held for a `--after 7200` snapshot, every cycle its polls made stayed and
        # its RssAnon grew 56 -> 250 MiB in 40 minutes of a busy machine's process churn
        startup_gc.release()
        deadline = time.monotonic() + after_s
        while not stop.is_set() and time.monotonic() < deadline:
            await wait_or_stop(stop, min(interval_s, max(0.0, deadline - time.monotonic())))
            await runner.tick()
        await runner.tick()
        # a view whose first complete read comes in parts (the drill-in's mappings) is waited for
        wait_until = time.monotonic() + (READY_WAIT_S if source.replay is None else 0.0)
        while not stop.is_set() and not view.ready(runner.state, opts) and time.monotonic() < wait_until:
            await wait_or_stop(stop, 0.1)
            await runner.tick()
        if stop.is_set():
            raise Interrupted(f"interrupted; {req.output} was not written")
        return write(req.output, render_file(view, runner.state, opts, req.fmt), req.force)
    finally:
        undo()
        await runner.stop()


def encodable(out: IO[str], text: str) -> str:
    """``text`` as ``out`` can encode it: what its encoding lacks (a non-ASCII process name on a
    stdout in ASCII or latin-1, LANG=C) becomes a backslash escape, as memtop.core.text shows control
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


def _emit(out: IO[str], view: View[Any], state: State, opts: Options, as_json: bool, probes: str) -> None:
    if as_json:
        line = json.dumps(view.document(state, opts), ensure_ascii=False, separators=(",", ":"))
        if encodable(out, line) != line:  # JSON's own escapes keep it valid and lossless
            line = json.dumps(view.document(state, opts), ensure_ascii=True, separators=(",", ":"))
        out.write(line + "\n")
    else:
        wall = wall_ns(state)  # the sample's own time (a replay's recorded one), not now
        stamp = time.strftime("%H:%M:%S", time.localtime(wall / 1e9 if wall is not None else None))
        host = host_text(state.get(HostState).facts)  # the recorded machine's, in a replay
        where = f"  {host}" if host else ""
        head = f"memtop {__version__} - {stamp}  pane {view.name}  source {state.mode}{where}  {probes}\n"
        summary = summary_line(state)  # top -b's second line: memory, swap, pressure
        head += f"{summary}\n" if summary else ""
        out.write(encodable(out, head + view.text(state, opts) + "\n"))
    out.flush()


def _probe_line(state: State) -> str:
    n = probe_count(state)
    text = f"probes {n.attached}/{n.total} attached"
    if n.failed:
        text += f" (failed: {', '.join(n.failed)})"
    if n.erroring:
        text += f" (erroring: {', '.join(n.erroring)})"
    return text


async def batch_live(
    source: Source,
    view: View[Any],
    opts: Options,
    *,
    interval_s: float = 1.0,
    count: int | None = None,
    as_json: bool = False,
    out: IO[str] = sys.stdout,
    leak_pids: Sequence[int] = (),
) -> int:
    """Print the pane every interval, like ``top -b``: text, or one JSON document per line. The
    first output comes one interval after the probes attach (rates need two samples)."""
    stop = asyncio.Event()
    undo = _stop_on_signals(stop)
    runner = Runner(source, interval_s=interval_s)
    printed = 0
    try:
        await _begin(runner, stop, None, leak_pids, view.while_shown)
        async for n in runner.ticks(stop):
            if n == 0:
                continue  # the first sample: rates need a second one
            _emit(out, view, runner.state, opts, as_json, _probe_line(runner.state))
            printed += 1
            if count is not None and printed >= count:
                break
    finally:
        undo()
        await runner.stop()
    return printed


def batch_replay(
    recording_path: str | Path,
    view: View[Any],
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
    of recorded time after the last one printed (a small interval prints every sample). The
    recording plays through the Runner as fast as it reads, sample by sample."""
    from memtop.stream.recfile import Recording
    from memtop.stream.replay import ReplaySource

    source = ReplaySource(Recording.load(recording_path, salvage=salvage, limits=limits), at_s=0)
    runner = Runner(source, interval_s=interval_s, checkpoints=False)
    printed = 0
    # samples jitter around their interval: 5 % slack keeps a 1 s grid from skipping 0.99 s gaps
    step_ns = int(interval_s * 0.95e9)
    index = source.recording.index
    last_ns = index[0]  # like live: the first output one interval in
    source.seek_ns(last_ns)
    for ts in index[1:]:
        source.seek_ns(ts)
        if ts - last_ns >= step_ns:
            last_ns = ts
            _emit(out, view, runner.state, opts, as_json, _probe_line(runner.state))
            printed += 1
            if count is not None and printed >= count:
                break
    source.close()
    return printed
