"""swapin: swap-ins and file major faults per process, and the time spent blocked in them.

No program runs on minor faults: the PAGE_FAULTS_MAJ perf software event counts major faults at
their end (where the kernel bumps ``maj_flt``), and ``sched:sched_switch`` times D-state sleeps
whose kernel stack shows a page fault (see bpf/swapin.bpf.c). The stack is classified against
kernel text ranges read from /proc/kallsyms and passed in as cflags.

swapinfo: /proc/swaps (what `swapon -s` shows) and zswap's state, for the pane's system line.
"""

from __future__ import annotations

import bisect
import ctypes
from pathlib import Path
from typing import Self

from memtop.core.errors import ProbeError
from memtop.core.text import clean
from memtop.linux import bcc_compat, cgroupfs, kernelfs
from memtop.linux.cgroupfs import read_text
from memtop.linux.ksyms import TEXT_TYPES, text_symbols
from memtop.probes.base import BpfProbe, Generation, Held, Probe
from memtop.probes.procmaps import MapEntry, read_maps
from memtop.records import Lost, Record
from memtop.records.swapin import SwapInfo, SwapinHistogram, SwapinProc

#: cflag prefix -> kernel functions whose text range it covers (first found wins)
SYMBOLS: dict[str, tuple[str, ...]] = {
    "PF1": ("exc_page_fault",),
    "PF2": ("asm_exc_page_fault",),
    "SW1": ("do_swap_page",),
    "SW2": ("shmem_swapin_folio", "shmem_swapin_page", "shmem_swapin"),
    "FI1": ("filemap_fault",),
    "FI2": ("__do_fault",),
}
#: log2(wait ns) buckets per kind (a u64 has 64); a process's file-fault slots follow its swap ones
HIST_SLOTS = 64
#: slots of the program's ``swapin_lost`` array: processes the stats map could not take, no-wait
#: faults the region map could not take
LOST = ("processes", "unclassified no-wait faults")
#: slots of ``swapin_counters``: blocked-in-fault sleeps timed, D-state stack walks, and the
#: major-fault program's generation (bumped after its updates: base.Generation)
COUNTERS = ("sleeps", "stack walks", "generation")


def kernel_text_ranges(
    names: set[str], kallsyms: str | Path = "/proc/kallsyms"
) -> dict[str, tuple[int, int]]:
    """[start, end) of each named kernel text symbol: its address up to the next symbol's.

    The kernel lists its own symbols in address order, so each name's line is found with one
    substring search and its end is the next larger text address a few lines below (parsing every
    line in Python, or a multi-line regex per name, held the GIL long enough to delay the first
    frame: docs/performance.md). When the lines below do not settle it, every line is
    parsed (``_text_ranges_full``)."""
    data = Path(kallsyms).read_bytes()
    out: dict[str, tuple[int, int]] = {}
    for name in names:
        line_end = _text_symbol_line(data, name.encode())
        if line_end < 0:
            continue
        start = int(data[data.rfind(b"\n", 0, line_end) + 1 : line_end].split()[0], 16)
        if start == 0:
            continue
        end = None
        for line in data[line_end + 1 : line_end + 1 + 4096].split(b"\n")[:-1]:
            parts = line.split()
            if len(parts) != 3 or parts[1] not in TEXT_TYPES:
                continue
            addr = int(parts[0], 16)
            if addr < start:  # not in address order here: do not trust the neighbourhood
                break
            if addr > start:
                end = addr
                break
        if end is None:
            return _text_ranges_full(names, data)
        out[name] = (start, end)
    return out


def _text_symbol_line(data: bytes, name: bytes) -> int:
    """Offset of the newline ending the kernel's own (not a module's) text line for ``name``, or
    -1. Lines are ``address type name``; module symbols carry a tab and ``[module]`` after."""
    needle = b" " + name + b"\n"
    at = data.find(needle)
    while at >= 0:
        line_end = at + len(needle) - 1
        parts = data[data.rfind(b"\n", 0, at) + 1 : line_end].split()
        if len(parts) == 3 and parts[1] in TEXT_TYPES:
            return line_end
        at = data.find(needle, at + 1)
    return -1


def _text_ranges_full(names: set[str], data: bytes) -> dict[str, tuple[int, int]]:
    addrs: list[int] = []
    found: dict[str, int] = {}
    for addr, sym, module in text_symbols(data.splitlines()):
        if module:  # a module's: the kernel's own text is what is wanted
            continue
        addrs.append(addr)
        name = sym.decode("utf-8", errors="replace")
        if name in names and name not in found:
            found[name] = addr
    addrs = sorted(set(addrs))
    out: dict[str, tuple[int, int]] = {}
    for name, start in found.items():
        i = bisect.bisect_right(addrs, start)
        end = addrs[i] if i < len(addrs) else start + 4096
        out[name] = (start, end)
    return out


