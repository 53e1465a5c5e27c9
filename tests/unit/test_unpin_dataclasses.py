"""startup_gc.unpin_slotted_dataclasses: the class a slotted dataclass replaced is freed, and the
records behave as before (frozen, equal, hashable, copied and pickled)."""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import sys
import types
import weakref

import pytest

from memtop.records import ProbeStatus
from memtop.runtime import startup_gc


def _first_class(cls: type) -> type | None:
    for o in gc.get_objects():
        if (
            isinstance(o, type)
            and o is not cls
            and o.__qualname__ == cls.__qualname__
            and o.__module__ == cls.__module__
        ):
            return o
    return None


def test_the_replaced_class_is_freed_and_records_behave() -> None:
    startup_gc.unpin_slotted_dataclasses()
    gc.collect()
    assert _first_class(ProbeStatus) is None
    assert startup_gc.unpin_slotted_dataclasses() == 0  # nothing left to mend
    p = ProbeStatus("procfs", "attached")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.state = "failed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        p.other = 1  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del p.state
    assert p == ProbeStatus("procfs", "attached") and hash(p) == hash(ProbeStatus("procfs", "attached"))
    assert copy.copy(p) == p and pickle.loads(pickle.dumps(p)) == p


def test_a_new_slotted_dataclass_is_mended_once() -> None:
    mod = types.ModuleType("memtop_unpin_probe")
    sys.modules[mod.__name__] = mod  # dataclass looks its module up while it builds the class
    try:
        _mended_once(mod)
    finally:
        del sys.modules[mod.__name__]


def _mended_once(mod: types.ModuleType) -> None:
    exec(
        "from dataclasses import dataclass\n@dataclass(frozen=True, slots=True)\nclass Probe:\n    x: int\n",
        mod.__dict__,
    )
    first = _first_class(mod.Probe)
    ref = weakref.ref(first) if first is not None else None
    del first
    mended = startup_gc.unpin_slotted_dataclasses(prefix="memtop_unpin_probe")
    gc.collect()
    if ref is not None:  # Python 3.11; 3.12 keeps no first class
        assert mended == 1 and ref() is None
    assert mod.Probe(1) == mod.Probe(1)
