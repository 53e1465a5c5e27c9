"""Sub-state contract and small pure data structures (rings, log2 histograms)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar, Literal, NamedTuple, SupportsIndex

from memtop.records import Batch, Record

if TYPE_CHECKING:
    from memtop.state import State


#: how loud a notice is (the TUI's notification severities)
Severity = Literal["information", "warning", "error"]


class Notice(NamedTuple):
    """A sentence to announce on any screen: plain text (it may hold traced-system strings, so it
    is never markup), its severity, the pane that shows the same thing in full (no toast while
    that pane is up: it would cover what it repeats), and a key naming the event, so a replay
    that applies the same batches again after a seek does not announce it twice."""

    text: str
    severity: Severity
    pane: str = ""
    key: str = ""


class SubState:
    """One pane family's state. Subclasses register themselves by defining ``key``."""

    key: ClassVar[str] = ""
    registry: ClassVar[list[type[SubState]]] = []
    #: the record types ``apply`` reads (a record of a subclass counts, as for ``isinstance``):
    #: each batch reaches it with only those records, in their order (None: every record).
    #: Most of a batch is one sub-state's: the /proc reader's per-process samples (2,000
    #: processes: 2,000 of ~2,100 records) and the lifecycle probe's exec and exit events (a
    #: build or other users' shell loops: hundreds a tick) are the processes state's, and each
    #: other sub-state's isinstance chain ran over every one of them. ``apply`` is still called
    #: at every batch, with no records of its own too (its per-batch work: forecasts, ages).
    #: tests/unit/test_state_dispatch.py holds each list to what ``apply`` reads.
    takes: ClassVar[tuple[type[Record], ...] | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.key and cls not in SubState.registry:
            SubState.registry.append(cls)

    def apply(self, batch: Batch, state: State) -> None:
        raise NotImplementedError

    def pop_notices(self) -> list[Notice]:
        """What to announce on any screen (an OOM kill), once each."""
        return []


class Ring(deque[tuple[int, float]]):
    """A fixed-size time series of (ts_ns, value)."""

    def __init__(self, size: int = 600) -> None:
        super().__init__(maxlen=size)

    def __reduce_ex__(
        self, protocol: SupportsIndex
    ) -> tuple[type[Ring], tuple[int | None], None, Iterator[tuple[int, float]]]:
        # deque's own __reduce__ passes (items, maxlen) to __init__: a replay checkpoint copies
        # state by pickle (here rather than __reduce__, whose type deque's stubs fix otherwise)
        return (type(self), (self.maxlen,), None, iter(self))


def log2_le(index: int) -> int:
    """Upper bound (inclusive) of log2 bucket ``index``: values in [2**i, 2**(i+1) - 1]."""
    return (1 << (index + 1)) - 1


def rate(cur: int, prev: int, dt_ns: int) -> float:
    if dt_ns <= 0 or cur < prev:
        return 0.0
    return (cur - prev) * 1e9 / dt_ns
