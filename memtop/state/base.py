"""Sub-state contract and small pure data structures (rings, log2 histograms)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar, Literal, NamedTuple, SupportsIndex

from memtop.records import Batch

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
    #: whether ``apply`` reads the per-process records (``memtop.state.PER_PROCESS``: the /proc
    #: reader's ``ProcSample``, one per process every tick, most of a batch's records (2,000
    #: processes: 2,000 of ~2,100), and the lifecycle probe's ``ProcEvent``, one per exec and
    #: exit on the machine); a sub-state that does not gets each batch without them (its
    #: isinstance chain ran over every one of them, in each of a dozen sub-states)
    process_samples: ClassVar[bool] = False

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
