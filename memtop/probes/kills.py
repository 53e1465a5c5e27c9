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
import resource
import signal
import time
from collections.abc import Iterable
from typing import Any

from memtop.core.text import clean
from memtop.linux import cgroupfs, tracefs
from memtop.probes import killreasons, oomctl
from memtop.probes.base import BpfProbe
from memtop.records import Record
from memtop.records.oom import KillReason, MemoryKillers, OomdMonitored, OomScoreAdj, SignalKill

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
#: a command name read for the first time is read again by the next scan, and trusted only when
#: both reads agree: a scan that falls between a fork and its exec (``sh -c '... & exec nohang'``)
#: reads the shell's name; every name is read again each this many scans (an exec, or a prctl
#: rename, long after the fork is seen within a minute)
COMM_REREAD_SCANS = 12
#: oom_score_adj files held open at most (the procfs probe holds each process's stat too; the
#: file limit is shared with BPF maps); past it, the others are opened per scan
ADJ_HELD_MAX = 16384
#: processes with a non-zero adj sent at most (a machine full of them: the first ones)
ADJ_MAX = 4096


#: earlyoom's defaults: SIGTERM when MemAvailable and SwapFree are both at or under 10 %
EARLYOOM_DEFAULT_PERCENT = 10.0
#: earlyoom's options that take a value, skipped (a ``--prefer`` regex may begin with "-m")
EARLYOOM_VALUED = ("-r", "-N", "--prefer", "--avoid", "--ignore")
#: systemd-oomd's configuration, the later overriding the earlier (systemd's drop-in order)
OOMD_CONF = "/etc/systemd/oomd.conf"
OOMD_DROPINS = ("/usr/lib/systemd/oomd.conf.d", "/run/systemd/oomd.conf.d", "/etc/systemd/oomd.conf.d")
#: systemd-oomd's defaults (oomd.conf(5)): kill when memory and swap are both used over 90 %;
#: a unit whose memory pressure stays over 60 % for 30 s
OOMD_SWAP_USED_PERCENT = 90.0
OOMD_PRESSURE_PERCENT = 60.0
#: a kill's reason is looked for in the journal this long after it (a killer logs after it sends)
REASON_AFTER_S = 1.0
#: and given up after this long
REASON_GIVE_UP_S = 10.0
#: seconds between journal reads (each a journalctl)
JOURNAL_EVERY_S = 2.0
#: the killers whose thresholds memtop reads, by command name
THRESHOLD_KILLERS = ("earlyoom", "systemd-oomd", "nohang")
#: nohang's configuration when its command line names none (``-c FILE``, ``--config FILE``)
NOHANG_CONF = "/etc/nohang/nohang.conf"

#: a killer entry of MemoryKillers: (killer, pid, memory %, swap %, memory KiB, swap KiB, PSI %, where)
Killer = tuple[str, int, float, float, int, int, float, str]


def _percent(value: str) -> float | None:
    """The first number of ``N[,M]`` as a percent in [0, 100] (None: not one)."""
    try:
        v = float(value.split(",", 1)[0])
    except ValueError:
        return None
    return v if 0 <= v <= 100 else None


def _kib(value: str) -> int | None:
    try:
        v = int(value.split(",", 1)[0])
    except ValueError:
        return None
    return v if v >= 0 else None


def earlyoom_thresholds(argv: list[str]) -> tuple[float, float, int, int]:
    """(memory %, swap %, memory KiB, swap KiB) earlyoom sends SIGTERM at, from its command line:
    ``-m PERCENT[,KILL]``, ``-s``, ``-M SIZE_KiB[,KILL]``, ``-S`` (as ``-m 5`` or ``-m5``); the KiB
    0 when not given; its defaults for what is not."""
    got: dict[str, str] = {}
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in EARLYOOM_VALUED:
            i += 2
            continue
        if len(a) >= 2 and a[0] == "-" and a[1] in "msMS":
            if len(a) > 2:
                got[a[1]] = a[2:]
            elif i + 1 < len(argv):
                got[a[1]] = argv[i + 1]
                i += 1
        i += 1
    mem = _percent(got.get("m", "")) if "m" in got else None
    swap = _percent(got.get("s", "")) if "s" in got else None
    mem_kib = _kib(got["M"]) if "M" in got else None
    swap_kib = _kib(got["S"]) if "S" in got else None
    # a size given alone replaces the percent (earlyoom takes the lower of both when both are)
    if mem is None:
        mem = 100.0 if mem_kib else EARLYOOM_DEFAULT_PERCENT
    if swap is None:
        swap = 100.0 if swap_kib else EARLYOOM_DEFAULT_PERCENT
    return mem, swap, mem_kib or 0, swap_kib or 0


