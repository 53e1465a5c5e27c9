"""Records: the only currency between layers.

Every record is a frozen, slotted dataclass of plain values (ints in bytes and nanoseconds, str,
floats, tuples of those), registered under a stable ``kind`` so it round-trips through JSON
(recordings, snapshots). Probes emit *cumulative* counters; rates are derived in ``memtop.state``.

Domain records live in submodules of this package (one per probe family) and register
themselves with :func:`record`; every submodule is imported here, so ``from_json`` knows them all.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import operator
import pkgutil
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from memtop.core.text import LIMIT, clean

__all__ = [
    "Record",
    "Batch",
    "record",
    "to_json",
    "from_json",
    "RECORD_TYPES",
    "ProbeStatus",
    "Lost",
]


class Record:
    """Marker base class; concrete records are frozen slotted dataclasses.

    The record boundary: every string a record is built with (a field of type str, or str inside
    a tuple or an optional field) is cleaned here, once, by :func:`memtop.core.text.clean`, whoever
    builds it (a probe, ``from_json``, a test), so no output (the TUI, SVG, text, JSON, batch
    lines, exported labels) gets text from outside that could steer a terminal or an encoder."""

    __slots__ = ()
    KIND: typing.ClassVar[str] = ""
    # what makes a record a dataclass to the type checker (dataclasses.fields takes it)
    __dataclass_fields__: typing.ClassVar[dict[str, dataclasses.Field[Any]]]

    def __post_init__(self) -> None:
        # dataclass's __init__ calls this, inherited, for every record class; thousands of
        # records a tick come through here, so plain str fields are tested inline
        cls = type(self)
        plan = _CLEANERS.get(cls)
        if plan is None:
            plan = _CLEANERS[cls] = _clean_plan(cls)
        strs, others = plan
        for name in strs:
            v = getattr(self, name)
            if type(v) is str and not (v.isascii() and v.isprintable() and len(v) <= LIMIT):
                object.__setattr__(self, name, clean(v))  # frozen: set once, while being built
        for name, fix in others:
            v = getattr(self, name)
            w = fix(v)
            if w is not v:
                object.__setattr__(self, name, w)


# -- the record boundary: cleaning the strings a record is built with ------------------------------
#: a fixer returns its argument itself when nothing in it needed cleaning (the common case:
#: nothing is copied), else a cleaned copy
Fix = Callable[[Any], Any]


def _fix_str(v: Any) -> Any:
    if type(v) is str and not (v.isascii() and v.isprintable() and len(v) <= LIMIT):
        return clean(v)
    return v


def _fixer(hint: Any) -> Fix | None:
    """A fixer for a field of type ``hint``; None when no string can be in it."""
    if hint is str:
        return _fix_str
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _fixer(args[0])
        if item is None:
            return None
        if item is _fix_str:
            return _fix_strs
        places = _str_places(args[0])
        return _fix_items(item) if places is None else _fix_rows(places, _fix_items(item))
    if origin is tuple and args:
        fixes = [_fixer(a) for a in args]
        at = tuple((i, f) for i, f in enumerate(fixes) if f is not None)
        return _fix_fixed(at) if at else None
    if origin in (typing.Union, types.UnionType):
        options = [f for f in (_fixer(a) for a in args if a is not type(None)) if f is not None]
        return _fix_union(options) if options else None
    return None


def _fix_items(item: Fix) -> Fix:
    """A fixer of ``tuple[T, ...]``: ``item`` on each element."""

    def fix_items(v: Any) -> Any:
        if type(v) is not tuple:
            return v
        out = None
        for i, x in enumerate(v):
            y = item(x)
            if y is not x:
                if out is None:
                    out = list(v)
                out[i] = y
        return v if out is None else tuple(out)

    return fix_items


_fix_strs_slow = _fix_items(_fix_str)


def _fix_strs(v: Any) -> Any:
    """The fixer of ``tuple[str, ...]``: the tuple itself while every string in it is clean (one
    loop, no call an element), else :func:`_fix_items` of :func:`_fix_str`."""
    if type(v) is not tuple:
        return v
    for s in v:
        if type(s) is str and not (s.isascii() and s.isprintable() and len(s) <= LIMIT):
            return _fix_strs_slow(v)
    return v


def _str_places(hint: Any) -> tuple[int, ...] | None:
    """Where a fixed-length tuple of ``hint`` holds its strings, when those are all it may hold
    text in (each a plain ``str`` element, every other element of a type without text): None for
    any other shape (a nested tuple, an optional string), which the general fixers clean."""
    if typing.get_origin(hint) is not tuple:
        return None
    args = typing.get_args(hint)
    if not args or Ellipsis in args:
        return None
    at = []
    for i, a in enumerate(args):
        fix = _fixer(a)
        if fix is _fix_str:
            at.append(i)
        elif fix is not None:
            return None
    return tuple(at) if at else None


def _fix_rows(at: tuple[int, ...], slow: Fix) -> Fix:
    """A fixer of ``tuple[tuple[..., str, ...], ...]`` whose rows hold text only as the plain
    strings at ``at`` (the (name, value) pairs of /proc/vmstat, of a cgroup's stat): the tuple
    itself while every one of those is clean, tested in one loop (the general fixer made two
    calls a row: VmStat's 95 counters were most of the record's cost every tick); ``slow`` (the
    general fixer) where one is not, or a row is not a tuple long enough."""
    columns = tuple(operator.itemgetter(j) for j in at)

    def fix_rows(v: Any) -> Any:
        # each test a pass in C over the rows (no Python loop a row: VmStat's 95 in a third of
        # the time); whatever it cannot vouch for goes to ``slow``, which returns ``v`` itself
        # when nothing needed cleaning. A row that is not a tuple has nothing cleaned by
        # ``slow`` either, whatever its items are
        if type(v) is not tuple:
            return v
        try:
            for column in columns:
                strs = tuple(map(column, v))  # a row too short: IndexError
                # every one a str (join takes nothing else: TypeError) and, joined, printable
                # ASCII (what str.isprintable says of ASCII: " " to "~"): each of them is
                joined = "".join(strs)
                if (
                    not joined.isascii()
                    or joined.encode().translate(None, _PRINTABLE)
                    or max(map(len, strs), default=0) > LIMIT
                ):
                    return slow(v)
        except Exception:  # noqa: BLE001 - any row it cannot read is the general fixer's
            return slow(v)
        return v

    return fix_rows


#: the ASCII str.isprintable accepts: " " to "~" (not the C0 controls, not DEL)
_PRINTABLE = bytes(range(0x20, 0x7F))


def _fix_fixed(at: tuple[tuple[int, Fix], ...]) -> Fix:
    """A fixer of a fixed-length tuple: each (index, fixer) of ``at`` on its element."""

    def fix_fixed(v: Any) -> Any:
        if type(v) is not tuple:
            return v
        out = None
        for i, f in at:
            if i < len(v):
                x = v[i]
                y = f(x)
                if y is not x:
                    if out is None:
                        out = list(v)
                    out[i] = y
        return v if out is None else tuple(out)

    return fix_fixed


def _fix_union(options: list[Fix]) -> Fix:
    """A fixer of ``A | B | None``: the first of ``options`` that changes the value."""

    def fix_union(v: Any) -> Any:
        if v is None:
            return v
        for f in options:
            w = f(v)
            if w is not v:
                return w
        return v

    return fix_union


_Cleaners = tuple[tuple[str, ...], tuple[tuple[str, Fix], ...]]
_CLEANERS: dict[type, _Cleaners] = {}


def _clean_plan(cls: type) -> _Cleaners:
    """The fields of ``cls`` that can hold a string: those of type str, and (field, fixer) of
    the others."""
    hints = typing.get_type_hints(cls)
    strs, others = [], []
    for f in dataclasses.fields(cls):
        fix = _fixer(hints[f.name])
        if fix is _fix_str:
            strs.append(f.name)
        elif fix is not None:
            others.append((f.name, fix))
    return tuple(strs), tuple(others)


RECORD_TYPES: dict[str, type[Record]] = {}
KIND_KEY = "_kind"
R = TypeVar("R", bound=type[Record])


def record(kind: str) -> Callable[[R], R]:
    """Register a record class under ``kind`` (stable: it is written into recordings)."""

    def deco(cls: R) -> R:
        if kind in RECORD_TYPES and RECORD_TYPES[kind] is not cls:
            raise ValueError(f"record kind {kind!r} registered twice")
        cls.KIND = kind
        RECORD_TYPES[kind] = cls
        return cls

    return deco


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def to_json(rec: Record) -> dict[str, Any]:
    """A JSON-ready dict: ``{"_kind": ..., field: value, ...}`` (tuples become lists). The record
    kind goes under ``_kind`` so a record may have a field of its own called ``kind``."""
    out: dict[str, Any] = {KIND_KEY: rec.KIND}
    for f in dataclasses.fields(rec):
        out[f.name] = _plain(getattr(rec, f.name))
    return out


# -- decoding: JSON comes from files (recordings, snapshots), so every value is checked ------------
#: the longest string a record may carry (a symbolized frame, a path, a command line)
MAX_STRING = 64 << 10
#: int64 .. uint64: what the kernel's counters hold
INT_MIN, INT_MAX = -(1 << 63), (1 << 64) - 1

#: probes recordings name as an earlier memtop called them (the leaks pane's probe was "memleak")
RENAMED_PROBES = {"memleak": "leaks"}


def _check_int(v: Any) -> int:
    if type(v) is not int or not INT_MIN <= v <= INT_MAX:
        raise ValueError("not an int64/uint64")
    return v


def _check_float(v: Any) -> float:
    if type(v) is float:
        f = v
    elif type(v) is int and INT_MIN <= v <= INT_MAX:
        f = float(v)
    else:
        raise ValueError("not a number")
    if not math.isfinite(f):  # 1e400 parses as inf
        raise ValueError("not a finite number")
    return f


def _check_bool(v: Any) -> bool:
    if type(v) is not bool:
        raise ValueError("not a boolean")
    return v


def _check_str(v: Any) -> str:
    # made printable by the record it goes into (Record.__post_init__), as a probe's are
    if type(v) is not str or len(v) > MAX_STRING:
        raise ValueError("not a string (or too long)")
    return v


Check = Callable[[Any], Any]


def _checker(hint: Any) -> Check:
    """A function that validates a JSON value against a record field's type hint and returns
    the field's value (lists become tuples); ValueError if it does not fit."""
    if hint is int:
        return _check_int
    if hint is float:
        return _check_float
    if hint is bool:
        return _check_bool
    if hint is str:
        return _check_str
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _checker(args[0])

        def check_items(v: Any) -> tuple[Any, ...]:
            if type(v) is not list:
                raise ValueError("not a list")
            return tuple([item(x) for x in v])

        return check_items
    if origin is tuple and args:
        items = tuple(_checker(a) for a in args)
        n = len(items)

        def check_fixed(v: Any) -> tuple[Any, ...]:
            # a newer minor version may append elements: the ones this version knows are kept
            if type(v) is not list or len(v) < n:
                raise ValueError(f"not a list of {n}")
            return tuple([c(x) for c, x in zip(items, v, strict=False)])

        return check_fixed
    if origin in (typing.Union, types.UnionType):
        options = tuple(_checker(a) for a in args if a is not type(None))
        nullable = type(None) in args

        def check_union(v: Any) -> Any:
            if v is None and nullable:
                return None
            for c in options:
                try:
                    return c(v)
                except ValueError:
                    pass
            raise ValueError("no alternative fits")

        return check_union
    raise TypeError(f"records cannot hold {hint!r}: teach memtop.records._checker about it")


_Plan = tuple[type[Record], tuple[tuple[str, Check, bool], ...]]
_PLANS: dict[str, _Plan] = {}


def _plan(kind: str) -> _Plan:
    """Per record kind: (class, ((field, checker, required), ...)), computed once."""
    plan = _PLANS.get(kind)
    if plan is None:
        cls = RECORD_TYPES[kind]
        hints = typing.get_type_hints(cls)
        fields = tuple(
            (
                f.name,
                _checker(hints[f.name]),
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)
        )
        plan = _PLANS[kind] = (cls, fields)
    return plan


def from_json(data: dict[str, Any]) -> Record:
    """Inverse of :func:`to_json`, checked, as the JSON may come from any file: ``ValueError``
    for an unknown kind, a missing required field or a value that does not fit its field's type
    hint (ints within int64/uint64, finite floats: JSON's NaN and Infinity, which Python's json
    accepts, are refused; lists where tuples are). Strings longer than :data:`MAX_STRING` are
    refused, others come out printable and at most :data:`memtop.core.text.LIMIT` long, as a probe's do
    (the record cleans them: :class:`Record`).
    Unknown fields are ignored, missing optional ones take their defaults; a probe renamed since
    (:data:`RENAMED_PROBES`) takes its new name."""
    kind = data.get(KIND_KEY)
    if type(kind) is not str or kind not in RECORD_TYPES:
        raise ValueError(f"unknown record kind {kind!r}")
    cls, fields = _plan(kind)
    kwargs: dict[str, Any] = {}
    for name, check, required in fields:
        if name in data:
            try:
                kwargs[name] = check(data[name])
            except ValueError as exc:
                raise ValueError(f"record {kind!r} field {name!r}: {exc}") from None
        elif required:
            raise ValueError(f"record {kind!r} lacks field {name!r}")
    probe = kwargs.get("probe")
    if type(probe) is str and probe in RENAMED_PROBES:
        kwargs["probe"] = RENAMED_PROBES[probe]
    return cls(**kwargs)


@dataclass(frozen=True, slots=True)
class Batch:
    """What one poll of one source produced, stamped with CLOCK_MONOTONIC (the clock
    ``bpf_ktime_get_ns`` uses), so kernel and /proc figures share one time axis."""

    ts_ns: int
    records: tuple[Record, ...]


@record("probe_status")
@dataclass(frozen=True, slots=True)
class ProbeStatus(Record):
    """A probe's lifecycle: state is pending | attaching | attached | erroring | failed | detached.

    ``erroring``: attached, but its last ``failures`` polls in a row raised (``message`` says why
    in plain words); the bridge retries it with backoff and it goes back to ``attached`` by itself
    when a poll succeeds. Only a load that cannot work is ``failed`` (final). Times are
    CLOCK_MONOTONIC ns, the batches' clock; the fields after ``hint`` came with erroring, so a
    recording made before them loads with their zero defaults."""

    probe: str
    state: str
    message: str = ""
    hint: str = ""
    #: erroring: how many polls in a row have failed (0 otherwise)
    failures: int = 0
    #: erroring: when the first of those failures happened (0 otherwise)
    since_ns: int = 0
    #: when the probe last polled successfully (0: not known, or never)
    last_ok_ns: int = 0
    #: erroring: when the next attempt is due (0 otherwise)
    retry_ns: int = 0


@record("lost")
@dataclass(frozen=True, slots=True)
class Lost(Record):
    """Cumulative count of events a probe could not deliver (ring buffer full, map full)."""

    probe: str
    what: str
    count: int


def _load_submodules() -> None:
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


_load_submodules()