#: no-wait major faults are counted per 2 MiB region of their address; the BPF program gets this
#: value (``defines``), so both sides split addresses the same way
REGION_SHIFT = 21


def _start(m: MapEntry) -> int:
    return m.start


def file_backed_at(maps: list[MapEntry], addr: int) -> bool | None:
    """Whether ``addr`` lies in a file-backed mapping (None: in no mapping); ``maps`` sorted by
    start, as :func:`~memtop.probes.procmaps.read_maps` gives them."""
    i = bisect.bisect_right(maps, addr, key=_start) - 1
    if i >= 0 and maps[i].start <= addr < maps[i].end:
        return maps[i].file_backed
    return None


def region_file_backed(maps: list[MapEntry], region: int, last_addr: int) -> bool | None:
    """Whether the faults counted in ``region`` (an address >> REGION_SHIFT) were file faults:
    the kind of every mapping the region overlaps when they agree, else (both kinds, or none) the
    kind at the region's latest faulting address."""
    lo = region << REGION_SHIFT
    hi = lo + (1 << REGION_SHIFT)
    i = max(0, bisect.bisect_right(maps, lo, key=_start) - 1)
    kinds: set[bool] = set()
    while i < len(maps) and maps[i].start < hi:
        if maps[i].end > lo:
            kinds.add(maps[i].file_backed)
        i += 1
    if len(kinds) == 1:
        return kinds.pop()
    return file_backed_at(maps, last_addr)


class _Stats(ctypes.Structure):
    C_STRUCT = "struct stats_t"  # in bpf/swapin.bpf.c; the layout is checked (memtop.probes.layout)
    _fields_ = [
        ("swapins", ctypes.c_uint64),
        ("swapins_nowait", ctypes.c_uint64),
        ("swap_wait_ns", ctypes.c_uint64),
        ("swap_wait_max_ns", ctypes.c_uint64),
        ("file_majors", ctypes.c_uint64),
        ("file_wait_ns", ctypes.c_uint64),
        ("file_wait_max_ns", ctypes.c_uint64),
        ("comm", ctypes.c_char * 16),
    ]