def _oomd_percent(value: str) -> float | None:
    """systemd's percent syntax: ``90%``, ``900‰`` or ``9000‱``."""
    v = value.strip()
    for suffix, scale in (("%", 1.0), ("‰", 10.0), ("‱", 100.0)):
        if v.endswith(suffix):
            try:
                f = float(v[: -len(suffix)]) / scale
            except ValueError:
                return None
            return f if 0 <= f <= 100 else None
    return None


def oomd_thresholds(texts: list[str]) -> tuple[float, float]:
    """(SwapUsedLimit %, DefaultMemoryPressureLimit %) from oomd.conf and its drop-ins, in order
    (a later setting wins), systemd-oomd's defaults for what none sets."""
    swap, psi = OOMD_SWAP_USED_PERCENT, OOMD_PRESSURE_PERCENT
    for text in texts:
        section = ""
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line.strip("[]").strip()
                continue
            key, eq, value = line.partition("=")
            if not eq or section != "OOM":
                continue
            v = _oomd_percent(value)
            if v is None:
                continue
            if key.strip() == "SwapUsedLimit":
                swap = v
            elif key.strip() == "DefaultMemoryPressureLimit":
                psi = v
    return swap, psi


def _lines(raw: bytes) -> str:
    """A configuration file's text, each line cleaned apart (clean() escapes a newline and
    caps a string's length: the whole file cleaned at once would be one line, cut short)."""
    return "\n".join(clean(line) for line in raw.split(b"\n"))


def nohang_conf_path(argv: list[str]) -> str:
    """The configuration file nohang reads, from its command line (``-c FILE``, ``--config FILE``,
    ``--config=FILE``), else its default."""
    for i, a in enumerate(argv):
        if a in ("-c", "--config") and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--config="):
            return a.split("=", 1)[1]
    return NOHANG_CONF


def _nohang_value(value: str) -> tuple[float, int] | None:
    """nohang's ``N %`` (percent, KiB 0) or ``N M`` (MiB: percent 100, KiB) (None: neither)."""
    v = value.split("#", 1)[0].strip()
    try:
        if v.endswith("%"):
            pct = float(v[:-1])
            return (pct, 0) if 0 <= pct <= 100 else None
        if v.endswith("M"):
            mib = float(v[:-1])
            return (100.0, int(mib * 1024)) if mib >= 0 else None
    except ValueError:
        return None
    return None


