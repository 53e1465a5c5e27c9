"""procmem: process lifecycle from sched:sched_process_fork/exec/exit (rare events)."""

from __future__ import annotations

import ctypes
from typing import Any

from memtop.core.text import clean
from memtop.probes.base import BpfProbe
from memtop.records import Record
from memtop.records.processes import ProcEvent

#: event kinds by the number the program sends (``EV_<NAME>``; 0 is none)
KINDS = {1: "exec", 2: "exit"}


class _Event(ctypes.Structure):
    C_STRUCT = "struct proc_event_t"  # in bpf/procmem.bpf.c; the layout is checked (memtop.probes.layout)
    _fields_ = [
        ("ts_ns", ctypes.c_uint64),
        ("lifetime_ns", ctypes.c_uint64),
        ("pid", ctypes.c_uint32),
        ("kind", ctypes.c_uint32),
        ("comm", ctypes.c_char * 16),
    ]


class ProcmemProbe(BpfProbe):
    name = "procmem"
    program = "procmem"
    shares_unit = True
    tracepoints = ("sched:sched_process_fork", "sched:sched_process_exec", "sched:sched_process_exit")
    #: its ring buffer holds a few thousand events: polled rarer, a process churn would overflow it
    full_cadence = True

    def __init__(self, max_pids: int = 16384, ringbuf_pages: int = 64) -> None:
        super().__init__()
        self.max_pids = max_pids
        self.ringbuf_pages = ringbuf_pages
        self._pending: list[Record] = []

    def defines(self) -> dict[str, int]:
        kinds = {f"EV_{name.upper()}": n for n, name in KINDS.items()}
        return {"MAX_PIDS": self.max_pids, "RINGBUF_PAGES": self.ringbuf_pages, **kinds}

    def after_load(self) -> None:
        self.bpf["procmem_events"].open_ring_buffer(self._on_event)

    def _on_event(self, _ctx: Any, data: int, _size: int) -> None:
        # one call per process started or gone on the whole machine (hundreds a second under a
        # test suite's churn): the record read in place, its integer fields are ints already and
        # a char array reads as its bytes up to the first NUL
        ev = _Event.from_address(data)
        self._pending.append(
            ProcEvent(
                ts_ns=ev.ts_ns,
                event=KINDS.get(ev.kind, "unknown"),
                pid=ev.pid,
                comm=clean(ev.comm),
                lifetime_ns=ev.lifetime_ns,
            )
        )

    def poll(self) -> list[Record]:
        if self.bpf is None:
            return []
        self.bpf.ring_buffer_consume()
        out, self._pending = self._pending, []
        out.append(self.lost_record("procmem_lost"))
        return out