class SwapinProbe(BpfProbe):
    name = "swapin"
    program = "swapin"
    shares_unit = True
    tracepoints = ("sched:sched_switch",)
    features = ("perf_events",)

    def __init__(self, max_pids: int = 16384, max_tids: int = 16384, max_depth: int = 48) -> None:
        super().__init__()
        self.max_pids = max_pids
        self.max_tids = max_tids
        self.max_depth = max_depth
        self.max_regions = 4096  # drained every poll: 8 GiB of distinct 2 MiB regions per tick
        self.ranges: dict[str, tuple[int, int]] = {}
        self._sent: dict[int, tuple[int, ...]] = {}
        #: no-wait major faults classified by address: pid -> [file, swap]
        self._nowait: dict[int, list[int]] = {}
        #: what says a major fault was counted, watched from poll to poll (:meth:`_maps_due`),
        #: and the no-wait faults taken as file reads at the last read
        self._signal = Held()
        self._nowait_file_total = 0
        #: the major-fault program's generation at the last complete read, and what that read
        #: made: the histograms' counts (no-wait faults in bucket 0) and the lost records
        self.generation = Generation()
        self._last: tuple[tuple[int, ...], tuple[int, ...], list[Lost]] | None = None
        self._last_hist: SwapinHistogram | None = None
        #: map reads done (for tests)
        self.map_reads = 0

    def defines(self) -> dict[str, int]:
        return {
            "MAX_PIDS": self.max_pids,
            "MAX_TIDS": self.max_tids,
            "MAX_DEPTH": self.max_depth,
            "MAX_REGIONS": self.max_regions,
            "REGION_SHIFT": REGION_SHIFT,
            "HIST_SLOTS": HIST_SLOTS,
            "LOST_PROCESSES": LOST.index("processes"),
            "LOST_REGIONS": LOST.index("unclassified no-wait faults"),
            "NR_LOST": len(LOST),
            "CTR_SLEEPS": COUNTERS.index("sleeps"),
            "CTR_STACK_WALKS": COUNTERS.index("stack walks"),
            "CTR_GENERATION": COUNTERS.index("generation"),
            "NR_COUNTERS": len(COUNTERS),
        }

    def cflags(self) -> list[str]:
        wanted = {n for names in SYMBOLS.values() for n in names}
        try:
            found = kernel_text_ranges(wanted)
        except OSError as exc:
            raise ProbeError(
                f"cannot read /proc/kallsyms ({exc})",
                "swap-in waits need kernel symbol addresses: run memtop as root",
            ) from exc
        flags = self.define_flags()
        for prefix, names in SYMBOLS.items():
            rng = next((found[n] for n in names if n in found), None)
            if rng is None:
                continue
            self.ranges[prefix] = rng
            flags += [f"-D{prefix}_LO={rng[0]:#x}ULL", f"-D{prefix}_HI={rng[1]:#x}ULL"]
        if "PF1" not in self.ranges and "PF2" not in self.ranges:
            raise ProbeError(
                "no page-fault entry symbol in /proc/kallsyms (kptr_restrict?)",
                "run as root, or sysctl kernel.kptr_restrict=0",
            )
        return flags

    def after_load(self) -> None:
        ev_type, _minor, ev_config = bcc_compat.perf_sw_fault_ids()
        try:
            self.bpf.attach_perf_event_system(ev_type, ev_config, "on_major_fault", 1)
        except Exception as exc:  # bcc raises bare Exception
            raise ProbeError(
                f"cannot open the major-fault perf event: {str(exc).strip()[:200]}",
                "check kernel.perf_event_paranoid and that perf events are enabled",
            ) from exc

    def note(self) -> str:
        kinds = [k for k in ("SW1", "SW2", "FI1", "FI2") if k in self.ranges]
        return f"major-fault perf event + sched_switch ({len(kinds)}/4 fault kinds located)"

    def _classify_nowait(self) -> bool:
        """Drain the no-wait major faults counted since the last poll and classify each region's
        count by the process's mappings. Unclassifiable ones (process gone, address unmapped)
        stay counted as swap-ins. Whether any was drained."""
        by_pid: dict[int, list[tuple[int, int, int]]] = {}
        for k, v in bcc_compat.map_drain(self.bpf, "nowait_regions"):
            by_pid.setdefault(int(k.pid), []).append((int(k.region), int(v.count), int(v.addr)))
        for pid, regions in by_pid.items():
            maps = read_maps(pid) or []
            counts = self._nowait.setdefault(pid, [0, 0])
            for region, count, addr in regions:
                counts[0 if region_file_backed(maps, region, addr) else 1] += count
        return bool(by_pid)

    def poll_failed(self) -> None:
        self._signal.forget()  # the next polls read the maps: this one may not have
        self.generation.forget()

    def _maps_due(self, signal: tuple[int, int, int], drained: bool) -> bool:
        """Whether the per-process maps (stats, pid_hist) must be read this poll. Only the
        major-fault program changes them, and each of its runs that does ends by counting the
        fault where this poll reads it first: a swap-in's or file read's histogram, a lost
        count, or a no-wait region (drained at the next poll) (bpf/swapin.bpf.c
        on_major_fault(); an entry is evicted only by that program's insert). When none moved
        at this poll and the one before, the maps are as last read: a run's updates come
        microseconds before its count. Walking them costs the kernel every bucket (16,384 and
        more) even when they are empty. Read at least once in MAPS_BACKSTOP polls all the same."""
        return not self._signal.held(signal, moved=drained) or self.generation.backstop

    def poll(self) -> list[Record]:
        """The counters first (one lookup): when the major-fault program's generation held since
        the last complete read, no fault was counted since, and that read's histograms and lost
        counts are sent again with the counters read now (base.Generation); else every map."""
        if self.bpf is None:
            return []
        counters = self.counter_slots("swapin_counters", len(COUNTERS))
        gen = counters[COUNTERS.index("generation")]
        if self.generation.quiet(gen, kept=self._last is not None):
            assert self._last is not None
            swap_counts, file_counts, lost_records = self._last
            return [self._histogram(swap_counts, file_counts, counters), *lost_records]
        out: list[Record] = []
        # drain first: every drained region's faults are already in the stats map (BPF bumps
        # that first), so a no-wait fault is never counted as file before the stats show it
        drained = self._classify_nowait()
        # the counts that say a fault was counted, read before the maps they stand for
        swap_hist = self.array_slots("hist", HIST_SLOTS)
        file_hist = self.array_slots("file_hist", HIST_SLOTS)
        lost = self.array_slots("swapin_lost", len(LOST))
        if self._maps_due((sum(swap_hist), sum(file_hist), sum(lost)), drained):
            self.map_reads += 1
            self._nowait_file_total = self._read_maps(out)
        # a fault that never blocked waited 0 ns: bucket 0 of its kind
        swap_hist[0] += sum(v[6] for v in self._sent.values())
        file_hist[0] += self._nowait_file_total
        lost_records = [Lost(self.name, what, n) for what, n in zip(LOST, lost, strict=True)]
        self._last = (tuple(swap_hist), tuple(file_hist), lost_records)
        self.generation.read(gen)
        out.append(self._histogram(self._last[0], self._last[1], counters))
        out += lost_records
        return out

    def _histogram(
        self, swap_counts: tuple[int, ...], file_counts: tuple[int, ...], counters: list[int]
    ) -> SwapinHistogram:
        """The histograms' record; the last one again when nothing in it moved (not rebuilt)."""
        sleeps = counters[COUNTERS.index("sleeps")]
        walks = counters[COUNTERS.index("stack walks")]
        last = self._last_hist
        if (
            last is not None
            and last.fault_sleeps == sleeps
            and last.stack_walks == walks
            and last.swapin_counts == swap_counts
            and last.file_counts == file_counts
        ):
            return last
        self._last_hist = SwapinHistogram(
            swapin_counts=swap_counts, file_counts=file_counts, fault_sleeps=sleeps, stack_walks=walks
        )
        return self._last_hist

    def _read_maps(self, out: list[Record]) -> int:
        """Each process's totals and histograms whose figures changed since sent, into ``out``;
        the no-wait faults taken as file reads, in all."""
        seen: set[int] = set()
        nowait_file_total = 0
        pid_hist: dict[int, dict[int, int]] = {}
        for hk, hv in self.bpf["pid_hist"].items():
            pid_hist.setdefault(int(hk.pid), {})[int(hk.slot)] = int(hv.value)
        for k, v in self.bpf["stats"].items():
            pid = int(k.value)
            s = ctypes.cast(ctypes.pointer(v), ctypes.POINTER(_Stats)).contents
            nowait = int(s.swapins_nowait)
            as_file = min(nowait, self._nowait.get(pid, [0, 0])[0])
            nowait_file_total += as_file
            values = (
                int(s.swapins) + nowait - as_file,
                int(s.swap_wait_ns),
                int(s.swap_wait_max_ns),
                int(s.file_majors) + as_file,
                int(s.file_wait_ns),
                int(s.file_wait_max_ns),
                nowait - as_file,
            )
            seen.add(pid)
            if self._sent.get(pid) == values:
                continue  # unchanged: state keeps the last one
            self._sent[pid] = values
            slots = pid_hist.get(pid, {})
            swap_h = {b: c for b, c in slots.items() if b < HIST_SLOTS}
            file_h = {b - HIST_SLOTS: c for b, c in slots.items() if b >= HIST_SLOTS}
            if values[6]:
                swap_h[0] = swap_h.get(0, 0) + values[6]
            if as_file:
                file_h[0] = file_h.get(0, 0) + as_file
            out.append(
                SwapinProc(
                    pid=pid,
                    comm=clean(bytes(s.comm).split(b"\0", 1)[0]),
                    swapins=values[0],
                    swapin_wait_ns=values[1],
                    swapin_wait_max_ns=values[2],
                    file_major_faults=values[3],
                    file_wait_ns=values[4],
                    file_wait_max_ns=values[5],
                    swapins_nowait=values[6],
                    swapin_hist=tuple(sorted(swap_h.items())),
                    file_hist=tuple(sorted(file_h.items())),
                )
            )
        for gone in set(self._sent) - seen:  # evicted from the LRU map
            del self._sent[gone]
            self._nowait.pop(gone, None)
        return nowait_file_total


