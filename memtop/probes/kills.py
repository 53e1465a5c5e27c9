"""kills: SIGKILL and SIGTERM from signal:signal_generate (one ring-buffer event per signal; the
filter runs in the kernel, so other signals cost one comparison), each sender matched against the
known userspace memory killers by its executable.

The sender's executable is read from /proc when the event is drained (within ``cadence_s``); a
sender that exited by then is matched by the command name the kernel recorded. Interpreted killers
(nohang is Python) are matched by their script too (the first arguments of their command line).
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Iterable
from typing import Any

from memtop.core.text import clean
from memtop.linux import tracefs
from memtop.probes.base import BpfProbe
from memtop.records import Record
from memtop.records.oom import OomScoreAdj, SignalKill

#: executables (or scripts) of the userspace memory killers memtop knows
KNOWN_KILLERS = ("earlyoom", "systemd-oomd", "oomd", "nohang", "kubelet", "low-memory-monitor")
#: SIGKILLs of processes holding more than this, by any sender, are listed ("killed by PID COMM")
THRESHOLD_BYTES = 100 << 20
#: the kernel keeps 15 characters of a command name
COMM_LEN = 15
#: si_code of a signal the kernel sends on its own behalf (SEND_SIG_PRIV): the OOM killer's SIGKILL,
#: which oom:mark_victim reports, is left out in the program
SI_KERNEL = 0x80
#: seconds between scans of every process's oom_score_adj (rarely changes; a read per process)
ADJ_EVERY_S = 5.0
#: processes with a non-zero adj sent at most (a machine full of them: the first ones)
ADJ_MAX = 4096


class _Event(ctypes.Structure):
    C_STRUCT = "struct kill_event_t"  # in bpf/kills.bpf.c; the layout is checked (memtop.probes.layout)
    _fields_ = [
        ("ts_ns", ctypes.c_uint64),
        ("sender_pid", ctypes.c_uint32),
        ("sender_tid", ctypes.c_uint32),
        ("victim_pid", ctypes.c_uint32),
        ("sig", ctypes.c_int32),
        ("code", ctypes.c_int32),
        ("group", ctypes.c_int32),
        ("result", ctypes.c_int32),
        ("pad", ctypes.c_uint32),
        ("sender_comm", ctypes.c_char * 16),
        ("victim_comm", ctypes.c_char * 16),
    ]


def match_killer(names: Iterable[str], exe: str, comm: str, argv: list[str]) -> str:
    """The known killer among ``names`` that the sender is: by its executable's file name, its
    script (an interpreter's first arguments), else its command name (cut to 15 characters)."""
    wanted = list(names)
    base = os.path.basename(exe)
    for name in wanted:
        if base == name or any(os.path.basename(a) == name for a in argv[:2]):
            return name
    for name in wanted:
        if comm == name[:COMM_LEN]:
            return name
    return ""


class KillsProbe(BpfProbe):
    name = "kills"
    program = "kills"
    shares_unit = True
    tracepoints = ("signal:signal_generate",)
    cadence_s = 0.5

    def __init__(
        self,
        killers: Iterable[str] = (),
        threshold_bytes: int = THRESHOLD_BYTES,
        ringbuf_pages: int = 8,
        proc: str = "/proc",
    ) -> None:
        super().__init__()
        self.killers: tuple[str, ...] = KNOWN_KILLERS
        self.threshold_bytes = THRESHOLD_BYTES
        self.configure(killers, threshold_bytes)
        self.ringbuf_pages = ringbuf_pages
        self.proc = proc
        self._pending: list[_Event] = []
        self._adj_at = 0.0
        self._adj: tuple[tuple[int, int], ...] | None = None

    def configure(self, killers: Iterable[str], threshold_bytes: int) -> None:
        """The known killers plus the user's (``--killer``), and the threshold of other SIGKILLs."""
        self.killers = KNOWN_KILLERS + tuple(k for k in killers if k and k not in KNOWN_KILLERS)
        self.threshold_bytes = threshold_bytes

    def defines(self) -> dict[str, int]:
        return {
            "RINGBUF_PAGES": self.ringbuf_pages,
            "KILL_SIGKILL": int(signal.SIGKILL),
            "KILL_SIGTERM": int(signal.SIGTERM),
            "KILL_SI_KERNEL": SI_KERNEL,
        }

    def cflags(self) -> list[str]:
        flags = self.define_flags()
        if "code" in tracefs.tracepoint_fields("signal:signal_generate"):
            flags.append("-DHAVE_CODE")
        return flags

    def after_load(self) -> None:
        self.bpf["kill_events"].open_ring_buffer(self._on_event)

    def _on_event(self, _ctx: Any, data: Any, _size: int) -> None:
        ev = _Event()
        ctypes.memmove(ctypes.byref(ev), data, ctypes.sizeof(ev))
        self._pending.append(ev)

    def poll(self) -> list[Record]:
        if self.bpf is None:
            return []
        self.bpf.ring_buffer_consume()
        events, self._pending = self._pending, []
        out: list[Record] = [self._record(ev) for ev in events]
        now = time.monotonic()
        if now - self._adj_at >= ADJ_EVERY_S:
            self._adj_at = now
            adj = self.scan_adj()
            if adj != self._adj:
                self._adj = adj
                out.append(OomScoreAdj(adjusted=adj))
        out.append(self.lost_record("kills_lost"))
        return out

    def scan_adj(self) -> tuple[tuple[int, int], ...]:
        """(pid, oom_score_adj) of every process whose adj is not 0."""
        out: list[tuple[int, int]] = []
        try:
            names = os.listdir(self.proc)
        except OSError:
            return ()
        for name in names:
            if not name.isdigit():
                continue
            raw = self._read(f"{self.proc}/{name}/oom_score_adj").strip()
            if raw and raw != b"0":
                try:
                    out.append((int(name), int(raw)))
                except ValueError:
                    continue
                if len(out) >= ADJ_MAX:
                    break
        return tuple(sorted(out))

    def _record(self, ev: _Event) -> SignalKill:
        sender = int(ev.sender_pid)
        comm = clean(bytes(ev.sender_comm).split(b"\0", 1)[0])
        exe = self._readlink(f"{self.proc}/{sender}/exe")
        argv = [clean(a) for a in self._read(f"{self.proc}/{sender}/cmdline").split(b"\0")[:2]]
        victim = int(ev.victim_pid)
        rss, swap = self._memory(victim)
        return SignalKill(
            ts_ns=int(ev.ts_ns),
            sig=int(ev.sig),
            victim_pid=victim,
            victim_comm=clean(bytes(ev.victim_comm).split(b"\0", 1)[0]),
            sender_pid=sender,
            sender_tid=int(ev.sender_tid),
            sender_comm=comm,
            sender_exe=exe,
            killer=match_killer(self.killers, exe, comm, argv),
            result=int(ev.result),
            group=bool(ev.group),
            rss_bytes=rss,
            swap_bytes=swap,
            threshold_bytes=self.threshold_bytes,
        )

    def _memory(self, pid: int) -> tuple[int | None, int | None]:
        """The victim's VmRSS and VmSwap now, if it still has its memory (None: gone)."""
        rss = swap = None
        for line in self._read(f"{self.proc}/{pid}/status").splitlines():
            key, _, value = line.partition(b":")
            parts = value.split()
            if key in (b"VmRSS", b"VmSwap") and parts and parts[0].isdigit():
                if key == b"VmRSS":
                    rss = int(parts[0]) * 1024
                else:
                    swap = int(parts[0]) * 1024
        return rss, swap

    @staticmethod
    def _read(path: str) -> bytes:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return b""
        try:
            return os.read(fd, 65536)
        except OSError:
            return b""
        finally:
            os.close(fd)

    @staticmethod
    def _readlink(path: str) -> str:
        try:
            return clean(os.fsencode(os.readlink(path)))
        except OSError:
            return ""
