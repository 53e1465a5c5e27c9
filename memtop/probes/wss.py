"""wss: a process's working set, on demand (the drill-in's ``w``): the bytes it touched in each
window of N seconds, by mapping.

No BPF. The kernel has the answer in the accessed ("young") bits of the process's page table
entries: writing 1 to /proc/PID/clear_refs clears them (and the pages' referenced flags), and
/proc/PID/smaps ``Referenced`` then counts, per mapping, the resident bytes touched since (what
Brendan Gregg's ``wss`` does). Idle page tracking (/sys/kernel/mm/page_idle) and DAMON's virtual
address monitoring would disturb less, but this kernel has neither (doctor says which a kernel
has); DAMON's sysfs is never written by memtop (its kdamonds are someone else's).

What it disturbs: reclaim reads the same bits, so a cleared process looks idle to it until it
touches its pages again (it may lose a page it would have kept); each clear and each smaps read
walks the process's page tables under its mmap_lock (read side). Both costs are measured and
reported with each window. Runs only on the user's key or flag, and stops when the drill-in
closes or the key is pressed again.
"""

from __future__ import annotations

import os
import stat as stat_mod
import time
from pathlib import Path

from memtop.core.errors import PidNotFound, ProbeError
from memtop.core.text import clean
from memtop.linux.cgroupfs import read_text
from memtop.probes.base import Probe
from memtop.probes.procmaps import is_alive
from memtop.records import Record
from memtop.records.process import TargetGone, WorkingSetMapping, WorkingSetStart, WorkingSetWindow

#: the default window, seconds
WINDOW_S = 10.0
#: the mapping groups a window keeps by name (the largest working sets; the rest as "[other]")
MAX_GROUPS = 32
#: the most of /proc/PID/smaps read (a process with 60,000 mappings has 43 MB of it)
MAX_SMAPS = 128 << 20


def clear_refs(proc_root: Path, pid: int) -> None:
    """Clear ``pid``'s referenced bits (``1``: every mapping). Opened without following a link
    and without blocking, refused unless it is a regular file: the proc root may be a tree of
    the user's."""
    fd = os.open(
        proc_root / str(pid) / "clear_refs", os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    )
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{proc_root}/{pid}/clear_refs is not a regular file")
        os.write(fd, b"1")
    finally:
        os.close(fd)


def referenced(text: str) -> list[tuple[str, int, int, int, bool]]:
    """Per mapping of smaps text: (name, size_bytes, rss_bytes, referenced_bytes, file-backed)."""
    out: list[tuple[str, int, int, int, bool]] = []
    name, size, rss, ref, is_file = "", 0, 0, 0, False
    started = False
    for line in text.splitlines():
        head = line.split(None, 5)
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            if started:
                out.append((name, size, rss, ref, is_file))
            started = True
            path = head[5].strip() if len(head) > 5 else ""
            is_file = path.startswith("/")
            name = clean(path) if path else "[anon]"
            size = rss = ref = 0
            continue
        key, _, rest = line.partition(":")
        if key in ("Size", "Rss", "Referenced"):
            parts = rest.split()
            if parts and parts[0].isdigit():
                v = int(parts[0]) * 1024
                if key == "Size":
                    size = v
                elif key == "Rss":
                    rss = v
                else:
                    ref = v
    if started:
        out.append((name, size, rss, ref, is_file))
    return out


def group(maps: list[tuple[str, int, int, int, bool]]) -> tuple[WorkingSetMapping, ...]:
    """Mappings summed by name, the largest working sets first, at most MAX_GROUPS (the rest
    summed as "[other]")."""
    by: dict[str, list[int]] = {}
    for name, size, rss, ref, _ in maps:
        g = by.setdefault(name, [0, 0, 0])
        g[0] += size
        g[1] += rss
        g[2] += ref
    ranked = sorted(by.items(), key=lambda kv: (-kv[1][2], -kv[1][1], kv[0]))
    out: list[WorkingSetMapping] = [(n, s, r, f) for n, (s, r, f) in ranked[:MAX_GROUPS]]
    rest = ranked[MAX_GROUPS:]
    if rest:
        out.append(
            ("[other]", sum(v[0] for _, v in rest), sum(v[1] for _, v in rest), sum(v[2] for _, v in rest))
        )
    return tuple(out)


