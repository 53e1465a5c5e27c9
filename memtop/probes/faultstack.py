"""faultstack: page faults of one process by user stack and by mapping (on demand, drill-in).

Opens the perf software events PAGE_FAULTS_MIN and PAGE_FAULTS_MAJ on each thread of the target
(pid=tid, cpu=-1, sample_period=1: every fault, exact counts) and runs bpf/faultstack.bpf.c on
them. Nothing else on the machine runs it, unlike a tracepoint or system-wide perf event. Threads
started later are picked up by rescanning /proc/PID/task on every poll (faults a new thread takes
before that are not seen; the pane says so).

Each traced thread costs two file descriptors. When the target has more threads than memtop's
open-file limit allows, the soft RLIMIT_NOFILE is raised to the hard one; threads beyond what is
left (keeping FD_RESERVE for everything else memtop opens) are not traced, and a FaultCoverage
record says how many and why, so no count is ever shown as the whole process's when it is not.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import threading
import time

from memtop.core.errors import PidNotFound, ProbeError
from memtop.linux import bcc_compat
from memtop.probes.base import BpfProbe, enumerated
from memtop.probes.procmaps import AddressMap, MapEntry, is_alive, read_maps
from memtop.probes.symbols import Symbolizer
from memtop.records import Lost, Record
from memtop.records.process import HUGETLB_LABEL, FaultCoverage, FaultFile, FaultStack, TargetGone

MAX_STACKS = 4096
MAX_RANGES = 16384  # power of two; mappings beyond it fall back to user-space resolution
RANGE_STEPS = 15  # log2(MAX_RANGES) + 1 binary-search steps
MAX_PATHS = 4096
MAX_UNRESOLVED = 65536
MAX_COARSE = 4096
RECENT = 32  # power of two: the last mmap() results checked first on a fault
MAX_RECENT_COUNTS = 4096
MAP_ANONYMOUS = 0x20
MAP_HUGETLB = 0x40000
COARSE_SHIFT = 21
#: a stack key's kind, by the number the program gives it (``KIND_<NAME>``): minor, major faults
KINDS = ("min", "maj")
#: slots of the program's ``lost`` array (``LOST_<NAME>``)
LOST = ("stacks", "addresses")
FDS_PER_THREAD = 2  # PAGE_FAULTS_MIN and PAGE_FAULTS_MAJ
#: descriptors left free for everything else memtop opens (BPF maps, /proc reads, other probes)
FD_RESERVE = 128


UNMAPPED = "[unmapped before it was read]"
CHANGED = "[mapping changed before it was read]"
FILE_GONE = "[file mapping, unmapped before it was read]"


class _Range(ctypes.Structure):
    C_STRUCT = "struct range_t"  # in bpf/faultstack.bpf.c; the layout is checked (memtop.probes.layout)
    _fields_ = [
        ("start", ctypes.c_uint64),
        ("end", ctypes.c_uint64),
        ("path_id", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
    ]


def open_fd_count() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def raise_nofile(need: int) -> int:
    """Raise the soft RLIMIT_NOFILE towards the hard one when ``need`` descriptors are more than
    it allows (per-thread perf events on a target with thousands of threads); the soft limit
    now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if need <= soft or (hard != resource.RLIM_INFINITY and hard <= soft):
        return soft
    ceiling = hard
    if hard == resource.RLIM_INFINITY:  # the kernel's per-process maximum caps it anyway
        try:
            ceiling = int(open("/proc/sys/fs/nr_open").read())
        except (OSError, ValueError):
            ceiling = max(need, soft)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
    except (OSError, ValueError):
        return soft
    return ceiling


def fd_limit_reason(threads: int) -> str:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    hard_s = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    return (
        f"open-file limit: {threads} threads need {FDS_PER_THREAD * threads} perf event fds, "
        f"RLIMIT_NOFILE is {soft} (hard {hard_s}); raise it (ulimit -Hn, LimitNOFILE=)"
    )


