"""The cgroups state's pid -> path maps are plain dicts kept in an OrderedDict's order: a pid whose
path changed goes to the end, an unchanged one stays where it is, and past MAX_PIDS the least
recently changed goes first (the views list pids in this order)."""

from __future__ import annotations

import random
from collections import OrderedDict

import pytest

from memtop.state import cgroups
from memtop.state.cgroups import CgroupsState


def _ordered(m: OrderedDict[int, str], pid: int, path: str, cap: int) -> None:
    """The OrderedDict logic the plain dict replaced."""
    if m.get(pid) != path:
        m[pid] = path
        m.move_to_end(pid)
        if len(m) > cap:
            m.popitem(last=False)


@pytest.mark.parametrize("seed", range(20))
def test_remember_keeps_the_ordered_dicts_order_and_bound(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    cap = 16
    monkeypatch.setattr(cgroups, "MAX_PIDS", cap)
    rng = random.Random(seed)
    plain: dict[int, str] = {}
    ordered: OrderedDict[int, str] = OrderedDict()
    for _ in range(500):
        pid, path = rng.randrange(40), f"/cg{rng.randrange(4)}"
        CgroupsState._remember(plain, pid, path)
        _ordered(ordered, pid, path, cap)
        assert list(plain.items()) == list(ordered.items())
    assert len(plain) == cap


def test_state_pid_maps_are_plain_dicts() -> None:
    st = CgroupsState()
    assert type(st.pid_memcg) is dict and type(st.pid_unified) is dict
