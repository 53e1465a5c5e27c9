"""Replay: a recording as a :class:`~memtop.bridge.Source` (mode ``"replay"``).

A recording is untrusted input. :class:`Recording` validates a file once (header, every line, the
end line) within :class:`Limits` (line length, records per sample, number of samples,
decompressed size: a one-line :class:`~memtop.errors.BadRecording` names the limit and the
``--limit`` flag that raises it), and keeps only the timestamp of each batch plus a reading
position every :data:`POSITION_EVERY` batches, so memory stays small whatever the length;
batches are decoded again, streaming from the nearest position, whenever they are needed.

Every record is checked against its type hints (:func:`memtop.records.from_json`): ints within
int64/uint64, finite floats (JSON's NaN and Infinity, which Python's json accepts, are refused), bounded strings made
printable as a probe makes them (:func:`memtop.text.clean`), so nothing from a file reaches the
terminal raw. Records of kinds this version does not know are skipped and counted, so are
malformed ones; fields it does not know are ignored; missing optional ones take their defaults.

:class:`ReplaySource` plays the batches against the clock (``speed`` × real time), and can pause,
step one batch, jump and go to a time. State is pure, so going back means starting again from a
*checkpoint*: a copy of the subscribers' state taken every ``checkpoint_every`` batches as the
replay moves forwards, so a seek applies at most that many batches (see :meth:`ReplaySource.seek_ns`).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
import lzma
import math
import pickle
import re
import time
import zlib
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from memtop.errors import BadRecording
from memtop.recording import MAGIC, SCHEMA
from memtop.records import INT_MAX, KIND_KEY, RECORD_TYPES, Batch, ProbeStatus, Record, from_json
from memtop.records.host import HostFacts
from memtop.records.process import Focus
from memtop.source import Subscriber
from memtop.text import clean

GZIP_MAGIC = b"\x1f\x8b"
#: decompressed bytes handed on per read (also the most a reading position holds of them)
CHUNK_BYTES = 64 << 10
#: a reading position (a place to start decoding from) is kept every this many batches
POSITION_EVERY = 32
#: distinct unknown record kinds counted by name (more are counted together)
MAX_KIND_NAMES = 64


# -- limits -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Limits:
    """What a recording may hold before it is refused (each raised with ``--limit NAME=VALUE``).

    A line is parsed whole, so its length bounds the memory one sample takes (a crafted line costs
    up to ~25× its length in Python objects); the record and sample counts bound what is decoded
    and indexed, the decompressed size bounds the time a load takes (a gzip bomb)."""

    line_bytes: int = 4 << 20
    records: int = 100_000
    samples: int = 1_000_000
    size_bytes: int = 8 << 30


#: --limit NAME: (field of Limits, is a size in bytes, what it bounds)
LIMIT_NAMES: dict[str, tuple[str, bool, str]] = {
    "line": ("line_bytes", True, "bytes per line"),
    "records": ("records", False, "records per sample"),
    "samples": ("samples", False, "samples"),
    "size": ("size_bytes", True, "decompressed bytes"),
}
_SIZE = re.compile(r"(\d+)\s*([kmgt]?)(i?b)?", re.IGNORECASE)


def parse_limit(text: str) -> tuple[str, int]:
    """``line=8M`` → ("line_bytes", 8 MiB). ValueError with the reason otherwise."""
    name, sep, value = text.partition("=")
    name = name.strip().lower()
    if not sep or name not in LIMIT_NAMES:
        raise ValueError(f"not NAME=VALUE with NAME one of {', '.join(LIMIT_NAMES)}: {text!r}")
    attr, is_size, _ = LIMIT_NAMES[name]
    m = _SIZE.fullmatch(value.strip())
    if m is None or (not is_size and (m.group(2) or m.group(3))):
        raise ValueError(f"not a {'size (e.g. 16M, 2G)' if is_size else 'count'}: {value!r}")
    n = int(m.group(1)) << (10 * "_kmgt".index(m.group(2).lower() or "_"))
    if n <= 0:
        raise ValueError(f"a limit must be positive: {text!r}")
    return attr, n


def limits_from(specs: list[str] | None) -> Limits:
    """Limits with every ``NAME=VALUE`` of ``specs`` applied (ValueError for a bad one)."""
    changes = dict(parse_limit(s) for s in specs or [])
    return dataclasses.replace(Limits(), **changes)


def _size_h(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}iB"
    return f"{n} bytes"


def _over(p: Path, what: str, limit: int, name: str) -> BadRecording:
    _, is_size, _ = LIMIT_NAMES[name]
    shown = _size_h(limit) if is_size else f"{limit:,} {name}"
    unit = "SIZE" if is_size else "N"
    return BadRecording(f"{p}: {what} over {shown} (the {name} limit; raise it with --limit {name}={unit})")


# -- reading lines --------------------------------------------------------------------------------------
@dataclass
class Position:
    """Where reading can start again: the raw file offset, a copy of the decompressor there, the
    decompressed bytes already taken from the file but not yet read as lines."""

    offset: int
    inflater: Any  # zlib.Decompress, or None for a plain file
    pending: bytes
    total: int
    lineno: int


class LineReader:
    """Lines of a recording (gzip, or plain text for hand-made files) as bytes, never one longer
    than ``limits.line_bytes`` nor more than ``limits.size_bytes`` in all (:class:`BadRecording`);
    a gzip stream that stops before its end raises EOFError (a recording cut short)."""

    def __init__(self, path: Path, limits: Limits, start: Position | None = None) -> None:
        self.path = path
        self.limits = limits
        self.f: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed by close()
        try:
            if start is None:
                gz = self.f.read(2) == GZIP_MAGIC
                self.f.seek(0)
                self.inflater: Any = zlib.decompressobj(31) if gz else None
                self.buf, self.total, self.lineno = b"", 0, 0
            else:
                self.f.seek(start.offset)
                self.inflater = start.inflater.copy() if start.inflater is not None else None
                self.buf, self.total, self.lineno = start.pending, start.total, start.lineno
        except BaseException:
            self.f.close()
            raise
        self.pos = 0

    def close(self) -> None:
        self.f.close()

    def __enter__(self) -> LineReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def position(self) -> Position:
        """Where the next :meth:`readline` starts (copies the decompressor: ~40 KiB)."""
        inflater = self.inflater.copy() if self.inflater is not None else None
        return Position(self.f.tell(), inflater, self.buf[self.pos :], self.total, self.lineno)

    def readline(self) -> bytes:
        """The next line with its newline; the last one may lack it; b"" at the end."""
        parts: list[bytes] = []
        size = 0
        limit = self.limits.line_bytes
        while True:
            i = self.buf.find(b"\n", self.pos)
            if i >= 0:
                piece = self.buf[self.pos : i + 1]
                self.pos = i + 1
                if size + len(piece) > limit + 1:  # + its newline
                    raise _over(self.path, f"line {self.lineno + 1} is", limit, "line")
                self.lineno += 1
                return b"".join(parts) + piece if parts else piece
            rest = self.buf[self.pos :]
            size += len(rest)
            if size > limit:
                raise _over(self.path, f"line {self.lineno + 1} is", limit, "line")
            if rest:
                parts.append(rest)
            self.buf, self.pos = self._more(), 0
            if not self.buf:
                if parts:
                    self.lineno += 1
                return b"".join(parts)

    def _more(self) -> bytes:
        data = self._inflate() if self.inflater is not None else self.f.read(CHUNK_BYTES)
        self.total += len(data)
        if self.total > self.limits.size_bytes:
            raise _over(self.path, "it decompresses to", self.limits.size_bytes, "size")
        return data

    def _inflate(self) -> bytes:
        while True:
            d = self.inflater
            if d.eof:  # a gzip member ended: another may follow (concatenated files)
                data = d.unused_data or self.f.read(CHUNK_BYTES)
                if not data:
                    return b""
                self.inflater = d = zlib.decompressobj(31)
            else:
                data = d.unconsumed_tail or self.f.read(CHUNK_BYTES)
                if not data:
                    raise EOFError("compressed file ended before the end-of-stream marker")
            out = d.decompress(data, CHUNK_BYTES)
            if out:
                return bytes(out)


# -- decoding -------------------------------------------------------------------------------------------
def _decode(recs: list[Any]) -> tuple[Record, ...]:
    out: list[Record] = []
    for r in recs:
        if type(r) is dict and r.get(KIND_KEY) in RECORD_TYPES:
            try:
                out.append(from_json(r))
            except ValueError:
                continue  # counted when the recording was loaded
    return tuple(out)


@dataclass
class Skipped:
    """What loading left out: records of unknown kinds (by kind), malformed records, unknown lines."""

    kinds: Counter[str] = field(default_factory=Counter)
    malformed: int = 0
    lines: int = 0

    @property
    def total(self) -> int:
        return sum(self.kinds.values()) + self.malformed

    def count_kind(self, kind: str) -> None:
        name = clean(kind, 40)
        if name not in self.kinds and len(self.kinds) >= MAX_KIND_NAMES:
            name = "(other kinds)"  # a crafted file's million kinds must not grow memory
        self.kinds[name] += 1

    def describe(self) -> str:
        parts = [f"{n} {k!r}" for k, n in sorted(self.kinds.items())]
        if self.malformed:
            parts.append(f"{self.malformed} malformed")
        return ", ".join(parts)


def _one_line(text: str, limit: int = 120) -> str:
    text = " ".join(clean(str(text)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@contextlib.contextmanager
def _read_errors(p: Path) -> Iterator[None]:
    """What reading ``p`` can raise, as a one-line :class:`BadRecording`."""
    try:
        yield
    except BadRecording:
        raise
    except FileNotFoundError:
        raise BadRecording(f"{p}: no such file") from None
    except IsADirectoryError:
        raise BadRecording(f"{p} is a directory, not a recording") from None
    except PermissionError:
        raise BadRecording(f"{p}: permission denied") from None
    except zlib.error as exc:
        raise BadRecording(f"{p} is corrupt (compressed data: {_one_line(str(exc), 60)})") from None
    except OSError as exc:
        raise BadRecording(f"cannot read {p}: {_one_line(exc.strerror or str(exc), 60)}") from None


class _Scan:
    """One pass over a recording file for :meth:`Recording.load`: the header, every batch's time
    and reading positions, the end line, and what was skipped, each line checked as it comes."""

    def __init__(self, p: Path, limits: Limits, salvage: bool) -> None:
        self.p = p
        self.limits = limits
        self.salvage = salvage
        self.header: dict[str, Any] | None = None
        self.index: list[int] = []
        self.positions: list[Position] = []
        self.skipped = Skipped()
        self.end: dict[str, Any] | None = None
        self.truncated = False
        self.has_facts = False

    def run(self) -> None:
        p, index = self.p, self.index
        lineno = 0
        with LineReader(p, self.limits) as reader:
            while True:
                # a position for batch k*POSITION_EVERY: taken before every line until that
                # batch's line is found (other line types may come first)
                here = reader.position() if len(index) == len(self.positions) * POSITION_EVERY else None
                try:
                    raw = reader.readline()
                except EOFError:
                    self._cut(
                        f"{p} is truncated after {len(index)} batches"
                        + (f" ({(index[-1] - index[0]) / 1e9:.1f} s)" if index else "")
                        + "; --salvage replays those",
                    )
                    return
                if not raw:
                    return
                lineno += 1
                if lineno == 1:
                    self.header = _check_header(p, raw)
                    continue
                if not raw.endswith(b"\n"):
                    # a last line without its newline: cut in the middle of a write
                    self._cut(f"{p} is truncated in line {lineno}; --salvage replays the batches before it")
                    return
                self._line(_parse(p, raw, lineno, self.limits), lineno, here)

    def _cut(self, message: str) -> None:
        """The file ends mid-write: salvaged up to here, or a BadRecording saying ``message``."""
        if not self.salvage:
            raise BadRecording(message)
        self.truncated = True

    def _line(self, obj: dict[str, Any], lineno: int, here: Position | None) -> None:
        if "ts_ns" in obj:
            self._batch(obj, lineno, here)
        elif "end" in obj and type(obj["end"]) is dict:
            self.end = obj["end"]
        else:
            self.skipped.lines += 1  # a line type from a newer minor version

    def _batch(self, obj: dict[str, Any], lineno: int, here: Position | None) -> None:
        p, index, limits = self.p, self.index, self.limits
        ts = obj["ts_ns"]
        recs = obj.get("records")
        if type(ts) is not int or not 0 <= ts <= INT_MAX or type(recs) is not list:
            raise BadRecording(f"{p} is corrupt: line {lineno} is not a valid batch")
        if index and ts < index[-1]:
            raise BadRecording(f"{p} is corrupt: time goes backwards in line {lineno}")
        if len(recs) > limits.records:
            raise _over(p, f"the sample in line {lineno} holds", limits.records, "records")
        if len(index) >= limits.samples:
            raise _over(p, "it holds", limits.samples, "samples")
        for r in recs:
            _check_record(r, self.skipped)
        if not index:
            self.has_facts = any(type(r) is dict and r.get(KIND_KEY) == HostFacts.KIND for r in recs)
        if here is not None:
            self.positions.append(here)
        index.append(ts)


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
        positions: list[Position] | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.path = path
        #: the header line; the fields memtop shows are checked and printable (others as read)
        self.header = header
        #: ts_ns of every batch, in order (with ``positions``, all that is kept per batch)
        self.index = index
        self.skipped = skipped
        self.end = end
        #: loaded with salvage=True from a file that was cut short
        self.truncated = truncated
        #: where batch ``k * POSITION_EVERY`` starts (its line is the next read from there)
        self.positions = positions or []
        self.limits = limits or Limits()
        #: host facts made from the header, put in front of the first batch, for a recording
        #: whose first batch has none (made before memtop recorded them): see :meth:`load`
        self.synthetic_facts: HostFacts | None = None

    # -- loading ----------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path, *, salvage: bool = False, limits: Limits | None = None) -> Recording:
        """Read and check the whole file. Every problem is a one-line :class:`BadRecording`.

        ``salvage``: a file cut short (the recorder was killed) loads up to its last whole batch."""
        p = Path(path)
        scan = _Scan(p, limits or Limits(), salvage)
        with _read_errors(p):
            scan.run()
        if scan.header is None:
            raise BadRecording(f"{p} is empty, not a memtop recording")
        if scan.end is not None:
            n = scan.end.get("batches")
            if type(n) is int and n != len(scan.index):
                raise BadRecording(
                    f"{p} is corrupt: its end line says {n} batches, it holds {len(scan.index)}"
                )
        rec = cls(
            p, scan.header, scan.index, scan.skipped, scan.end, scan.truncated, scan.positions, scan.limits
        )
        if not scan.has_facts:
            rec.synthetic_facts = _facts_from_header(scan.header)
        return rec

    # -- reading ----------------------------------------------------------------------------------
    def batches(self, start: int = 0) -> Iterator[Batch]:
        """Decode batches from number ``start`` on (streaming, from the nearest reading position:
        at most POSITION_EVERY lines are read to get to ``start``). A file changed since it was
        loaded ends the iteration early rather than raising. A recording whose first batch has
        no host facts gets them made from its header (:attr:`synthetic_facts`)."""
        if start >= len(self.index):
            return
        k = min(start // POSITION_EVERY, len(self.positions) - 1)
        if k < 0:
            return
        n = k * POSITION_EVERY - 1
        try:
            with LineReader(self.path, self.limits, self.positions[k]) as reader:
                while n + 1 < len(self.index):
                    raw = reader.readline()
                    if not raw.endswith(b"\n"):
                        return
                    obj = _loads(raw)
                    if type(obj) is not dict or "ts_ns" not in obj:
                        continue
                    ts, recs = obj["ts_ns"], obj.get("records")
                    if type(ts) is not int or type(recs) is not list:
                        return
                    n += 1
                    if n >= start:
                        records = _decode(recs)
                        if n == 0 and self.synthetic_facts is not None:
                            records = (self.synthetic_facts, *records)
                        yield Batch(ts_ns=ts, records=records)
        except (EOFError, OSError, zlib.error, BadRecording, ValueError, RecursionError):
            return  # salvaged file (the index stops before the cut), or the file changed

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
        if isinstance(v, float):  # checked when loaded
            return v
        gaps = sorted(b - a for a, b in zip(self.index, self.index[1:], strict=False))
        return gaps[len(gaps) // 2] / 1e9 if gaps else 1.0

    def wall_time(self, ts_ns: int) -> float | None:
        """Wall-clock seconds (epoch) of a batch timestamp, from the header's two start clocks."""
        wall = self.header.get("start_wall_ns")
        mono = self.header.get("start_monotonic_ns")
        if type(wall) is int and type(mono) is int:
            t = (wall + (ts_ns - mono)) / 1e9
            if 0 <= t < 1e11:  # time.localtime() refuses what a crafted header could give
                return t
        return None

    def ts_at(self, seconds: float) -> int:
        """The absolute timestamp ``seconds`` after the first batch."""
        return self.first_ts_ns + int(round(seconds * 1e9))

    def describe(self) -> str:
        h = self.header
        probes = h.get("probes") or {}
        failed = [f["probe"] for f in probes.get("failed", [])]
        out = (
            f"{self.path}: {len(self.index)} batches, {self.duration_s:.1f} s, recorded on "
            f"{h.get('hostname', '?')} (kernel {h.get('kernel', '?')}) at {h.get('start_wall', '?')} "
            f"by memtop {h.get('memtop', '?')}, schema {self.schema[0]}.{self.schema[1]}"
        )
        if probes.get("attached"):
            out += f"; probes: {', '.join(probes['attached'])}"
        if failed:
            out += f"; could not run: {', '.join(failed)}"
        facts = self.first_facts()
        if facts is not None and facts.headers_kind == "standin":
            out += f"; BPF compiled against stand-in headers {_one_line(facts.headers_version, 60)}"
        if facts is not None and facts.bpf_error:
            out += f"; BPF unavailable: {_one_line(facts.bpf_error, 200)}"
        if self.skipped.total:
            out += f"; skipped records: {self.skipped.describe()}"
        if self.truncated:
            out += "; cut short (salvaged)"
        return out

    def first_facts(self) -> HostFacts | None:
        """The host facts of the first sample (for a recording older than them, made from its
        header line); None if it has none."""
        for batch in self.batches():
            found = [r for r in batch.records if isinstance(r, HostFacts)]
            return found[-1] if found else None
        return None

    def state_at(self, ts_ns: int, mode: str = "replay") -> Any:
        """A fresh :class:`~memtop.state.State` fed every batch up to ``ts_ns`` (inclusive)."""
        from memtop.state import State

        state = State(mode=mode)
        for b in self.batches():
            if b.ts_ns > ts_ns:
                break
            state.apply(b)
        return state


