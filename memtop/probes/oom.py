"""oom: OOM kills from oom:mark_victim (one ring-buffer event per kill; kills are rare).

The kernel log's own line for each kill (``oom-kill:constraint=CONSTRAINT_MEMCG,...,pid=N``),
read from /dev/kmsg when we may, confirms the scope and names the memcg; without it the scope comes
from the trigger's latest reclaim (see bpf/oom.bpf.c). On kernels whose mark_victim has only
``pid``, what /proc still knows about the victim fills the rest; what nobody knew is listed in the
record's ``missing``.
"""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path
from typing import Any

from memtop import tracefs
from memtop.probes.base import BpfProbe, enumerated
from memtop.records import Record
from memtop.records.oom import OomKill
from memtop.text import clean

#: what the OOM killer had run out of, by the number the program gives it (``SCOPE_<NAME>``)
SCOPES = ("unknown", "memcg", "global")
#: oom_score_adj when the kernel's mark_victim does not carry it (below the kernel's -1000)
ADJ_UNKNOWN = -10000
KMSG_TAIL = re.compile(r",task=(?P<task>.*),pid=(?P<pid>\d+),uid=(?P<uid>\d+)\s*$")


class _Event(ctypes.Structure):
    C_STRUCT = "struct oom_event_t"  # in bpf/oom.bpf.c; the layout is checked (memtop.probes.layout)
    _fields_ = [
        ("ts_ns", ctypes.c_uint64),
        ("total_vm_kb", ctypes.c_uint64),
        ("anon_rss_kb", ctypes.c_uint64),
        ("file_rss_kb", ctypes.c_uint64),
        ("shmem_rss_kb", ctypes.c_uint64),
        ("pgtables_kb", ctypes.c_uint64),
        ("victim_pid", ctypes.c_uint32),
        ("trigger_pid", ctypes.c_uint32),
        ("trigger_tid", ctypes.c_uint32),
        ("uid", ctypes.c_uint32),
        ("oom_score_adj", ctypes.c_int32),
        ("scope", ctypes.c_uint32),
        ("victim_comm", ctypes.c_char * 16),
        ("trigger_comm", ctypes.c_char * 16),
    ]


class KernelLog:
    """New lines of /dev/kmsg, read without blocking; silent when it cannot be opened."""

    def __init__(self, path: str = "/dev/kmsg") -> None:
        self.fd: int | None = None
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)  # only what is logged from now on
        except OSError:
            self.close()

    def lines(self, limit: int = 10000) -> list[str]:
        out: list[str] = []
        while self.fd is not None and len(out) < limit:
            try:
                data = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:  # records were overwritten before we read them
                continue
            except OSError:
                break
            if not data:
                break
            _, _, msg = data.decode("utf-8", errors="replace").partition(";")
            out.append(msg.split("\n", 1)[0])
        return out

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


#: the memcg's figures the kernel prints before a memcg OOM kill (mem_cgroup_print_oom_meminfo)
KMSG_MEMCG_USAGE = re.compile(r"\bmemory: usage (\d+)kB, limit (\d+)kB, failcnt (\d+)")


def parse_kmsg_usage(line: str) -> tuple[int, int, int] | None:
    """(usage bytes, limit bytes, failcnt) of the memcg at an OOM kill, from the kernel's
    ``memory: usage …kB, limit …kB, failcnt …`` line (printed just before the kill)."""
    m = KMSG_MEMCG_USAGE.search(line)
    if m is None:
        return None
    return int(m.group(1)) * 1024, int(m.group(2)) * 1024, int(m.group(3))


_KMSG_ESCAPE = re.compile(r"\\x([0-9a-f]{2})")


def kmsg_unescape(text: str) -> str:
    """Text as the kernel printed it: /dev/kmsg writes each byte below space or above 126 and
    each backslash as ``\\xNN``. Undone here (bytes that are not UTF-8 surrogate-escaped, as os
    names a directory), so a memcg path from the log is the cgroups probe's path once both are
    cleaned, whatever bytes or backslashes (systemd's ``\\x2d``) its name holds."""
    if "\\x" not in text:
        return text
    raw = _KMSG_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
    return raw.encode("latin-1", "surrogateescape").decode("utf-8", "surrogateescape")


