"""The kernel probe: the kernel's own memory accounting (no BPF). Each tick: /proc/meminfo,
vmstat's nr_zspages, /proc/slabinfo (root only: the caches that changed are sent) and
/proc/buddyinfo; every ``slow_every`` ticks /proc/vmallocinfo (its read takes the kernel's vmap
lock: not every second) and /proc/allocinfo where the kernel has allocation profiling. While the
Kernel pane is not on screen (``watched`` False) slabinfo is read every ``unwatched_every`` ticks
and vmallocinfo and allocinfo every ``full_every``: only that pane (and the exporter, slabinfo)
shows them, and in a swap storm slabinfo's read and parse were the largest part of memtop's polls
(docs/performance.md). Shown again, the pane has them all at the next tick.
"""

from __future__ import annotations

import os

from memtop.core.errors import ProbeError
from memtop.linux import kernelfs
from memtop.linux.cgroupfs import HeldFiles, read_text
from memtop.probes.base import Probe
from memtop.records import Record
from memtop.records.kernel import AllocProfile, BuddyInfo, KernelMem, SlabCaches, VmallocCallers

#: vmalloc callers and allocinfo call sites sent (the largest by bytes)
MAX_CALLERS = 200
MAX_SITES = 500


class KernelProbe(Probe):
    name = "kernel"
    needs_bpf = False
    #: what only the Kernel pane shows, beside meminfo (always read): a front end that does not
    #: use one (the exporter exports slab caches only) never reads its file
    optional_parts = ("slabinfo", "buddyinfo", "vmallocinfo", "allocinfo")

    def __init__(
        self, proc_root: str = "/proc", slow_every: int = 5, full_every: int = 30, unwatched_every: int = 10
    ) -> None:
        self.proc_root = proc_root
        self.slow_every = slow_every
        self.unwatched_every = unwatched_every
        #: the tick slabinfo was last read
        self._slab_tick = 0
        self._was_watched = True
        #: every cache (and buddyinfo) is resent this often: a recording started mid-session (R)
        #: has them all within that many ticks
        self.full_every = full_every
        self._tick = 0
        self._slabs: dict[str, kernelfs.SlabTuple] = {}
        #: slabinfo's lines as last read, parsed (kernelfs.slab_tuples)
        self._slab_lines: dict[str, kernelfs.SlabTuple] = {}
        self._slab_error: tuple[str, str] | None = None
        self._vmap_stack: bool | None = None
        self._buddy: tuple[tuple[int, str, tuple[int, ...]], ...] | None = None
        #: buddyinfo's text when ``_buddy`` was parsed of it (the same text: not parsed again)
        self._buddy_text: str | None = None
        #: meminfo, vmstat and buddyinfo held open on the real /proc and pread from offset 0
        #: (procfs prints them anew there: an open, fstat and close each a poll less); opened
        #: for each read elsewhere (a fixture file replaced would keep its old text)
        self._held = HeldFiles(max_open=3) if proc_root == "/proc" else None

    @classmethod
    def at_start(cls, proc_root: str | os.PathLike[str]) -> KernelProbe:
        return cls(str(proc_root))

    def _path(self, *parts: str) -> str:
        return os.path.join(self.proc_root, *parts)

    def load(self) -> None:
        if read_text(self._path("meminfo"), 65536) is None:
            raise ProbeError(f"cannot read {self._path('meminfo')}", "is /proc mounted?")
        self._vmap_stack = kernelfs.vmap_stack(self.proc_root)

    def note(self) -> str:
        return "slabinfo unreadable" if self._slab_error else ""

    def close(self) -> None:
        if self._held is not None:
            self._held.close()

    def _read(self, name: str) -> str:
        """A small /proc file's whole text ("" when it cannot be read), held open where it can
        be (``_held``), else read as read_text reads it."""
        path = self._path(name)
        if self._held is None:
            return read_text(path, 65536) or ""
        raw = self._held.read_whole(path, 65536)
        return "" if raw is None else raw.decode("utf-8", "replace")

    def poll(self) -> list[Record]:
        self._tick += 1
        out: list[Record] = []
        mem = kernelfs.parse_meminfo(self._read("meminfo"))
        # of vmstat's ~180 lines, only nr_zspages's is parsed
        zs = kernelfs.parse_vmstat(kernelfs.lines_with(self._read("vmstat"), "nr_zspages")).get("nr_zspages")
        out.append(
            KernelMem(
                meminfo=tuple(mem.items()),
                zspages_bytes=None if zs is None else zs * kernelfs.PAGE,
                vmap_stack=self._vmap_stack,
            )
        )
        if self.reads("slabinfo") and (
            self.watched
            or self._slab_tick == 0
            or self._tick - self._slab_tick >= self.unwatched_every
            or self._tick % self.full_every == 0
        ):
            self._slab_tick = self._tick
            out.append(self._slabinfo())
        if self.reads("buddyinfo"):
            text = self._read("buddyinfo")
            if text != self._buddy_text or self._buddy is None:
                self._buddy_text = text
                buddy = tuple(kernelfs.parse_buddyinfo(text))
            else:
                buddy = self._buddy  # the same text: the same zones
            if buddy != self._buddy or self._tick % self.full_every == 0:
                self._buddy = buddy
                out.append(BuddyInfo(buddy))
        shown_now = self.watched and not self._was_watched
        self._was_watched = self.watched
        slow = self._tick % self.slow_every == 0 and (self.watched or self._tick % self.full_every == 0)
        if self._tick == 1 or shown_now or slow:
            if self.reads("vmallocinfo"):  # its read takes the kernel's vmap lock
                out.append(self._vmalloc())
            if self.reads("allocinfo"):
                out.append(self._allocinfo())
        return out

    def _slabinfo(self) -> SlabCaches:
        path = self._path("slabinfo")
        text = read_text(path, kernelfs.MAX_PROC_FILE)
        if text is None:
            first = self._slab_error is None
            try:
                os.stat(path)
                err = (f"{path} is not readable by this user", "run memtop as root to see slab caches")
            except OSError:
                err = (f"{path} does not exist (a kernel without CONFIG_SLUB_DEBUG/SLAB?)", "")
            self._slab_error = err
            self._slabs = {}
            return SlabCaches(full=first, readable=False, message=err[0], hint=err[1])
        full = self._slab_error is not None or not self._slabs or self._tick % self.full_every == 0
        self._slab_error = None
        now, self._slab_lines = kernelfs.slab_tuples(text, self._slab_lines)
        old = self._slabs
        self._slabs = now
        if full:
            return SlabCaches(caches=tuple(now.values()), full=True)
        changed = tuple(v for k, v in now.items() if old.get(k) != v)
        gone = tuple(k for k in old if k not in now)
        return SlabCaches(caches=changed, gone=gone)

    def _vmalloc(self) -> VmallocCallers:
        text = read_text(self._path("vmallocinfo"), kernelfs.MAX_PROC_FILE)
        if text is None:
            return VmallocCallers(
                readable=False, message=f"cannot read {self._path('vmallocinfo')} (root only)"
            )
        by = kernelfs.parse_vmallocinfo(text)
        top = sorted(by.items(), key=lambda kv: (-kv[1][1], kv[0]))[:MAX_CALLERS]
        return VmallocCallers(
            callers=tuple((c, k, n, b) for (c, k), (n, b) in top),
            ncallers=len(by),
            areas=sum(n for n, _ in by.values()),
            total_bytes=sum(b for _, b in by.values()),
        )

    def _allocinfo(self) -> AllocProfile:
        state, hint = kernelfs.profiling_state(self.proc_root)
        if state != "on":
            return AllocProfile(state=state, hint=hint)
        text = read_text(self._path("allocinfo"), kernelfs.MAX_ALLOCINFO)
        if text is None:
            return AllocProfile(state=state, hint="/proc/allocinfo is not readable: run memtop as root")
        version, sites = kernelfs.parse_allocinfo(text)
        top = sorted(sites, key=lambda s: (-s.bytes, s.key))[:MAX_SITES]
        return AllocProfile(
            state=state,
            version=version,
            sites=tuple((s.bytes, s.calls, s.file, s.line, s.module, s.function, s.accurate) for s in top),
            nsites=len(sites),
            total_bytes=sum(s.bytes for s in sites),
            total_calls=sum(s.calls for s in sites),
            inaccurate=sum(1 for s in sites if not s.accurate),
        )