def list_tids(pid: int, proc_root: str = "/proc") -> list[int] | None:
    try:
        return sorted(int(t) for t in os.listdir(f"{proc_root}/{pid}/task") if t.isdigit())
    except OSError:
        return None


class FaultStackProbe(BpfProbe):
    name = "faultstack"
    program = "faultstack"
    features = ("perf_events",)
    # mapping removals (so a reused address is never charged to the wrong file)
    # mmap results and mapping removals of the target (filtered in kernel to it)
    tracepoints = (
        "syscalls:sys_enter_munmap",
        "syscalls:sys_enter_mremap",
        "syscalls:sys_enter_mmap",
        "syscalls:sys_exit_mmap",
    )
    cadence_s = 1.0

    def __init__(self, pid: int, proc_root: str = "/proc") -> None:
        super().__init__()
        # the bridge may close a probe (screen closed) while a worker thread polls it
        self._lock = threading.Lock()
        self.pid = pid
        self.proc_root = proc_root
        self._fds: dict[int, list[int]] = {}  # tid -> perf event fds
        self._threads_total = 0
        self._uncovered_reason = ""
        self._sent_coverage: FaultCoverage | None = None
        self._ids: tuple[int, int, int] = (0, 0, 0)
        self._sym = Symbolizer(pid, proc_root)
        self._sent_stacks: dict[int, tuple[int, int]] = {}
        self._path_ids: dict[str, int] = {}
        self._paths: list[str] = []
        self._maps_key: tuple[tuple[int, int, str], ...] = ()
        self._amap: AddressMap | None = None
        self._user_counts: dict[str, list[int]] = {}  # faults resolved in user space, by path
        self._sent_files: dict[str, tuple[int, int]] = {}
        self._gone = False
        self._maps_gen = -1

    def defines(self) -> dict[str, int]:
        return {
            "MAX_STACKS": MAX_STACKS,
            "MAX_RANGES": MAX_RANGES,
            "RANGE_STEPS": RANGE_STEPS,
            "MAX_PATHS": MAX_PATHS,
            "MAX_UNRESOLVED": MAX_UNRESOLVED,
            "MAX_COARSE": MAX_COARSE,
            "COARSE_SHIFT": COARSE_SHIFT,
            "RECENT": RECENT,
            "MAX_RECENT_COUNTS": MAX_RECENT_COUNTS,
            **enumerated("KIND_", KINDS),
            **enumerated("LOST_", LOST, "NR_LOST"),
        }

    def cflags(self) -> list[str]:
        return [f"-DTARGET_PID={self.pid}", *self.define_flags()]

    def note(self) -> str:
        note = f"pid {self.pid}, {len(self._fds)} thread(s)"
        missed = self._threads_total - len(self._fds)
        if missed > 0:
            note += f"; {missed} of {self._threads_total} not traced ({self._uncovered_reason})"
        return note

    def traced_tids(self) -> list[int]:
        """The threads with perf events open now."""
        with self._lock:
            return sorted(self._fds)

    def coverage(self) -> FaultCoverage:
        traced = len(self._fds)
        total = max(self._threads_total, traced)
        return FaultCoverage(self.pid, total, traced, self._uncovered_reason if traced < total else "")

    def load(self) -> None:
        if list_tids(self.pid, self.proc_root) is None:
            raise PidNotFound(f"pid {self.pid} is gone", "pick a running process")
        super().load()

    def after_load(self) -> None:
        self._ids = bcc_compat.perf_sw_fault_ids()
        self._refresh_ranges()
        self._attach_threads()
        if not self._fds:
            why = self._uncovered_reason or "the process may have exited"
            raise ProbeError(
                f"could not open perf events on any thread of pid {self.pid}: {why}",
                "see `memtop doctor` (perf events)",
            )

    # -- threads --------------------------------------------------------------------------------
    def _attach_threads(self) -> None:
        tids = list_tids(self.pid, self.proc_root)
        if tids is None:
            return
        live = set(tids)
        for tid in [t for t in self._fds if t not in live]:
            for fd in self._fds.pop(tid):
                bcc_compat.close_perf_event_fd(fd)
        new = [t for t in tids if t not in self._fds]
        self._threads_total = len(tids)
        if not new:
            if len(self._fds) >= len(tids):
                self._uncovered_reason = ""
            return
        # the descriptors this round may take: check before opening (an open that fails at the
        # limit costs a syscall each, and leaves nothing for the rest of memtop)
        open_now = open_fd_count()
        soft = raise_nofile(open_now + FDS_PER_THREAD * len(new) + FD_RESERVE)
        budget = max(0, (soft - open_now - FD_RESERVE) // FDS_PER_THREAD)
        reason = ""
        if budget < len(new):
            reason = fd_limit_reason(len(tids))
        ev_type, ev_min, ev_maj = self._ids
        progs = [bcc_compat.perf_prog_fd(self.bpf, fn) for fn in ("on_fault_min", "on_fault_maj")]
        for tid in new[:budget]:
            fds: list[int] = []
            try:
                for prog, cfg in zip(progs, (ev_min, ev_maj), strict=True):
                    fds.append(bcc_compat.attach_thread_perf_event(prog, ev_type, cfg, tid))
            except OSError as exc:
                for fd in fds:  # both or none: half a thread would count its minor faults only
                    bcc_compat.close_perf_event_fd(fd)
                if exc.errno == errno.ESRCH:  # exited meanwhile: nothing to trace
                    self._threads_total -= 1
                    continue
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    reason = fd_limit_reason(len(tids))
                    break
                reason = f"perf_event_open on a thread failed: {exc.strerror or exc}"
                continue
            self._fds[tid] = fds
        if len(self._fds) < self._threads_total:
            self._uncovered_reason = reason or self._uncovered_reason or "not traced"
        else:
            self._uncovered_reason = ""

    # -- mappings -------------------------------------------------------------------------------
    def _path_id(self, label: str) -> int | None:
        pid_ = self._path_ids.get(label)
        if pid_ is None:
            if len(self._paths) >= MAX_PATHS:
                return None
            pid_ = len(self._paths)
            self._path_ids[label] = pid_
            self._paths.append(label)
        return pid_

    def _gen(self) -> int:
        return int(self.bpf["unmap_gen"][ctypes.c_int(0)].value)

    def _refresh_ranges(self) -> None:
        """Read /proc/PID/maps with no mapping removal in between (by the removal count read before
        and after), and load it into the kernel's range table when it changed."""
        entries = None
        for _ in range(3):
            gen = self._gen()
            entries = read_maps(self.pid, self.proc_root)
            if entries is None:
                return
            if self._gen() == gen:
                self._maps_gen = gen
                break
        else:
            self._maps_gen = -1  # kept changing: resolve nothing in user space this time
        assert entries is not None
        key = tuple((m.start, m.end, m.label) for m in entries)
        self._amap = AddressMap(entries)
        if key == self._maps_key:
            return
        self._maps_key = key
        ranges = self.bpf["ranges"]
        n = 0
        for m in entries[:MAX_RANGES]:
            pid_ = self._path_id(m.label)
            if pid_ is None:
                continue
            ranges[ctypes.c_uint32(n)] = _Range(m.start, m.end, pid_, 0)
            n += 1
        self.bpf["nranges"][ctypes.c_uint32(0)] = ctypes.c_uint32(n)

    def _drain(self, table_name: str, shift: int) -> list[tuple[int, int, int, int]]:
        return [
            (int(k.addr) << shift, int(k.gen), int(v.minor), int(v.major))
            for k, v in bcc_compat.map_drain(self.bpf, table_name)
        ]

    def _drain_recent(self) -> list[tuple[int, int, int, int, int]]:
        """Faults in mappings made while attached: (start, end, mmap flags, minor, major); flags -1
        when the mapping's record was evicted."""
        out = []
        info = self.bpf["recent_info"]
        for k, v in bcc_compat.map_drain(self.bpf, "recent_counts"):
            try:
                r = info[info.Key(k) if isinstance(k, int) else k]
                out.append((int(r.start), int(r.end), int(r.flags), int(v.minor), int(v.major)))
            except KeyError:
                out.append((0, 0, -1, int(v.minor), int(v.major)))
        return out

    def _name_recent(self, start: int, end: int, flags: int) -> str:
        """Anonymous (from the mmap flags), or the file still mapped over that range now."""
        if flags < 0:
            return "[mapping made while attached]"
        if flags & MAP_ANONYMOUS:
            return HUGETLB_LABEL if flags & MAP_HUGETLB else "[anon]"
        m = self._amap.find(start) if self._amap is not None else None
        if m is not None and m.path.startswith("/") and m.start <= start and end <= m.end:
            return m.path
        return FILE_GONE

    def _drain_unresolved(self) -> list[tuple[int, int, int, int]]:
        return self._drain("unresolved", 0) + self._drain("coarse", COARSE_SHIFT)

    def _resolve(self, items: list[tuple[int, int, int, int]]) -> None:
        """Faults the kernel could not place (mappings newer than the range table), drained before
        the maps are read, resolved against that read when no mapping was removed in between."""
        for addr, gen, mn, mj in items:
            m: MapEntry | None = None
            if gen == self._maps_gen and self._amap is not None:
                m = self._amap.find(addr)
                label = m.label if m else UNMAPPED
            else:
                label = CHANGED
            c = self._user_counts.setdefault(label, [0, 0])
            c[0] += mn
            c[1] += mj

    # -- poll -----------------------------------------------------------------------------------
    def poll(self) -> list[Record]:
        with self._lock:
            return self._poll() if self.bpf is not None else []

    def _poll(self) -> list[Record]:
        out: list[Record] = []
        pending = self._drain_unresolved()
        recent = self._drain_recent()
        alive = is_alive(self.pid, self.proc_root)
        if alive:
            self._attach_threads()
            self._refresh_ranges()
        elif not self._gone:
            self._gone = True
            out.append(TargetGone(self.pid, time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
        self._resolve(pending)
        for start, end, flags, mn, mj in recent:
            c = self._user_counts.setdefault(self._name_recent(start, end, flags), [0, 0])
            c[0] += mn
            c[1] += mj
        # stacks
        per_stack: dict[int, list[int]] = {}
        for k, v in self.bpf["counts"].items():
            c = per_stack.setdefault(int(k.stack_id), [0] * len(KINDS))  # minor, major: by KINDS
            c[int(k.kind)] += int(v.value)
        stacks = self.bpf["stacks"]
        for sid, (mn, mj) in per_stack.items():
            if self._sent_stacks.get(sid) == (mn, mj):
                continue
            frames = self._sym.stack_frames_of(stacks, sid, alive)
            out.append(FaultStack(self.pid, sid, frames, mn, mj))
            self._sent_stacks[sid] = (mn, mj)
        # files
        totals: dict[str, list[int]] = {p: list(c) for p, c in self._user_counts.items()}
        pc = self.bpf["path_counts"]
        for i, label in enumerate(self._paths):
            v = pc[ctypes.c_int(i)]
            if v.minor or v.major:
                c = totals.setdefault(label, [0, 0])
                c[0] += int(v.minor)
                c[1] += int(v.major)
        for label, (mn, mj) in totals.items():
            if self._sent_files.get(label) != (mn, mj):
                out.append(FaultFile(self.pid, label, mn, mj))
                self._sent_files[label] = (mn, mj)
        lost = self.array_slots("lost", len(LOST))
        cov = self.coverage()
        if cov != self._sent_coverage:
            out.append(cov)
            self._sent_coverage = cov
        out += [Lost(self.name, what, n) for what, n in zip(LOST, lost, strict=True)]
        return out

    def close(self) -> None:
        with self._lock:
            for fds in self._fds.values():
                for fd in fds:
                    try:
                        bcc_compat.close_perf_event_fd(fd)
                    except Exception:  # noqa: BLE001 - every exit path
                        pass
            self._fds = {}
            self._sym.close()
            super().close()
