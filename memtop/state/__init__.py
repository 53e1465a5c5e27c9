"""State: pure Python, fed record batches; what the panes render from.

``State.apply(batch)`` hands each batch to every sub-state (one per pane family, defined in the
submodules of this package and discovered automatically). Probes emit cumulative counters; rates
and deltas are derived here, so live and replay take the same path.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TypeVar

from memtop.records import Batch, Lost, ProbeStatus, Record
from memtop.state.base import SubState

S = TypeVar("S", bound=SubState)


def _load_submodules() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")


class State:
    def __init__(self, mode: str = "procfs", *, panes: bool = True) -> None:
        _load_submodules()
        self.mode = mode  # "bpf" | "procfs" | "replay"
        #: whether what only the panes show is kept (a process's sparkline and history, gone
        #: processes' rows, the exited lists); the exporter, which serves none of it, sets False
        #: before the first batch (tests/unit/test_state_dispatch.py: the same exposition)
        self.panes = panes
        self.ts_ns = 0
        self.first_ts_ns = 0
        self.batches = 0
        self.statuses: dict[str, ProbeStatus] = {}
        self.lost: dict[tuple[str, str], int] = {}
        #: per probe: the time (batch clock, ns) of its last good reading: every batch while it is
        #: attached, else what its status says (an erroring probe's last successful poll)
        self.last_ok_ns: dict[str, int] = {}
        #: per probe: the number of the last batch in which it was attached (ticks since: how many
        #: readings it missed)
        self.last_ok_batch: dict[str, int] = {}
        # applied in the order of their modules' names, whatever imported them first: a sub-state
        # that reads another's in apply (the OOM forecast reads the cgroups') sees the same
        # batch's figures in every run, not the last batch's in some
        ordered = sorted(SubState.registry, key=lambda cls: (cls.__module__, cls.__qualname__))
        self.subs: dict[str, SubState] = {cls.key: cls() for cls in ordered}
        self._subs = list(self.subs.values())
        #: by record type, the sub-states it goes to (``_route``), filled as types arrive
        self._routes: dict[type, tuple[int, ...]] = {}

    def get(self, cls: type[S]) -> S:
        sub = self.subs[cls.key]
        assert isinstance(sub, cls)
        return sub

    def apply(self, batch: Batch) -> None:
        if not self.first_ts_ns:
            self.first_ts_ns = batch.ts_ns
        self.ts_ns = batch.ts_ns
        self.batches += 1
        # each record goes only to the sub-states that read its type (``SubState.takes``): one
        # pass over the batch here instead of one isinstance chain over it in every sub-state
        subs = self._subs
        mine: list[list[Record]] = [[] for _ in subs]
        routes = self._routes
        for rec in batch.records:
            kind = type(rec)
            route = routes.get(kind)
            if route is None:
                route = routes[kind] = self._route(kind)
            for i in route:
                mine[i].append(rec)
            if kind is ProbeStatus:
                assert isinstance(rec, ProbeStatus)
                self.statuses[rec.probe] = rec
                if rec.last_ok_ns:
                    self.last_ok_ns[rec.probe] = rec.last_ok_ns
            elif kind is Lost:
                assert isinstance(rec, Lost)
                self.lost[(rec.probe, rec.what)] = rec.count
        for name, st in self.statuses.items():
            if st.state == "attached":
                self.last_ok_ns[name] = batch.ts_ns
                self.last_ok_batch[name] = self.batches
        n = len(batch.records)
        for sub, recs in zip(subs, mine, strict=True):
            if sub.takes is None or len(recs) == n:
                sub.apply(batch, self)
            else:
                sub.apply(Batch(batch.ts_ns, tuple(recs)), self)

    def _route(self, kind: type) -> tuple[int, ...]:
        """The indexes (in ``_subs``) of the sub-states that take records of ``kind``: those
        that take every record, and those that take it or a base class of it."""
        return tuple(
            i
            for i, sub in enumerate(self._subs)
            if sub.takes is None or any(issubclass(kind, t) for t in sub.takes)
        )

    def probe_state(self, name: str) -> ProbeStatus | None:
        return self.statuses.get(name)

    def missed_ticks(self, name: str) -> int:
        """How many batches went by since probe ``name`` last had a good reading (0 while it is
        attached or before it ever read)."""
        st = self.statuses.get(name)
        if st is None or st.state == "attached" or name not in self.last_ok_batch:
            return 0
        return self.batches - self.last_ok_batch[name]

    def reading_age_ns(self, name: str) -> int | None:
        """How old probe ``name``'s latest good reading is at the latest batch (0 while it is
        attached); None when it never read."""
        st = self.statuses.get(name)
        if st is not None and st.state == "attached":
            return 0
        ok = self.last_ok_ns.get(name)
        if ok is None:
            return None
        return max(0, self.ts_ns - ok)

    def lost_total(self, probe: str) -> int:
        return sum(v for (p, _), v in self.lost.items() if p == probe)