def _facts_from_header(header: dict[str, Any]) -> HostFacts | None:
    """What a recording older than host-facts records knows of its machine: the header's kernel
    release and host name (checked and printable, see _clean_header); nothing of its headers."""
    kernel, host = header.get("kernel"), header.get("hostname")
    if type(kernel) is not str and type(host) is not str:
        return None
    wall, mono = header.get("start_wall_ns"), header.get("start_monotonic_ns")
    return HostFacts(
        kernel_release=kernel if type(kernel) is str else "",
        hostname=host if type(host) is str else "",
        wall_minus_monotonic_ns=wall - mono if type(wall) is int and type(mono) is int and wall > mono else 0,
    )


def _loads(raw: bytes) -> Any:
    """JSON from one line, strict UTF-8. Python's json takes NaN and Infinity (and 1e400 becomes
    inf): every float field is checked finite, so none gets in."""
    return json.loads(raw.decode("utf-8"))


def _parse(p: Path, raw: bytes, lineno: int, limits: Limits) -> dict[str, Any]:
    # each record is one JSON object: more "{" than the limit allows is refused before parsing
    # (parsing is where a crafted line's memory goes)
    if raw.count(b"{") > limits.records + 8:
        raise _over(p, f"the sample in line {lineno} holds", limits.records, "records")
    try:
        obj = _loads(raw)
    except UnicodeDecodeError:
        raise BadRecording(f"{p} is corrupt (not UTF-8 text in line {lineno})") from None
    except RecursionError:
        raise BadRecording(f"{p} is corrupt: line {lineno} is nested too deeply") from None
    except ValueError:
        raise BadRecording(f"{p} is corrupt: line {lineno} is not JSON") from None
    if type(obj) is not dict:
        raise BadRecording(f"{p} is corrupt: line {lineno} is not a JSON object")
    return obj


