"""The one record decoder, ``memtop.records.from_json``: every record kind round-trips through
``to_json`` and JSON text, and a value that does not fit its field is refused (recordings and
snapshots are files, so anything may be in them)."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

import pytest

from memtop.records import INT_MAX, INT_MIN, KIND_KEY, MAX_STRING, RECORD_TYPES, Record, from_json, to_json
from memtop.records.leaks import LeakStack
from memtop.records.processes import ProcSample


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _example(hint: Any, edge: bool) -> Any:
    """A value of a record field's type: an ordinary one, or (``edge``) the ends of its range."""
    if hint is bool:
        return edge
    if hint is int:
        return INT_MAX if edge else 7
    if hint is float:
        return -1e300 if edge else 1.5
    if hint is str:
        return "é€ [bold]x[/bold]" if edge else "x[bold]y"
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return () if edge else (_example(args[0], edge), _example(args[0], not edge))
        return tuple(_example(a, edge) for a in args)
    if _is_union(hint):
        if edge and type(None) in args:
            return None
        return _example(next(a for a in args if a is not type(None)), edge)
    raise AssertionError(f"record field type {hint!r} is not a plain value")


def _bad(hint: Any) -> list[Any]:
    """JSON values a field of this type must refuse."""
    if hint is bool:
        return [1, 0, "true", None]
    if hint is int:
        return ["1", 1.0, True, None, INT_MAX + 1, INT_MIN - 1, [1]]
    if hint is float:
        return ["1", True, None, float("nan"), float("inf"), -float("inf"), INT_MAX + 1]
    if hint is str:
        return [1, None, ["x"], "x" * (MAX_STRING + 1)]
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return ["ab", {"a": 1}, None, [_plain(_example(args[0], False)), _bad(args[0])[0]]]
        items = [_plain(_example(a, False)) for a in args]
        return ["ab", None, items[:-1], [_bad(args[0])[0], *items[1:]]]
    if _is_union(hint) and len(args) == 2 and type(None) in args:
        return [v for v in _bad(next(a for a in args if a is not type(None))) if v is not None]
    raise AssertionError(f"record field type {hint!r}: teach this test what it must refuse")


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


def _build(cls: type[Record], edge: bool) -> Record:
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: _example(hints[f.name], edge) for f in dataclasses.fields(cls)})


@pytest.mark.parametrize("edge", [False, True], ids=["ordinary", "edges"])
@pytest.mark.parametrize("kind", sorted(RECORD_TYPES))
def test_every_record_kind_round_trips(kind: str, edge: bool) -> None:
    cls = RECORD_TYPES[kind]
    obj = _build(cls, edge)
    data = json.loads(json.dumps(to_json(obj)))
    assert data[KIND_KEY] == kind
    assert from_json(data) == obj
    data["some_future_field"] = [1, {"x": None}]  # fields a later version adds are ignored
    assert from_json(data) == obj
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, dataclasses.fields(cls)[0].name, 1)


@pytest.mark.parametrize("kind", sorted(RECORD_TYPES))
def test_a_value_that_does_not_fit_its_field_is_refused(kind: str) -> None:
    cls = RECORD_TYPES[kind]
    good = json.loads(json.dumps(to_json(_build(cls, False))))
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        bad_values = _bad(hints[f.name])
        assert bad_values, f.name
        for bad in bad_values:
            with pytest.raises(ValueError, match=f"field '{f.name}'"):
                from_json(dict(good, **{f.name: bad}))
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            with pytest.raises(ValueError, match=f"lacks field '{f.name}'"):
                from_json({k: v for k, v in good.items() if k != f.name})


def test_unknown_kinds_and_non_objects_are_refused() -> None:
    for kind in ("from_the_future", None, 1, ["proc"]):
        with pytest.raises(ValueError, match="unknown record kind"):
            from_json({KIND_KEY: kind, "pid": 1})
    with pytest.raises(ValueError, match="unknown record kind"):
        from_json({"pid": 1})


def test_strings_come_out_printable_and_defaults_fill_in() -> None:
    data = to_json(ProcSample(42, "x", "u", 0, 4096, 0, 0, 0, 1, 0))
    data["comm"] = "\x1b]0;pwned\x07\ud800"
    data.pop("cmdline", None)
    rec = from_json(data)
    assert isinstance(rec, ProcSample)
    # the escape and the bell become visible; the lone surrogate (unencodable) becomes U+FFFD
    assert rec.comm.startswith("\\x1b]0;pwned\\x07\ufffd") and rec.comm.isprintable()
    assert rec.comm.encode("utf-8") and rec.cmdline == ""


def test_nested_lists_become_tuples() -> None:
    stack = LeakStack(1, 2, ("main", "f"), 4, 5, 6, 7, age_hist_bytes=(1, 2))
    data = json.loads(json.dumps(to_json(stack)))
    assert data["frames"] == ["main", "f"] and data["age_hist_bytes"] == [1, 2]
    back = from_json(data)
    assert back == stack and isinstance(back, LeakStack)
    assert type(back.frames) is tuple and type(back.age_hist_bytes) is tuple


def test_a_renamed_probe_takes_its_new_name() -> None:
    rec = from_json({KIND_KEY: "probe_status", "probe": "memleak", "state": "attached"})
    assert to_json(rec) == {
        KIND_KEY: "probe_status",
        "probe": "leaks",
        "state": "attached",
        "message": "",
        "hint": "",
        "failures": 0,
        "since_ns": 0,
        "last_ok_ns": 0,
        "retry_ns": 0,
    }
    assert (
        to_json(from_json({KIND_KEY: "lost", "probe": "memleak", "what": "events", "count": 3}))["probe"]
        == "leaks"
    )
