"""The probe contract.

A probe declares the kernel hooks it needs (so ``memtop doctor`` can check them before loading),
loads/attaches in ``load()``, returns records from ``poll()`` (cumulative counters, drained
events) and detaches in ``close()``. Probes are synchronous; the bridge runs them in a worker
thread, one compilation at a time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from memtop import bcc_compat, resources, tracefs
from memtop.errors import ProbeError
from memtop.records import Lost, Record


class Probe(ABC):
    name: ClassVar[str] = ""
    #: tracepoints this probe needs, as "category:event"
    tracepoints: ClassVar[tuple[str, ...]] = ()
    #: tracepoints it uses when present but can do without
    optional_tracepoints: ClassVar[tuple[str, ...]] = ()
    #: True when it needs BPF (False for /proc readers)
    needs_bpf: ClassVar[bool] = True
    #: which panes it feeds (for doctor and the panes' status lines)
    panes: ClassVar[tuple[str, ...]] = ()
    #: other kernel features: "perf_events", "uprobes"
    features: ClassVar[tuple[str, ...]] = ()
    #: seconds between polls
    cadence_s: ClassVar[float] = 1.0

    def missing_tracepoints(self) -> list[str]:
        return [tp for tp in self.tracepoints if not tracefs.tracepoint_exists(tp)]

    @abstractmethod
    def load(self) -> None:
        """Compile and attach; raise MemtopError (with a hint) when that cannot be done."""

    @abstractmethod
    def poll(self) -> list[Record]:
        """Read maps, drain buffers; return records. Must not block for long."""

    def close(self) -> None:  # noqa: B027 - a probe with nothing attached has nothing to do
        """Detach. Idempotent; called on every exit path."""

    def note(self) -> str:
        """A short word for the status bar once attached (e.g. scope)."""
        return ""


class BpfProbe(Probe):
    """A probe backed by ``bpf/<program>.bpf.c``; its TRACEPOINT_PROBEs attach at load."""

    program: ClassVar[str] = ""

    def __init__(self) -> None:
        self.bpf: Any = None
        self._lost_seen = 0

    def cflags(self) -> list[str]:
        return []

    def load(self) -> None:
        missing = self.missing_tracepoints()
        if missing:
            raise ProbeError(
                f"kernel lacks tracepoint(s) {', '.join(missing)}",
                "this kernel cannot feed this pane; see `memtop doctor`",
            )
        try:
            self.bpf = bcc_compat.compile_program(resources.bpf_source(self.program), self.cflags())
        except ProbeError:
            raise
        except Exception as exc:  # bcc raises bare Exception on compile/attach failure
            if type(exc).__module__.startswith("memtop"):
                raise
            raise ProbeError(
                f"{self.program}.bpf.c failed to load: {str(exc).strip()[:300]}",
                "run `memtop doctor` to check headers and kernel hooks",
            ) from exc
        self.after_load()

    def after_load(self) -> None:
        """Open ring buffers, attach perf events and so on."""

    def close(self) -> None:
        if self.bpf is not None:
            bcc_compat.cleanup(self.bpf)
            self.bpf = None

    def read_array_sum(self, table: str) -> int:
        """Sum of a (per-CPU) array's slot 0, e.g. a lost-event counter."""
        t = self.bpf[table]
        key = t.Key(0)
        if hasattr(t, "sum"):  # per-CPU array
            return int(t.sum(key).value)
        return int(t[key].value)

    def lost_record(self, table: str = "lost", what: str = "events") -> Lost:
        return Lost(probe=self.name, what=what, count=self.read_array_sum(table))