def _check_header(p: Path, raw: bytes) -> dict[str, Any]:
    try:
        obj = _loads(raw)
    except (ValueError, RecursionError):
        obj = None
    if type(obj) is not dict or obj.get("magic") != MAGIC:
        raise BadRecording(f"{p} is not a memtop recording (no {MAGIC!r} header)")
    schema = obj.get("schema")
    if (
        type(schema) is not list
        or len(schema) < 2
        or not all(type(v) is int and 0 <= v <= INT_MAX for v in schema[:2])
    ):
        raise BadRecording(f"{p} is corrupt: its header has no valid schema version")
    if schema[0] > SCHEMA[0]:
        raise BadRecording(
            f"{p} was recorded with schema {schema[0]}.{schema[1]}, newer than this memtop reads "
            f"({SCHEMA[0]}.x); replay it with memtop {_one_line(str(obj.get('memtop', '?')), 20)} or newer"
        )
    if schema[0] < 1:
        raise BadRecording(f"{p} has an unknown schema version {schema[0]}.{schema[1]}")
    return _clean_header(obj)


_HEADER_TEXT = ("memtop", "kernel", "hostname", "start_wall", "mode")
_HEADER_INTS = ("start_wall_ns", "start_monotonic_ns")


def _clean_header(obj: dict[str, Any]) -> dict[str, Any]:
    """The header with the fields memtop shows checked and printable: a field of the wrong type is
    dropped (as if absent), strings are cleaned and cut, the probe summary rebuilt."""
    out = dict(obj)
    out["schema"] = obj["schema"][:2]
    for key in _HEADER_TEXT:
        v = out.pop(key, None)
        if type(v) is str:
            out[key] = _one_line(v, 120)
    for key in _HEADER_INTS:
        v = out.pop(key, None)
        if type(v) is int and 0 <= v <= INT_MAX:
            out[key] = v
    v = out.pop("interval_s", None)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
        out["interval_s"] = float(v)
    probes = out.pop("probes", None)
    if type(probes) is dict:
        out["probes"] = {
            "attached": [_one_line(a, 40) for a in _list(probes.get("attached")) if type(a) is str],
            "failed": [
                {
                    k: _one_line(f[k], 200) if type(f.get(k)) is str else ""
                    for k in ("probe", "message", "hint")
                }
                for f in _list(probes.get("failed"))
                if type(f) is dict
            ],
            "other": [
                {k: _one_line(f[k], 40) if type(f.get(k)) is str else "" for k in ("probe", "state")}
                for f in _list(probes.get("other"))
                if type(f) is dict
            ],
        }
    return out


def _list(v: Any, limit: int = 256) -> list[Any]:
    return v[:limit] if type(v) is list else []


def _check_record(r: Any, skipped: Skipped) -> None:
    if type(r) is not dict:
        skipped.malformed += 1
        return
    kind = r.get(KIND_KEY)
    if type(kind) is not str:
        skipped.malformed += 1
    elif kind not in RECORD_TYPES:
        skipped.count_kind(kind)
    else:
        try:
            from_json(r)
        except ValueError:
            skipped.malformed += 1


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

    def watch(self, probes: Collection[str] | None) -> None:
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
