"""Replay: a recording as a :class:`~memtop.bridge.Source` (mode ``"replay"``).

:class:`Recording` validates a file once (header, every line, the end line) and keeps only the
timestamp of each batch, so memory stays small whatever the length; batches are decoded again,
streaming, whenever they are needed. Records of kinds this version does not know are skipped and
counted; fields it does not know are ignored; missing optional ones take their defaults
(:func:`decode_record`, the same rules as :func:`memtop.records.from_json`).

:class:`ReplaySource` plays the batches against the clock (``speed`` × real time), and can pause,
step one batch, jump and go to a time. State is pure, so going back means starting again: the
subscribers are told to reset (``on_reset``) and the batches up to the target are applied again.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import time
import typing
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memtop.errors import BadRecording
from memtop.recording import MAGIC, SCHEMA
from memtop.records import KIND_KEY, RECORD_TYPES, Batch, Record, _tupled

if TYPE_CHECKING:  # the UI imports this module: no probe behind it
    from memtop.probes.base import Probe

Subscriber = Callable[[Batch], None]

GZIP_MAGIC = b"\x1f\x8b"


def _one_line(text: str, limit: int = 120) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Skipped:
    """What loading left out: records of unknown kinds (by kind), malformed records, unknown lines."""

    kinds: Counter[str] = field(default_factory=Counter)
    malformed: int = 0
    lines: int = 0

    @property
    def total(self) -> int:
        return sum(self.kinds.values()) + self.malformed

    def describe(self) -> str:
        parts = [f"{n} {k!r}" for k, n in sorted(self.kinds.items())]
        if self.malformed:
            parts.append(f"{self.malformed} malformed")
        return ", ".join(parts)


class Recording:
    """A validated recording file. Use :meth:`load`."""

    def __init__(
        self,
        path: Path,
        header: dict[str, Any],
        index: list[int],
        skipped: Skipped,
        end: dict[str, Any] | None,
        truncated: bool,
    ) -> None:
        self.path = path
        self.header = header
        #: ts_ns of every batch, in order (the only per-batch thing kept in memory)
        self.index = index
        self.skipped = skipped
        self.end = end
        #: loaded with salvage=True from a file that was cut short
        self.truncated = truncated

    # -- loading ----------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path, *, salvage: bool = False) -> Recording:
        """Read and check the whole file. Every problem is a one-line :class:`BadRecording`.

        ``salvage``: a file cut short (the recorder was killed) loads up to its last whole batch."""
        p = Path(path)
        header: dict[str, Any] | None = None
        index: list[int] = []
        skipped = Skipped()
        end: dict[str, Any] | None = None
        truncated = False
        lineno = 0
        try:
            with _open(p) as f:
                line_iter = iter(f)
                while True:
                    try:
                        raw = next(line_iter)
                    except StopIteration:
                        break
                    except EOFError:
                        if not salvage:
                            raise BadRecording(
                                f"{p} is truncated after {len(index)} batches"
                                + (f" ({(index[-1] - index[0]) / 1e9:.1f} s)" if index else "")
                                + "; --salvage replays those",
                            ) from None
                        truncated = True
                        break
                    lineno += 1
                    if lineno == 1:
                        header = _check_header(p, raw)
                        continue
                    if not raw.endswith("\n"):
                        # a last line without its newline: cut in the middle of a write
                        if not salvage:
                            raise BadRecording(
                                f"{p} is truncated in line {lineno}; --salvage replays the batches before it"
                            )
                        truncated = True
                        break
                    obj = _parse(p, raw, lineno)
                    if "ts_ns" in obj:
                        ts = obj["ts_ns"]
                        recs = obj.get("records")
                        if not isinstance(ts, int) or isinstance(ts, bool) or not isinstance(recs, list):
                            raise BadRecording(f"{p} is corrupt: line {lineno} is not a valid batch")
                        if index and ts < index[-1]:
                            raise BadRecording(f"{p} is corrupt: time goes backwards in line {lineno}")
                        for r in recs:
                            _check_record(r, skipped)
                        index.append(ts)
                    elif "end" in obj and isinstance(obj["end"], dict):
                        end = obj["end"]
                    else:
                        skipped.lines += 1  # a line type from a newer minor version
        except BadRecording:
            raise
        except FileNotFoundError:
            raise BadRecording(f"{p}: no such file") from None
        except IsADirectoryError:
            raise BadRecording(f"{p} is a directory, not a recording") from None
        except PermissionError:
            raise BadRecording(f"{p}: permission denied") from None
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise BadRecording(f"{p} is corrupt (compressed data: {_one_line(str(exc), 60)})") from None
        except UnicodeDecodeError:
            raise BadRecording(f"{p} is corrupt (not UTF-8 text in line {lineno + 1})") from None
        except OSError as exc:
            raise BadRecording(f"cannot read {p}: {_one_line(exc.strerror or str(exc), 60)}") from None
        if header is None:
            raise BadRecording(f"{p} is empty, not a memtop recording")
        if end is not None:
            n = end.get("batches")
            if isinstance(n, int) and n != len(index):
                raise BadRecording(f"{p} is corrupt: its end line says {n} batches, it holds {len(index)}")
        return cls(p, header, index, skipped, end, truncated)

    # -- reading ----------------------------------------------------------------------------------
    def batches(self, start: int = 0) -> Iterator[Batch]:
        """Decode batches from number ``start`` on (streaming, from the file)."""
        n = -1
        with _open(self.path) as f:
            lines = iter(f)
            try:
                next(lines)  # header
                for raw in lines:
                    if not raw.endswith("\n"):
                        return
                    obj = json.loads(raw)
                    if not isinstance(obj, dict) or "ts_ns" not in obj:
                        continue
                    n += 1
                    if n < start:
                        continue
                    if n >= len(self.index):
                        return
                    yield Batch(ts_ns=obj["ts_ns"], records=_decode(obj["records"]))
            except EOFError:
                return  # salvaged file: the index stops before the cut

    @property
    def schema(self) -> tuple[int, int]:
        s = self.header.get("schema", [0, 0])
        return int(s[0]), int(s[1])

    @property
    def first_ts_ns(self) -> int:
        return self.index[0] if self.index else 0

    @property
    def last_ts_ns(self) -> int:
        return self.index[-1] if self.index else 0

    @property
    def duration_s(self) -> float:
        return (self.last_ts_ns - self.first_ts_ns) / 1e9

    @property
    def interval_s(self) -> float:
        """The recorded poll interval (header), else the median gap between batches."""
        v = self.header.get("interval_s")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            return float(v)
        gaps = sorted(b - a for a, b in zip(self.index, self.index[1:], strict=False))
        return gaps[len(gaps) // 2] / 1e9 if gaps else 1.0

    def wall_time(self, ts_ns: int) -> float | None:
        """Wall-clock seconds (epoch) of a batch timestamp, from the header's two start clocks."""
        wall = self.header.get("start_wall_ns")
        mono = self.header.get("start_monotonic_ns")
        if isinstance(wall, int) and isinstance(mono, int):
            return (wall + (ts_ns - mono)) / 1e9
        return None

    def ts_at(self, seconds: float) -> int:
        """The absolute timestamp ``seconds`` after the first batch."""
        return self.first_ts_ns + int(round(seconds * 1e9))

    def describe(self) -> str:
        h = self.header
        probes = h.get("probes") if isinstance(h.get("probes"), dict) else {}
        assert isinstance(probes, dict)
        failed = [f.get("probe", "?") for f in probes.get("failed", []) if isinstance(f, dict)]
        out = (
            f"{self.path}: {len(self.index)} batches, {self.duration_s:.1f} s, recorded on "
            f"{h.get('hostname', '?')} (kernel {h.get('kernel', '?')}) at {h.get('start_wall', '?')} "
            f"by memtop {h.get('memtop', '?')}, schema {self.schema[0]}.{self.schema[1]}"
        )
        if probes.get("attached"):
            out += f"; probes: {', '.join(map(str, probes['attached']))}"
        if failed:
            out += f"; could not run: {', '.join(map(str, failed))}"
        if self.skipped.total:
            out += f"; skipped records: {self.skipped.describe()}"
        if self.truncated:
            out += "; cut short (salvaged)"
        return out

    def state_at(self, ts_ns: int, mode: str = "replay") -> Any:
        """A fresh :class:`~memtop.state.State` fed every batch up to ``ts_ns`` (inclusive)."""
        from memtop.state import State

        state = State(mode=mode)
        for b in self.batches():
            if b.ts_ns > ts_ns:
                break
            state.apply(b)
        return state


