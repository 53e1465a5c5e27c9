"""growth: brk/mmap/munmap of one process by user stack (on demand, drill-in).

bpf/growth.bpf.c runs on the syscall tracepoints sys_enter/exit_brk, sys_enter/exit_mmap and
sys_enter_munmap, filtered in kernel to the target tgid (-DTARGET_PID): other processes' calls
return at the first instruction. brk growth is new brk minus old brk; the old brk is seeded here
from /proc/PID/maps (the end of [heap], or start_brk from /proc/PID/stat when there is no heap
yet), then learnt exactly from every brk() the kernel returns.
"""

from __future__ import annotations

import ctypes
import threading
import time
from pathlib import Path

from memtop.core.errors import PidNotFound
from memtop.probes.base import BpfProbe
from memtop.probes.procmaps import is_alive, read_maps
from memtop.probes.symbols import Symbolizer
from memtop.records import Record
from memtop.records.process import GrowthStack, TargetGone

MAX_STACKS = 4096
MAX_LIVE = 65536
MAX_TIDS = 4096

FIELDS = (
    "brk_calls",
    "brk_grown_bytes",
    "brk_shrunk_bytes",
    "mmap_calls",
    "mmap_bytes",
    "munmap_calls",
    "munmap_bytes",
    "freed_bytes",
)


class _Brk(ctypes.Structure):
    C_STRUCT = "struct brk_t"  # in bpf/growth.bpf.c; the layout is checked (memtop.probes.layout)
    _fields_ = [("cur", ctypes.c_uint64), ("known", ctypes.c_uint64)]


def current_brk(pid: int, proc_root: str = "/proc") -> int | None:
    """Best reading of the current program break from outside: the end of [heap] (page-aligned,
    exact while the break is page-aligned, as glibc keeps it), else start_brk (no heap yet)."""
    entries = read_maps(pid, proc_root)
    if entries is None:
        return None
    for m in entries:
        if m.path == "[heap]":
            return m.end
    try:
        text = Path(proc_root, str(pid), "stat").read_text("utf-8", "surrogateescape")
        return int(text[text.rindex(")") + 2 :].split()[44])  # field 47: start_brk
    except (OSError, ValueError, IndexError):
        return None


class GrowthProbe(BpfProbe):
    name = "growth"
    program = "growth"
    tracepoints = (
        "syscalls:sys_enter_brk",
        "syscalls:sys_exit_brk",
        "syscalls:sys_enter_mmap",
        "syscalls:sys_exit_mmap",
        "syscalls:sys_enter_munmap",
    )
    cadence_s = 1.0

    def __init__(self, pid: int = 0, proc_root: str = "/proc") -> None:
        super().__init__()
        # the bridge may close a probe (screen closed) while a worker thread polls it
        self._lock = threading.Lock()
        self.pid = pid
        self.proc_root = proc_root
        self._sym = Symbolizer(pid, proc_root)
        self._sent: dict[int, tuple[int, ...]] = {}
        self._gone = False

    def defines(self) -> dict[str, int]:
        return {"MAX_STACKS": MAX_STACKS, "MAX_LIVE": MAX_LIVE, "MAX_TIDS": MAX_TIDS}

    def cflags(self) -> list[str]:
        return [f"-DTARGET_PID={self.pid}", *self.define_flags()]

    def note(self) -> str:
        return f"pid {self.pid}"

    def load(self) -> None:
        if not Path(self.proc_root, str(self.pid), "stat").exists():
            raise PidNotFound(f"pid {self.pid} is gone", "pick a running process")
        super().load()

    def after_load(self) -> None:
        brk = current_brk(self.pid, self.proc_root)
        if brk is not None:
            self.bpf["cur_brk"][ctypes.c_int(0)] = _Brk(brk, 1)

    def poll(self) -> list[Record]:
        with self._lock:
            return self._poll() if self.bpf is not None else []

    def _poll(self) -> list[Record]:
        out: list[Record] = []
        alive = is_alive(self.pid, self.proc_root)
        if not alive and not self._gone:
            self._gone = True
            out.append(TargetGone(self.pid, time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
        stacks = self.bpf["stacks"]
        for k, v in self.bpf["growth"].items():
            sid = int(k.value)
            vals = tuple(int(getattr(v, f)) for f in FIELDS)
            if self._sent.get(sid) == vals:
                continue
            frames = self._sym.stack_frames_of(stacks, sid, alive)
            out.append(GrowthStack(self.pid, sid, frames, *vals))
            self._sent[sid] = vals
        out.append(self.lost_record(what="stacks"))
        return out

    def close(self) -> None:
        with self._lock:
            self._sym.close()
            super().close()
