"""pagealloc: page allocations by order, from kmem:mm_page_alloc counted in a per-CPU array (on
demand, Kernel pane). Exact (no sampling): one increment per allocation. While attached, BPF
run-time stats are held on so the pane shows the program's own cost."""

from __future__ import annotations

import threading

from memtop.probes import bpfstats
from memtop.probes.base import BpfProbe
from memtop.records import Record
from memtop.records.kernel import PageAlloc

#: slots of the per-order array: orders 0..14, and everything above in the last
MAX_ORDER_SLOTS = 16


class PageAllocProbe(BpfProbe):
    name = "pagealloc"
    program = "pagealloc"
    tracepoints = ("kmem:mm_page_alloc",)
    cadence_s = 1.0

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._stats = bpfstats.Windows()

    def defines(self) -> dict[str, int]:
        return {"MAX_ORDER_SLOTS": MAX_ORDER_SLOTS}

    def after_load(self) -> None:
        self._stats.tick()

    def poll(self) -> list[Record]:
        with self._lock:
            if self.bpf is None:
                return []
            t = self.bpf["page_orders"]
            orders = tuple(int(t.sum(t.Key(i)).value) for i in range(MAX_ORDER_SLOTS))
            ns, runs = bpfstats.program_stats(self.bpf, self.name)
            self._stats.tick()
            while len(orders) > 1 and not orders[-1]:
                orders = orders[:-1]
            return [PageAlloc(orders=orders, run_ns=ns, runs=runs)]

    def close(self) -> None:
        with self._lock:
            self._stats.close()
            super().close()