def _open(p: Path) -> IO[str]:
    """Text lines of a gzip file (or of a plain one, for hand-made recordings)."""
    with open(p, "rb") as raw:
        magic = raw.read(2)
    if magic == GZIP_MAGIC:
        return gzip.open(p, "rt", encoding="utf-8", newline="\n")
    return open(p, encoding="utf-8", newline="\n")


def _parse(p: Path, raw: str, lineno: int) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except ValueError:
        raise BadRecording(f"{p} is corrupt: line {lineno} is not JSON") from None
    if not isinstance(obj, dict):
        raise BadRecording(f"{p} is corrupt: line {lineno} is not a JSON object")
    return obj


def _check_header(p: Path, raw: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except ValueError:
        obj = None
    if not isinstance(obj, dict) or obj.get("magic") != MAGIC:
        raise BadRecording(f"{p} is not a memtop recording (no {MAGIC!r} header)")
    schema = obj.get("schema")
    if (
        not isinstance(schema, list)
        or len(schema) < 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in schema[:2])
    ):
        raise BadRecording(f"{p} is corrupt: its header has no valid schema version")
    if schema[0] > SCHEMA[0]:
        raise BadRecording(
            f"{p} was recorded with schema {schema[0]}.{schema[1]}, newer than this memtop reads "
            f"({SCHEMA[0]}.x); replay it with memtop {_one_line(str(obj.get('memtop', '?')), 20)} or newer"
        )
    if schema[0] < 1:
        raise BadRecording(f"{p} has an unknown schema version {schema[0]}.{schema[1]}")
    return obj