def parse_kmsg_task_memcg(line: str) -> str:
    """The victim's own memcg (``task_memcg=``) from an ``oom-kill:`` line ("" when absent)."""
    m = re.search(r"[:,]task_memcg=([^,]*)", line)
    return clean(kmsg_unescape(m.group(1))) if m else ""


def parse_kmsg_kill(line: str) -> tuple[int, str, str] | None:
    """(victim pid, scope, memcg path) from the kernel's ``oom-kill:`` summary line."""
    at = line.find("oom-kill:")
    if at < 0:
        return None
    body = line[at + len("oom-kill:") :]
    m = KMSG_TAIL.search(body)
    if m is None:
        return None
    kv = dict(p.split("=", 1) for p in body[: m.start()].split(",") if "=" in p)
    constraint = kv.get("constraint", "")
    if not constraint:
        return None
    scope = "memcg" if constraint == "CONSTRAINT_MEMCG" else "global"
    return int(m.group("pid")), scope, clean(kmsg_unescape(kv.get("oom_memcg", "")))


def loadavg(proc: Path = Path("/proc")) -> tuple[float, float, float]:
    try:
        parts = (proc / "loadavg").read_text().split()
        return float(parts[0]), float(parts[1]), float(parts[2])
    except (OSError, ValueError, IndexError):
        return 0.0, 0.0, 0.0