def _start_time(proc_root: Path, pid: int) -> str:
    """Field 22 of /proc/PID/stat: a pid reused by another process has another start time."""
    text = read_text(str(proc_root / str(pid) / "stat"), 4096, errors="surrogateescape") or ""
    rest = text[text.rfind(")") + 2 :].split()
    return rest[19] if len(rest) > 19 else ""


class WssProbe(Probe):
    name = "wss"
    needs_bpf = False
    cadence_s = 0.5  # a window ends within half a second of its length

    def __init__(self, pid: int, window_s: float = WINDOW_S, proc_root: str | Path = "/proc") -> None:
        self.pid = pid
        self.window_ns = int(max(1.0, window_s) * 1e9)
        self.proc = Path(proc_root)
        self._start_ns = 0
        self._born = ""
        self._pending: list[Record] = []
        self._gone = False

    def _clear(self) -> tuple[int, int]:
        cpu0, wall0 = time.thread_time_ns(), time.monotonic_ns()
        clear_refs(self.proc, self.pid)
        return time.thread_time_ns() - cpu0, time.monotonic_ns() - wall0

    def load(self) -> None:
        if not is_alive(self.pid, self.proc):
            raise PidNotFound(f"no process with pid {self.pid}", "pick a running pid")
        self._born = _start_time(self.proc, self.pid)
        try:
            cpu, wall = self._clear()
        except OSError as e:
            raise ProbeError(
                f"cannot clear the referenced bits of {self.pid}: {e.strerror or e}",
                "run memtop as root (writing /proc/PID/clear_refs needs it; kernel with CONFIG_PROC_PAGE_MONITOR)",
            ) from e
        self._start_ns = time.monotonic_ns()
        self._pending.append(
            WorkingSetStart(self.pid, self._start_ns, self.window_ns, "referenced bits", cpu, wall)
        )

    def note(self) -> str:
        return f"pid {self.pid}, {self.window_ns / 1e9:g} s windows, referenced bits"

    def _is_target(self) -> bool:
        return is_alive(self.pid, self.proc) and _start_time(self.proc, self.pid) == self._born

    def poll(self) -> list[Record]:
        out, self._pending = self._pending, []
        if self._gone:
            return out
        now = time.monotonic_ns()
        if now - self._start_ns < self.window_ns:
            return out
        if not self._is_target():
            self._gone = True
            return [*out, TargetGone(self.pid, now)]
        cpu0, wall0 = time.thread_time_ns(), time.monotonic_ns()
        text = read_text(str(self.proc / str(self.pid) / "smaps"), MAX_SMAPS, errors="surrogateescape")
        end = time.monotonic_ns()
        if text is None:
            self._gone = True
            return [*out, TargetGone(self.pid, end)]
        maps = referenced(text)
        try:
            clear_refs(self.proc, self.pid)  # the next window starts now
        except OSError:
            self._gone = True
            return [*out, TargetGone(self.pid, time.monotonic_ns())]
        cpu, wall = time.thread_time_ns() - cpu0, time.monotonic_ns() - wall0
        start, self._start_ns = self._start_ns, time.monotonic_ns()
        out.append(
            WorkingSetWindow(
                pid=self.pid,
                start_ns=start,
                end_ns=end,
                referenced_bytes=sum(m[3] for m in maps),
                rss_bytes=sum(m[2] for m in maps),
                anon_referenced_bytes=sum(m[3] for m in maps if not m[4]),
                file_referenced_bytes=sum(m[3] for m in maps if m[4]),
                mappings=group(maps),
                cost_cpu_ns=cpu,
                cost_wall_ns=wall,
            )
        )
        return out
