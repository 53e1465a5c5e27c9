"""smaps: the mappings of one process (pmap -x) from /proc/PID/smaps (on demand, drill-in).

No BPF. Reading smaps walks the page tables of every mapping, which costs the target a little
mmap_lock time, so it runs every few seconds, and only while the drill-in screen is open.
"""

from __future__ import annotations

import time
from pathlib import Path

from memtop.errors import PidNotFound
from memtop.probes.base import Probe
from memtop.probes.procmaps import is_alive, read_smaps
from memtop.records import Record
from memtop.records.process import Mappings, TargetGone


class SmapsProbe(Probe):
    name = "smaps"
    needs_bpf = False
    panes = ("process",)
    cadence_s = 2.0

    def __init__(self, pid: int = 0, proc_root: str = "/proc") -> None:
        self.pid = pid
        self.proc_root = proc_root
        self._gone = False
        self._last: tuple[object, ...] | None = None

    def load(self) -> None:
        if not Path(self.proc_root, str(self.pid), "smaps").exists():
            raise PidNotFound(f"pid {self.pid} is gone", "pick a running process")

    def note(self) -> str:
        return f"pid {self.pid}, every {self.cadence_s:g}s"

    def poll(self) -> list[Record]:
        if self._gone:
            return []
        rows = read_smaps(self.pid, self.proc_root)
        if not rows or not is_alive(self.pid, self.proc_root):
            self._gone = True
            return [TargetGone(self.pid, time.clock_gettime_ns(time.CLOCK_MONOTONIC))]
        key = tuple(rows)
        if key == self._last:
            return []
        self._last = key
        return [Mappings(self.pid, tuple(rows))]
