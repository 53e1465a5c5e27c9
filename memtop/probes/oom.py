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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtop.core.text import clean
from memtop.linux import tracefs
from memtop.probes.base import BpfProbe, enumerated
from memtop.records import Record
from memtop.records.oom import OomKill

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
    """Records of /dev/kmsg, read without blocking; silent when it cannot be opened.

    A fresh descriptor reads from the oldest record the ring still holds (the history: kills
    before memtop started); ``from_start=False`` seeks past them first."""

    def __init__(self, path: str = "/dev/kmsg", from_start: bool = False) -> None:
        self.fd: int | None = None
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            if not from_start:
                os.lseek(self.fd, 0, os.SEEK_END)  # only what is logged from now on
        except OSError:
            self.close()

    def records(self, limit: int = 10000) -> list[tuple[int, str]]:
        """(timestamp µs since boot, first line of the message) of each new record."""
        out: list[tuple[int, str]] = []
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
            head, _, msg = data.decode("utf-8", errors="replace").partition(";")
            # "priority,sequence,timestamp_us,flags[,…];message\n key=value…"
            fields = head.split(",")
            try:
                ts_us = int(fields[2])
            except (IndexError, ValueError):
                ts_us = 0
            out.append((ts_us, msg.split("\n", 1)[0]))
        return out

    def lines(self, limit: int = 10000) -> list[str]:
        return [msg for _, msg in self.records(limit)]

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


KMSG_INVOKED = re.compile(
    r"^(?P<comm>.*) invoked oom-killer: gfp_mask=(?P<gfp>\S*?),? order=(?P<order>-?\d+), oom_score_adj=(?P<adj>-?\d+)"
)
KMSG_CPU = re.compile(r"^CPU: \d+ (?:UID: \d+ )?PID: (?P<pid>\d+) Comm: ")
KMSG_KILLED = re.compile(
    r"Killed process (?P<pid>\d+) \((?P<comm>.*)\) total-vm:(?P<vm>\d+)kB, anon-rss:(?P<anon>\d+)kB, "
    r"file-rss:(?P<file>\d+)kB, shmem-rss:(?P<shmem>\d+)kB, UID:(?P<uid>\d+) pgtables:(?P<pgt>\d+)kB "
    r"oom_score_adj:(?P<adj>-?\d+)"
)
#: task table rows kept per report (the largest by RSS)
TOP_TASKS = 5


@dataclass
class OomReport:
    """One OOM report of the kernel log as far as it has been read (dump_header's lines, then the
    ``oom-kill:`` summary, then ``Killed process``)."""

    ts_ns: int = 0
    trigger_comm: str = ""
    trigger_pid: int = 0
    gfp_mask: str = ""
    order: int | None = None
    usage: tuple[int, int, int] | None = None
    scope: str = "unknown"
    memcg: str = ""
    task_memcg: str = ""
    victim_pid: int = 0
    columns: list[str] = field(default_factory=list)
    tasks: list[tuple[int, str, int, int]] = field(default_factory=list)

    def top_tasks(self) -> tuple[tuple[int, str, int, int], ...]:
        return tuple(sorted(self.tasks, key=lambda t: -t[2])[:TOP_TASKS])


class ReportParser:
    """Reads the kernel's OOM reports line by line out of /dev/kmsg records."""

    def __init__(self) -> None:
        self.report: OomReport | None = None
        self.page_bytes = os.sysconf("SC_PAGE_SIZE")

    def feed(self, ts_us: int, line: str) -> tuple[str, OomReport | None, OomKill | None]:
        """What the line was: ("summary", report, None) at the ``oom-kill:`` line, ("killed",
        report or None, the kill as the log tells it) at ``Killed process``, else ("", None, None)."""
        m = KMSG_INVOKED.match(line)
        if m is not None:
            self.report = OomReport(
                ts_ns=ts_us * 1000,
                trigger_comm=clean(m.group("comm")),
                gfp_mask=clean(m.group("gfp")),
                order=int(m.group("order")),
            )
            return "", None, None
        r = self.report
        if r is not None:
            if not r.trigger_pid and (m := KMSG_CPU.match(line)) is not None:
                r.trigger_pid = int(m.group("pid"))
                return "", None, None
            usage = parse_kmsg_usage(line)
            if usage is not None:
                r.usage = usage
                return "", None, None
            if line.startswith("Tasks state"):
                r.columns = ["?"]  # the header line comes next
                return "", None, None
            if r.columns == ["?"] and line.lstrip().startswith("[  pid  ]"):
                r.columns = line.replace("[  pid  ]", "pid").split()
                return "", None, None
            if r.columns and r.columns != ["?"] and line.startswith("["):
                self._task(r, line)
                return "", None, None
        kill = parse_kmsg_kill(line)
        if kill is not None:
            if r is None:
                r = self.report = OomReport(ts_ns=ts_us * 1000)
            r.victim_pid, r.scope, r.memcg = kill
            r.task_memcg = parse_kmsg_task_memcg(line)
            if r.scope != "memcg":
                r.usage = None  # the usage line belongs to a memcg's kill only
            return "summary", r, None
        m = KMSG_KILLED.search(line)
        if m is not None:
            pid = int(m.group("pid"))
            rep = r if r is not None and r.victim_pid == pid else None
            self.report = None
            return "killed", rep, _logged_kill(ts_us, m, rep)
        return "", None, None

    def _task(self, r: OomReport, line: str) -> None:
        parts = line.replace("[", " ").replace("]", " ").split(None, len(r.columns) - 1)
        if len(parts) != len(r.columns):
            return
        row = dict(zip(r.columns, parts, strict=True))
        try:
            pid, rss, adj = int(row["pid"]), int(row["rss"]), int(row.get("oom_score_adj", "0"))
        except (KeyError, ValueError):
            return
        r.tasks.append((pid, clean(row.get("name", "")), rss * self.page_bytes, adj))
        if len(r.tasks) > 4 * TOP_TASKS:  # a table of thousands: keep the largest only
            r.tasks = list(r.top_tasks())