class SwapinfoProbe(Probe):
    """Swap devices and zswap from /proc and /sys (no BPF); feeds the swap-in pane's system line."""

    name = "swapinfo"
    needs_bpf = False
    cadence_s = 2.0

    @classmethod
    def at_start(cls, proc_root: str | Path) -> Self:
        return cls(proc_root)

    def __init__(self, proc_root: str | Path = "/proc", sys_root: str | Path = "/sys") -> None:
        self.proc = Path(proc_root)
        self.sys = Path(sys_root)
        real = str(self.proc) == "/proc" and str(self.sys) == "/sys"
        #: on the real /proc and /sys its ~10 small files are held open and pread from offset 0
        #: (procfs and sysfs print them anew there): an open, fstat, two reads and a close each
        #: at every poll before. Not elsewhere: a fixture file replaced would keep its old text
        self._held = cgroupfs.HeldFiles(max_open=64) if real else None
        #: the mount table, read again only when it changed (where debugfs is)
        self._mounts = kernelfs.MountTable(str(self.proc))
        #: zswap's parameters this kernel has, on the real /sys (found at load: fixed for the
        #: kernel's life, kernelfs.zswap_param_names); every known one elsewhere
        self._params: tuple[str, ...] = kernelfs.ZSWAP_PARAMS
        #: the last poll's figures and the record made of them: the same figures again (an
        #: idle machine's swap) are the same record, not made and cleaned again
        self._last: tuple[tuple[object, ...], SwapInfo] | None = None

    def load(self) -> None:
        if not (self.proc / "swaps").is_file():
            raise ProbeError(f"{self.proc}/swaps is missing", "this kernel has no swap support")
        if self._held is not None:
            self._params = kernelfs.zswap_param_names(str(self.sys))

    def close(self) -> None:
        if self._held is not None:
            self._held.close()
        self._mounts.close()

    def poll(self) -> list[Record]:
        fields = swapinfo_fields(self.proc, self.sys, self._held, self._mounts, self._params)
        last = self._last
        if last is not None and last[0] == fields:
            return [last[1]]
        rec = SwapInfo(*fields)
        self._last = (fields, rec)
        return [rec]


