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
import pkgutil
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

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
    """Marker base class; concrete records are frozen slotted dataclasses."""

    __slots__ = ()
    KIND: typing.ClassVar[str] = ""


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
    for f in dataclasses.fields(rec):  # type: ignore[arg-type]
        out[f.name] = _plain(getattr(rec, f.name))
    return out


def _tupled(value: Any, hint: Any) -> Any:
    """Turn JSON lists back into (nested) tuples following the field's type hint."""
    if not isinstance(value, list):
        return value
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for a in args:
            if typing.get_origin(a) is tuple:
                return _tupled(value, a)
        return tuple(value)
    if origin is tuple and args:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_tupled(v, args[0]) for v in value)
        return tuple(_tupled(v, a) for v, a in zip(value, args, strict=False))
    return tuple(value)


_HINTS: dict[type, dict[str, Any]] = {}

#: probes recordings name as an earlier memtop called them (the leaks pane's probe was "memleak")
RENAMED_PROBES = {"memleak": "leaks"}


def from_json(data: dict[str, Any]) -> Record:
    """Inverse of :func:`to_json`. Unknown fields are ignored; missing fields with defaults are
    defaulted; an unknown kind or a missing required field raises ``ValueError``."""
    kind = data.get(KIND_KEY)
    cls = RECORD_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown record kind {kind!r}")
    hints = _HINTS.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _HINTS[cls] = hints
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            kwargs[f.name] = _tupled(data[f.name], hints.get(f.name))
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"record {kind!r} lacks field {f.name!r}")
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
    """A probe's lifecycle: state is pending | attaching | attached | failed | detached."""

    probe: str
    state: str
    message: str = ""
    hint: str = ""


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