def _check_record(r: Any, skipped: Skipped) -> None:
    if not isinstance(r, dict):
        skipped.malformed += 1
        return
    kind = r.get(KIND_KEY)
    if not isinstance(kind, str):
        skipped.malformed += 1
    elif kind not in RECORD_TYPES:
        skipped.kinds[kind] += 1
    else:
        try:
            decode_record(r)
        except (ValueError, TypeError):
            skipped.malformed += 1


_Plan = tuple[type[Record], tuple[tuple[str, Any, bool], ...]]
_PLANS: dict[str, _Plan] = {}


def _plan(kind: str) -> _Plan:
    """Per record kind: (class, ((field, type hint, required), ...)), computed once."""
    plan = _PLANS.get(kind)
    if plan is None:
        cls = RECORD_TYPES[kind]
        hints = typing.get_type_hints(cls)
        fields = tuple(
            (
                f.name,
                hints.get(f.name),
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        )
        plan = _PLANS[kind] = (cls, fields)
    return plan


def decode_record(data: dict[str, Any]) -> Record:
    """:func:`memtop.records.from_json`, same result, several times faster: a replay decodes every
    record again on each seek backwards. Unknown fields are ignored, missing optional ones take
    their defaults; an unknown kind or a missing required field raises ``ValueError``."""
    kind = data.get(KIND_KEY)
    if not isinstance(kind, str) or kind not in RECORD_TYPES:
        raise ValueError(f"unknown record kind {kind!r}")
    cls, fields = _plan(kind)
    kwargs: dict[str, Any] = {}
    for name, hint, required in fields:
        if name in data:
            v = data[name]
            kwargs[name] = _tupled(v, hint) if isinstance(v, list) else v
        elif required:
            raise ValueError(f"record {kind!r} lacks field {name!r}")
    return cls(**kwargs)


def _decode(recs: list[Any]) -> tuple[Record, ...]:
    out: list[Record] = []
    for r in recs:
        if isinstance(r, dict) and r.get(KIND_KEY) in RECORD_TYPES:
            try:
                out.append(decode_record(r))
            except (ValueError, TypeError):
                continue
    return tuple(out)


class ReplaySource:
    """A recording played back as a source. Position ``pos_ns`` is on the recording's own clock
    (CLOCK_MONOTONIC of the machine that recorded); every batch with ``ts_ns <= pos_ns`` has been
    handed to the subscribers."""

    mode = "replay"
    bpf_error = None

    def __init__(
        self, recording: Recording, *, speed: float = 1.0, at_s: float | None = None, playing: bool = True
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
        self._iter: Iterator[Batch] | None = None
        self.applied = 0  # batches handed out since the last reset
        self.pos_ns = recording.first_ts_ns
        self._wall: float | None = None

    # -- Source protocol ----------------------------------------------------------------------------
    def subscribe(self, fn: Subscriber) -> None:
        self._subs.append(fn)

    def on_reset(self, fn: Callable[[], None]) -> None:
        """``fn`` is called before batches are applied again from the start (a seek backwards)."""
        self._resets.append(fn)

    async def start(self) -> None:
        target = self.recording.first_ts_ns
        if self._start_at is not None:
            target = self.recording.ts_at(self._start_at)
        self.seek_ns(target)
        self._wall = time.monotonic()

    async def poll(self) -> Batch | None:
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

    async def stop(self) -> None:
        self._close_iter()

    def add_probe(self, probe: Probe) -> bool:
        return False  # nothing can attach to the past

    def remove_probe(self, name: str) -> None:
        return None

    def standin_headers(self) -> str | None:
        return None  # the recording's host, not this one, compiled its programs

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
        if self.applied and target < rec.index[self.applied - 1]:
            self._close_iter()
            self.applied = 0
            for fn in self._resets:
                fn()
        self._advance(target)
        self.pos_ns = target
        self._wall = time.monotonic()

    # -- internals ----------------------------------------------------------------------------------
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
        self.pos_ns = max(self.pos_ns, target)
        return last

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
        host = self.recording.header.get("hostname")
        if isinstance(host, str) and host:
            text += f" on {host}"
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