def nohang_thresholds(text: str) -> tuple[float, float, int, int, float]:
    """(memory %, swap %, memory KiB, swap KiB, PSI %) nohang sends SIGTERM at, from its config:
    ``soft_threshold_min_mem`` / ``soft_threshold_min_swap`` (``N %`` or ``N M``: it acts when
    MemAvailable and SwapFree are both at or under them), and ``soft_threshold_max_psi`` when
    ``psi_checking_enabled`` (0: PSI not checked). Its defaults (5 %, 10 %) for what is not set."""
    got: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#@":
            continue
        key, eq, value = line.partition("=")
        if eq:
            got[key.strip()] = value.strip()
    mem = _nohang_value(got.get("soft_threshold_min_mem", "")) or (5.0, 0)
    swap = _nohang_value(got.get("soft_threshold_min_swap", "")) or (10.0, 0)
    psi = 0.0
    if got.get("psi_checking_enabled", "").split("#", 1)[0].strip() == "True":
        psi = _percent(got.get("soft_threshold_max_psi", "").split("#", 1)[0].strip()) or 0.0
    return mem[0], swap[0], mem[1], swap[1], psi


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
    #: every process's oom_score_adj (the OOM pane's column; nothing exported uses it): a read
    #: per process every scan
    optional_parts = ("oom_score_adj",)

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
        #: pid -> its oom_score_adj file, held open and re-read with pread (see ``scan_adj``)
        self._adj_fds: dict[int, int] = {}
        self._adj_held_max = -1
        #: pid -> command name of the processes seen by the last scan, read twice alike
        self._comms: dict[int, str] = {}
        #: pid -> command name read once by the last scan (read again by the next one)
        self._comms_new: dict[int, str] = {}
        self._scans = 0
        self._killers: tuple[Killer, ...] | None = None
        self.oomd_conf = OOMD_CONF
        #: kills by a killer that logs why, waiting for its line: (monotonic s, wall s, record)
        self._unexplained: list[tuple[float, float, SignalKill]] = []
        self._journal_at = 0.0
        self._layout: cgroupfs.Layout | None = None
        self.oomd_dropins = OOMD_DROPINS
        #: systemd-oomd's own account (oomctl dump), off the poll's thread
        self.oomctl = oomctl.Reader()
        self._oomd_seen: OomdMonitored | None = None

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
        out: list[Record] = []
        now = time.monotonic()
        for ev in events:
            rec = self._record(ev)
            out.append(rec)
            out.extend(self._xattr_reason(rec))
            if rec.killer in killreasons.JOURNAL_KILLERS and len(self._unexplained) < 256:
                self._unexplained.append((now, time.time(), rec))
        out.extend(self._journal_reasons(now))
        if now - self._adj_at >= ADJ_EVERY_S:
            self._adj_at = now
            if self.reads("oom_score_adj"):
                adj = self.scan_adj()
                if adj != self._adj:
                    self._adj = adj
                    out.append(OomScoreAdj(adjusted=adj))
            elif self._adj_fds or self._adj is not None:  # no longer used: its files go
                self._adj = None
                for pid in list(self._adj_fds):
                    self._drop_adj(pid)
            killers = self.scan_killers()
            if killers != self._killers:
                self._killers = killers
                out.append(MemoryKillers(killers=killers))
        out.extend(self._oomctl())
        out.append(self.lost_record("kills_lost"))
        return out

    def _oomctl(self) -> list[Record]:
        """systemd-oomd's monitored cgroups, when a run of oomctl finished (sent when changed)."""
        got = self.oomctl.take()
        if got is None:
            return []
        dump, why = got
        if dump is None:
            rec = OomdMonitored(status=why)
        else:
            rec = OomdMonitored(
                status="",
                dry_run=dump.dry_run,
                swap_used_limit_percent=dump.swap_used_limit_percent,
                pressure_limit_percent=dump.pressure_limit_percent,
                pressure_duration_s=dump.pressure_duration_s,
                monitored=tuple((m.path, m.rule, m.limit_percent, m.duration_s) for m in dump.monitored),
            )
        if rec == self._oomd_seen:
            return []
        self._oomd_seen = rec
        return [rec]

    def scan_adj(self) -> tuple[tuple[int, int], ...]:
        """(pid, oom_score_adj) of every process whose adj is not 0. Each process's file stays
        open and is re-read with pread (procfs regenerates it at offset 0): with 1,000
        processes, opening each every scan was most of an exporter's tick at a 15 s interval.
        A file whose process exited reads ESRCH, even once its pid is reused: it is closed."""
        out: list[tuple[int, int]] = []
        try:
            names = os.listdir(self.proc)
        except OSError:
            return ()
        fds = self._adj_fds
        listed: set[int] = set()
        for name in names:
            if not name.isdigit():
                continue
            pid = int(name)
            listed.add(pid)
            raw = self._read_adj(pid).strip()
            if raw and raw != b"0" and len(out) < ADJ_MAX:
                try:
                    out.append((pid, int(raw)))
                except ValueError:
                    continue
        for pid in [p for p in fds if p not in listed]:
            self._drop_adj(pid)
        return tuple(sorted(out))

    def _read_adj(self, pid: int) -> bytes:
        fd = self._adj_fds.get(pid)
        if fd is not None:
            try:
                return os.pread(fd, 64, 0)
            except OSError:  # ESRCH: the process this file was opened for is gone
                self._drop_adj(pid)
                return b""
        path = f"{self.proc}/{pid}/oom_score_adj"
        if self._adj_held_max < 0:  # once, after the procfs probe raised the file limit
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            self._adj_held_max = min(ADJ_HELD_MAX, soft // 4 if soft > 0 else ADJ_HELD_MAX)
        if len(self._adj_fds) >= self._adj_held_max:
            return self._read(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return b""
        try:
            raw = os.pread(fd, 64, 0)
        except OSError:
            os.close(fd)
            return b""
        self._adj_fds[pid] = fd
        return raw

    def _drop_adj(self, pid: int) -> None:
        fd = self._adj_fds.pop(pid, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        for pid in list(self._adj_fds):
            self._drop_adj(pid)
        super().close()

    def _xattr_reason(self, rec: SignalKill) -> list[Record]:
        """systemd-oomd's (and Meta oomd's) marks on the victim's cgroup, while it is still
        there (read with the event, before the victim is reaped)."""
        if rec.killer not in ("systemd-oomd", "oomd"):
            return []
        if self._layout is None:
            self._layout = cgroupfs.layout(self.proc)
        text = cgroupfs.read_text(f"{self.proc}/{rec.victim_pid}/cgroup")
        path = cgroupfs.proc_cgroups(text or "").get("unified")
        hier = self._layout.unified
        if path is None or hier is None:
            return []
        marks = killreasons.oomd_xattrs(hier.dir(path), killreasons.KILLER_XATTRS[rec.killer])
        if not marks:
            return []
        return [KillReason(rec.victim_pid, rec.killer, f"{clean(os.fsencode(path))}: {marks}")]

    def _journal_reasons(self, now: float) -> list[Record]:
        """The killers' own lines for the kills waiting for them: one journalctl every few
        seconds at most, once a kill is a second old (its line is written after the signal)."""
        self._unexplained = [u for u in self._unexplained if now - u[0] < REASON_GIVE_UP_S]
        due = [u for u in self._unexplained if now - u[0] >= REASON_AFTER_S]
        if not due or now - self._journal_at < JOURNAL_EVERY_S:
            return []
        self._journal_at = now
        lines = killreasons.journal_lines(min(u[1] for u in due) - 5, {u[2].killer for u in due})
        if not lines:
            return []
        out: list[Record] = []
        said = killreasons.reasons(lines)
        for u in due:
            rec = u[2]
            for s in said:
                if s.killer == rec.killer and s.victim_pid == rec.victim_pid:
                    out.append(KillReason(rec.victim_pid, rec.killer, s.reason, s.rule))
                    self._unexplained.remove(u)
                    break
        for s in said:  # systemd-oomd names the cgroup it killed, not the pids
            if s.victim_pid == 0 and s.cgroup:
                out.append(KillReason(0, s.killer, s.reason, s.rule, cgroup=s.cgroup))
        return out

    def scan_killers(self) -> tuple[Killer, ...]:
        """The running earlyoom and systemd-oomd processes and their thresholds. A process's
        command name is read when first seen, again by the next scan and once a minute
        (``COMM_REREAD_SCANS``); the command line of a killer each scan (a restarted earlyoom
        may have new options)."""
        try:
            pids = [int(n) for n in os.listdir(self.proc) if n.isdigit()]
        except OSError:
            return ()
        reread = self._scans % COMM_REREAD_SCANS == 0
        self._scans += 1
        comms: dict[int, str] = {}
        fresh: dict[int, str] = {}
        out: list[Killer] = []
        for pid in pids:
            comm = None if reread else self._comms.get(pid)
            if comm is None:
                comm = clean(self._read(f"{self.proc}/{pid}/comm").rstrip(b"\n"))
                before = self._comms.get(pid, self._comms_new.get(pid))
                (comms if comm == before else fresh)[pid] = comm
            else:
                comms[pid] = comm
            if comm not in THRESHOLD_KILLERS:
                continue
            if comm == "nohang":
                argv = [clean(a) for a in self._read(f"{self.proc}/{pid}/cmdline").split(b"\0")]
                conf = nohang_conf_path(argv)
                # the path as nohang sees it: its root and, for a relative one, its working directory
                where = (
                    f"{self.proc}/{pid}/root{conf}"
                    if conf.startswith("/")
                    else f"{self.proc}/{pid}/cwd/{conf}"
                )
                mem, swap, mem_kib, swap_kib, psi = nohang_thresholds(_lines(self._read(where)))
                out.append(("nohang", pid, mem, swap, mem_kib, swap_kib, psi, conf))
            elif comm == "earlyoom":
                argv = [clean(a) for a in self._read(f"{self.proc}/{pid}/cmdline").split(b"\0")]
                if not argv or not argv[0]:
                    continue  # gone, or a kernel thread
                mem, swap, mem_kib, swap_kib = earlyoom_thresholds(argv)
                out.append(("earlyoom", pid, mem, swap, mem_kib, swap_kib, 0.0, "cmdline"))
            else:
                used, psi = oomd_thresholds(self._oomd_texts())
                # it kills when memory and swap are both used over SwapUsedLimit: both free under
                # 100 - it
                out.append(("systemd-oomd", pid, 100 - used, 100 - used, 0, 0, psi, "oomd.conf"))
        self._comms, self._comms_new = comms, fresh
        return tuple(sorted(out, key=lambda k: (k[0], k[1])))

    def _oomd_texts(self) -> list[str]:
        """oomd.conf, then its drop-ins by file name across the directories (a later directory's
        file of the same name replaces the earlier's), as systemd reads them."""
        texts = [_lines(self._read(self.oomd_conf))]
        dropins: dict[str, str] = {}
        for d in self.oomd_dropins:
            try:
                names = os.listdir(d)
            except OSError:
                continue
            for name in names:
                if name.endswith(".conf"):
                    dropins[name] = f"{d}/{name}"
        texts.extend(_lines(self._read(dropins[n])) for n in sorted(dropins))
        return texts

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