def _logged_kill(ts_us: int, m: re.Match[str], r: OomReport | None) -> OomKill:
    """A kill as the kernel log tells it (no load average: it was not read then)."""
    kb = 1024
    return OomKill(
        ts_ns=r.ts_ns if r is not None and r.ts_ns else ts_us * 1000,
        victim_pid=int(m.group("pid")),
        victim_comm=clean(m.group("comm")),
        trigger_pid=r.trigger_pid if r is not None else 0,
        trigger_comm=r.trigger_comm if r is not None else "",
        scope=r.scope if r is not None else "unknown",
        total_vm_bytes=int(m.group("vm")) * kb,
        anon_rss_bytes=int(m.group("anon")) * kb,
        file_rss_bytes=int(m.group("file")) * kb,
        shmem_rss_bytes=int(m.group("shmem")) * kb,
        uid=int(m.group("uid")),
        oom_score_adj=int(m.group("adj")),
        pgtables_bytes=int(m.group("pgt")) * kb,
        memcg=r.memcg if r is not None else "",
        task_memcg=r.task_memcg if r is not None else "",
        memcg_usage_bytes=r.usage[0] if r is not None and r.usage else None,
        memcg_limit_bytes=r.usage[1] if r is not None and r.usage else None,
        memcg_failcnt=r.usage[2] if r is not None and r.usage else None,
        missing=("loadavg",)
        + (("trigger_pid",) if r is None or not r.trigger_pid else ())
        + (("trigger_comm",) if r is None or not r.trigger_comm else ()),
        source="kmsg",
        gfp_mask=r.gfp_mask if r is not None else "",
        order=r.order if r is not None else None,
        top_tasks=r.top_tasks() if r is not None else (),
    )


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
        #: victim pid -> the kernel log's report of its kill, waiting for mark_victim's event
        self._kmsg_kills: dict[int, OomReport] = {}
        self._parser = ReportParser()
        #: kills the kernel log held when memtop started, sent with the first poll
        self._history: list[OomKill] | None = None

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
        # A fresh descriptor starts at the ring's oldest record: the kills before memtop started.
        # The same descriptor then follows what is logged from now on.
        self.kmsg = KernelLog(self.kmsg_path, from_start=True)
        history: list[OomKill] = []
        while True:
            batch = self.kmsg.records()
            for ts_us, line in batch:
                what, _, kill = self._parser.feed(ts_us, line)
                if what == "killed" and kill is not None:
                    history.append(kill)
            if not batch:
                break
        self._history = history

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
            for ts_us, line in self.kmsg.records():
                what, report, _ = self._parser.feed(ts_us, line)
                if what == "summary" and report is not None:
                    self._kmsg_kills[report.victim_pid] = report
        events, self._pending = self._pending, []
        if self._history is not None:
            # A kill reported just before the probe attached whose mark_victim came just after
            # is in both: mark_victim's event stands for it (it has the load average).
            seen = {int(ev.victim_pid) for ev in events}
            out += [k for k in self._history if k.victim_pid not in seen]
            self._history = None
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
        memcg = task_memcg = gfp = ""
        at_kill: tuple[int, int, int] | None = None
        order: int | None = None
        top: tuple[tuple[int, str, int, int], ...] = ()
        report = self._kmsg_kills.pop(pid, None)
        if report is not None:
            scope, memcg, task_memcg, at_kill = report.scope, report.memcg, report.task_memcg, report.usage
            gfp, order, top = report.gfp_mask, report.order, report.top_tasks()
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
            gfp_mask=gfp,
            order=order,
            top_tasks=top,
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
