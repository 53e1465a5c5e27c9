"""What the UI talks to: a live bridge, a replay or a fake. Typed, no bcc: the UI imports this,
never the bridge or a probe (the import-linter contracts in pyproject.toml hold it to that)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from memtop.records import Batch

if TYPE_CHECKING:
    from memtop.probes.base import Probe

Subscriber = Callable[[Batch], None]


class Source(Protocol):
    """What the app consumes: a live bridge, a replay or a fake."""

    @property
    def mode(self) -> str:
        """One of bpf, procfs or replay; read-only (a live source's follows its attached probes)."""
        ...

    def subscribe(self, fn: Subscriber) -> None: ...
    async def start(self) -> None: ...
    async def poll(self) -> Batch | None: ...
    def settled(self) -> bool: ...
    async def stop(self) -> None: ...
    def add_probe(self, probe: Probe) -> bool: ...
    def remove_probe(self, name: str) -> None: ...

    def standin_headers(self) -> str | None:
        """The version of the stand-in kernel headers the BPF programs compiled against, when
        this host has no exact ones (shown in the header line); None otherwise."""
        ...