class OomProbe(BpfProbe):
    name = "oom"
    program = "oom"
    shares_unit = True
    tracepoints = ("oom:mark_victim",)
    optional_tracepoints = ("vmscan:mm_vmscan_memcg_reclaim_begin", "vmscan:mm_vmscan_direct_reclaim_begin")
    cadence_s = 0.5

    def __init__(self, max_tids: int = 16384, ringbuf_pages: int = 8, kmsg: str = "/dev/kmsg") -> None:
        super().__init__()
        self.max_tids = max_tids
        self.ringbuf_pages = ringbuf_pages
        self.kmsg_path = kmsg
        self.fields: set[str] = set()
        self.kmsg: KernelLog | None = None
        self._pending: list[_Event] = []
        self._kmsg_kills: dict[int, tuple[str, str, str, tuple[int, int, int] | None]] = {}
        self._kmsg_usage: tuple[int, int, int] | None = None

    def defines(self) -> dict[str, int]:
        return {
            "MAX_TIDS": self.max_tids,
            "RINGBUF_PAGES": self.ringbuf_pages,
            **enumerated("SCOPE_", SCOPES),
            "ADJ_UNKNOWN": ADJ_UNKNOWN,
        }

    def cflags(self) -> list[str]:
        self.fields = tracefs.tracepoint_fields("oom:mark_victim")
        flags = self.define_flags()
        if "comm" in self.fields:
            flags.append("-DMV_HAS_COMM")
        if {"total_vm", "anon_rss", "file_rss", "shmem_rss"} <= self.fields:
            flags.append("-DMV_HAS_RSS")
        if "uid" in self.fields:
            flags.append("-DMV_HAS_UID")
        if "pgtables" in self.fields:
            flags.append("-DMV_HAS_PGTABLES")
        if "oom_score_adj" in self.fields:
            flags.append("-DMV_HAS_ADJ")
        if tracefs.tracepoint_exists("vmscan:mm_vmscan_memcg_reclaim_begin"):
            flags.append("-DHAVE_MEMCG_RECLAIM")
        if tracefs.tracepoint_exists("vmscan:mm_vmscan_direct_reclaim_begin"):
            flags.append("-DHAVE_DIRECT_RECLAIM")
        return flags

    def after_load(self) -> None:
        self.bpf["oom_events"].open_ring_buffer(self._on_event)
        self.kmsg = KernelLog(self.kmsg_path)

    def note(self) -> str:
        return "kernel log: " + ("yes" if self.kmsg is not None and self.kmsg.fd is not None else "no")

    def _on_event(self, _ctx: Any, data: Any, _size: int) -> None:
        ev = _Event()
        ctypes.memmove(ctypes.byref(ev), data, ctypes.sizeof(ev))
        self._pending.append(ev)

    def close(self) -> None:
        super().close()
        if self.kmsg is not None:
            self.kmsg.close()
            self.kmsg = None

    def poll(self) -> list[Record]:
        if self.bpf is None:
            return []
        self.bpf.ring_buffer_consume()
        out: list[Record] = []
        if self.kmsg is not None:
            for line in self.kmsg.lines():
                usage = parse_kmsg_usage(line)
                if usage is not None:
                    self._kmsg_usage = usage
                    continue
                kill = parse_kmsg_kill(line)
                if kill is not None:
                    # the usage line belongs to this kill only when it was a memcg's
                    at_kill = self._kmsg_usage if kill[1] == "memcg" else None
                    self._kmsg_kills[kill[0]] = (kill[1], kill[2], parse_kmsg_task_memcg(line), at_kill)
                    self._kmsg_usage = None
        events, self._pending = self._pending, []
        if events:
            load = loadavg()
            for ev in events:
                out.append(self._record(ev, load))
        if len(self._kmsg_kills) > 256:
            self._kmsg_kills.clear()
        out.append(self.lost_record("oom_lost"))
        return out

    def _record(self, ev: _Event, load: tuple[float, float, float]) -> OomKill:
        pid = int(ev.victim_pid)
        missing: list[str] = []
        comm = clean(bytes(ev.victim_comm).split(b"\0", 1)[0])
        total_vm, anon, file, shmem = (
            int(ev.total_vm_kb) * 1024,
            int(ev.anon_rss_kb) * 1024,
            int(ev.file_rss_kb) * 1024,
            int(ev.shmem_rss_kb) * 1024,
        )
        uid, adj = int(ev.uid), int(ev.oom_score_adj)
        proc = Path(f"/proc/{pid}")
        if "comm" not in self.fields:
            comm = _read(proc / "comm").strip()
            if not comm:
                missing.append("victim_comm")
            comm = clean(comm)
        if not {"total_vm", "anon_rss", "file_rss", "shmem_rss"} <= self.fields:
            status = _status(proc)
            if status:
                total_vm, anon = status.get("VmSize", 0), status.get("RssAnon", 0)
                file, shmem = status.get("RssFile", 0), status.get("RssShmem", 0)
            else:
                missing += ["total_vm_bytes", "anon_rss_bytes", "file_rss_bytes", "shmem_rss_bytes"]
        if "uid" not in self.fields:
            try:
                uid = proc.stat().st_uid
            except OSError:
                missing.append("uid")
        if "oom_score_adj" not in self.fields:
            try:
                adj = int(_read(proc / "oom_score_adj"))
            except ValueError:
                missing.append("oom_score_adj")
        scope = SCOPES[ev.scope] if ev.scope < len(SCOPES) else "unknown"
        memcg = task_memcg = ""
        at_kill: tuple[int, int, int] | None = None
        from_log = self._kmsg_kills.pop(pid, None)
        if from_log is not None:
            scope, memcg, task_memcg, at_kill = from_log
        return OomKill(
            ts_ns=int(ev.ts_ns),
            victim_pid=pid,
            victim_comm=comm,
            trigger_pid=int(ev.trigger_pid),
            trigger_comm=clean(bytes(ev.trigger_comm).split(b"\0", 1)[0]),
            scope=scope,
            total_vm_bytes=total_vm,
            anon_rss_bytes=anon,
            file_rss_bytes=file,
            shmem_rss_bytes=shmem,
            uid=uid,
            oom_score_adj=adj,
            pgtables_bytes=int(ev.pgtables_kb) * 1024,
            memcg=memcg,
            task_memcg=task_memcg,
            memcg_usage_bytes=at_kill[0] if at_kill else None,
            memcg_limit_bytes=at_kill[1] if at_kill else None,
            memcg_failcnt=at_kill[2] if at_kill else None,
            loadavg=load,
            missing=tuple(missing),
        )


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _status(proc: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in _read(proc / "status").splitlines():
        k, _, v = line.partition(":")
        parts = v.split()
        if k in ("VmSize", "RssAnon", "RssFile", "RssShmem") and parts:
            out[k] = int(parts[0]) * 1024
    return out