def _read(path: Path, held: cgroupfs.HeldFiles | None = None) -> str:
    # bounded, no FIFO, no symlink: a proc root given on the command line is not trusted
    if held is not None:
        # to its end: /proc/swaps is a record a device (fs/seq_file.c reads on from the offset)
        raw = held.read_whole(str(path))
        return "" if raw is None else raw.decode("utf-8", "replace")
    return read_text(str(path)) or ""


def read_swapinfo(
    proc: Path = Path("/proc"),
    sys: Path = Path("/sys"),
    held: cgroupfs.HeldFiles | None = None,
    mounts: kernelfs.MountTable | None = None,
) -> SwapInfo:
    """The swap devices, zswap's pool, parameters and debugfs counters, and zram's devices: the
    files opened for the read, or held open in ``held``; the mount table (where debugfs is) read
    anew or from ``mounts``."""
    return SwapInfo(*swapinfo_fields(proc, sys, held, mounts))


def swapinfo_fields(
    proc: Path,
    sys: Path,
    held: cgroupfs.HeldFiles | None = None,
    mounts: kernelfs.MountTable | None = None,
    params_read: tuple[str, ...] = kernelfs.ZSWAP_PARAMS,
) -> tuple[
    tuple[tuple[str, str, int, int, int], ...],
    bool,
    int,
    int,
    tuple[tuple[str, str], ...],
    tuple[tuple[str, int], ...],
    str,
    tuple[tuple[str, str, int, tuple[tuple[str, int], ...]], ...],
]:
    """:func:`read_swapinfo`'s figures, in the order of SwapInfo's fields (``params_read``: the
    zswap parameters read, kernelfs.zswap_param_names)."""
    devices: list[tuple[str, str, int, int, int]] = []
    for line in _read(proc / "swaps", held).splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 5:
            try:
                devices.append(
                    (
                        clean(parts[0].replace("\\040", " ")),
                        parts[1],
                        int(parts[2]) * 1024,
                        int(parts[3]) * 1024,
                        int(parts[4]),
                    )
                )
            except ValueError:
                continue
    # the two zswap lines only (Zswap, Zswapped): the other ~55 are not parsed
    meminfo = kernelfs.parse_meminfo_of(_read(proc / "meminfo", held), "Zswap")
    params = kernelfs.read_zswap_params(str(sys), held, params_read)
    if mounts is not None:
        debugfs = mounts.debugfs()
    else:
        debugfs = kernelfs.debugfs_mount(
            read_text(str(proc / "self" / "mountinfo"), errors="surrogateescape")
        )
    debug = kernelfs.read_zswap_debug(debugfs) if debugfs else {}
    return (
        tuple(devices),
        params.get("enabled") in ("Y", "1"),
        meminfo.get("Zswap", 0),
        meminfo.get("Zswapped", 0),
        tuple(params.items()),
        tuple(debug.items()),
        clean(debugfs) if debug and debugfs else "",
        tuple(
            (z.name, z.algorithm, z.disksize_bytes, tuple(z.stats.items()))
            for z in kernelfs.read_zram(str(sys), held=held)
        ),
    )
