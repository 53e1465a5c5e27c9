"""leaks: outstanding allocations by user stack for chosen pids (on demand, never default).

Attaches per-pid uprobes on the target's libc allocator family (``bpf/leaks.bpf.c`` keeps
per-stack totals in the kernel) and reads three maps per tick. A symbol that fails to attach is
reported in the pid's LeakTarget record and the others run on. When a target exits, its uprobes
are detached at the next poll and its last figures stay in the state. When a target execs (its
executable's identity or its stack's start changed), the old image's uprobes and allocations go
and the new image's allocator is traced: a non-glibc one with requested sizes even in chunk-header
mode (the ``*_exact`` return programs).

Cost (bench/leaks_cost.py): where glibc is the allocator, sizes come from the chunk header so
malloc & co. need only a return probe, and free/munmap's entry probe is moved past a leading
flags-only instruction (``test %rdi,%rdi``) onto one the kernel emulates, which spares the
single-step trap that dominates bcc memleak's cost on x86.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import re
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any

from memtop.core import fmt, leakcost
from memtop.core.errors import PidNotFound, ProbeError
from memtop.core.text import clean
from memtop.linux import bcc_compat
from memtop.probes import allocators, leakwindows, symbols
from memtop.probes.base import BpfProbe
from memtop.probes.layout import Packed
from memtop.records import Lost, Record
from memtop.records.leaks import (
    AGE_BUCKETS_S,
    LeakBudget,
    LeakCalls,
    LeakStack,
    LeakTarget,
    LeakVerdict,
)

#: (symbol, entry program, return program) with sizes read from glibc's chunk headers.
#: free and munmap come first so no block is recorded whose release we could not see; malloc last.
SPECS_HEADER: tuple[tuple[str, str | None, str | None], ...] = (
    ("free", "enter_free", None),
    ("munmap", "enter_munmap", None),
    ("realloc", "enter_realloc", "ret_realloc"),
    ("posix_memalign", "enter_posix_memalign", "ret_posix_memalign"),
    ("aligned_alloc", None, "ret_hdr"),
    ("memalign", None, "ret_hdr"),
    ("valloc", None, "ret_hdr"),
    ("pvalloc", None, "ret_hdr"),
    ("mmap", "enter_mmap", "ret_mmap"),
    ("calloc", None, "ret_hdr"),
    ("malloc", None, "ret_hdr"),
)
#: the same with requested sizes kept by entry probes (non-glibc libcs)
SPECS_EXACT: tuple[tuple[str, str | None, str | None], ...] = tuple(
    (
        s,
        {
            "malloc": "enter_size1",
            "valloc": "enter_size1",
            "pvalloc": "enter_size1",
            "calloc": "enter_calloc",
            "aligned_alloc": "enter_size2",
            "memalign": "enter_size2",
        }[s],
        "ret_sized",
    )
    if r == "ret_hdr"
    else (s, e, r)
    for s, e, r in SPECS_HEADER
)
REQUIRED = ("malloc", "free")
MMAP_SYMBOLS = ("mmap", "munmap")
#: an allocator library's own C++ operators (jemalloc 5 inlines its fast path into operator new,
#: so it never reaches malloc) and extended API; attached where the library defines them. A
#: delete that forwards to free is seen twice: the second finds nothing to free.
CXX_AND_EXTRAS: tuple[tuple[str, str | None, str | None], ...] = (
    *(
        (s, "enter_free", None)
        for s in (
            "_ZdlPv",
            "_ZdaPv",
            "_ZdlPvm",
            "_ZdaPvm",
            "_ZdlPvSt11align_val_t",
            "_ZdaPvSt11align_val_t",
            "_ZdlPvmSt11align_val_t",
            "_ZdaPvmSt11align_val_t",
            "dallocx",
            "sdallocx",
        )
    ),
    ("rallocx", "enter_realloc", "ret_realloc"),
    *(
        (s, "enter_size1", "ret_sized")
        for s in (
            "_Znwm",
            "_Znam",
            "_ZnwmRKSt9nothrow_t",
            "_ZnamRKSt9nothrow_t",
            "_ZnwmSt11align_val_t",
            "_ZnamSt11align_val_t",
            "mallocx",
        )
    ),
)


def lane_specs(alloc: allocators.Allocator, exact: bool) -> list[tuple[str, str | None, str | None]]:
    """The symbols to probe in the allocator's object for its lane (mmap/munmap apart)."""
    base = SPECS_EXACT if exact else SPECS_HEADER
    specs = [
        (alloc.prefix + s if s not in MMAP_SYMBOLS else s, e, r) for s, e, r in base if s not in MMAP_SYMBOLS
    ]
    if alloc.lane in ("jemalloc", "tcmalloc", "mimalloc", "other"):
        specs = specs + list(CXX_AND_EXTRAS)  # after the C names: an alias is listed as "new=malloc"
    # free-like first: no block is recorded whose release could not be seen
    return sorted(specs, key=lambda sp: sp[2] is not None)


Plan = list[tuple[str, list[tuple[str, str | None, str | None]]]]


def probe_plan(pid: int, alloc: allocators.Allocator, exact: bool, proc_root: str = "/proc") -> Plan:
    """(object path, its specs) for each object to probe in ``pid``: libc's mmap/munmap wrappers
    first (the program's own mmap calls go through them, whatever its malloc), then the lane's."""
    plan: Plan = [(alloc.path, lane_specs(alloc, exact))]
    libc = find_libc(pid, proc_root)
    if not alloc.static and libc is not None:
        plan.insert(0, (libc[0], [(s, e, r) for s, e, r in SPECS_HEADER if s in MMAP_SYMBOLS]))
    return plan


#: the program's map keys and values as read here (bpf/leaks.bpf.c; checked by a kernel test)
ALLOC_INFO = Packed("struct alloc_info_t", "<IiQQ", ("pid", "stack_id", "size", "ts_ns"))


def alloc_slots(max_allocs: int) -> int:
    """The address table's slots for ``max_allocs`` blocks: a power of two, at least four times
    as many (bpf/leaks.bpf.c probes linearly; a quarter full keeps the searches short)."""
    return 1 << max(2, (4 * max_allocs - 1).bit_length())


#: an address-table slot's addr that is no block: never used, freed, being written
A_EMPTY, A_FREED, A_BUSY = 0, 1, 2
#: a byte's value -> 0 where a slot's address whose low byte it is could be a mark (0, 1, 2)
_LOW_BYTE_LIVE = bytes(0 if b <= A_BUSY else 1 for b in range(256))


#: address-table slots read at a time by live_slots: its copies and big integers are this size
#: (512 KiB of addresses), not the table's (8 MiB for a million slots, read every window and every
#: age scan): a large transient buffer raises glibc's mmap threshold and stays in the heap, so a
#: whole-table copy kept memtop's RssAnon that much higher for good
LIVE_CHUNK_SLOTS = 1 << 16


def live_slots(addrs: bytes | mmap.mmap) -> list[int]:
    """The slots of the address table's address column (little-endian u64s) that hold a block:
    not A_EMPTY, A_FREED or A_BUSY. Most slots are empty or freed, and a million of them is too
    many to test one by one in Python (60 ms): each of the eight byte planes is sliced out in C,
    and a slot is live where its low byte is none of the marks or any other byte is not zero
    (OR-ed as big integers), about a third of the time. Read LIVE_CHUNK_SLOTS at a time."""
    n = len(addrs) // 8
    out: list[int] = []
    for first in range(0, n, LIVE_CHUNK_SLOTS):
        count = min(LIVE_CHUNK_SLOTS, n - first)
        data = addrs[first * 8 : (first + count) * 8]
        acc = int.from_bytes(data[0::8].translate(_LOW_BYTE_LIVE), "little")
        for k in range(1, 8):
            acc |= int.from_bytes(data[k::8], "little")
        out += [first + m.start() for m in re.finditer(rb"[^\x00]", acc.to_bytes(count, "little"))]
    return out


STACK_KEY = Packed("struct stack_key_t", "<Ii", ("pid", "stack_id"))
STACK_VAL = Packed("struct stack_val_t", "<QQQQ", ("alloc_bytes", "alloc_count", "free_bytes", "free_count"))


class Counter(IntEnum):
    """Slots of the program's ``counters`` array (passed as ``-DC_<NAME>=<slot>``)."""

    ALLOCS_FULL = 0  # allocation not tracked: address map full
    STACK_ERR = 1  # no stack id (collision or unreadable stack); counted under id -1
    STATS_FULL = 2  # per-stack map full: allocation not attributed
    BAD_SIZE = 3  # chunk header unreadable or implausible: size recorded as 0
    NEST_FULL = 4  # allocator nesting deeper than the program keeps: arguments not kept
    FAILED = 5  # failed allocations seen (not leaks)
    INTERNAL = 6  # mmap/munmap from inside libc, skipped
    CALLS = 7  # allocation calls seen (sampled or not): the target's allocation rate


#: what each counter counts, by name; the first three are what the pane could not track (``Lost``)
COUNTERS = {
    Counter.ALLOCS_FULL: "allocations (address map full)",
    Counter.STACK_ERR: "stacks (no stack id)",
    Counter.STATS_FULL: "allocations (stack map full)",
    Counter.BAD_SIZE: "bad size",
    Counter.NEST_FULL: "nesting too deep",
    Counter.FAILED: "failed allocations",
    Counter.INTERNAL: "libc-internal mmap/munmap",
    Counter.CALLS: "allocation calls",
}
LOST_COUNTERS = (Counter.ALLOCS_FULL, Counter.STACK_ERR, Counter.STATS_FULL)
#: threads whose allocator calls may be in flight at once (their saved arguments: an LRU map)
MAX_TIDS = 8192
NO_STACK = "[stack unavailable]"

_LIBC = re.compile(r"^libc(\.so(\.\d+)*|-[\d.]+\.so|\.musl-[^/]*\.so(\.\d+)*)$")


# -- where to put an entry probe ------------------------------------------------------------------


def _emulated_len(code: bytes, i: int) -> int:
    """Length of the instruction at code[i] if the x86 kernel emulates it for uprobes (no
    single-step: push reg, nop, call/jmp/jcc rel), else 0."""
    if i >= len(code):
        return 0
    b = code[i]
    if 0x50 <= b <= 0x57 or b == 0x90:
        return 1
    if b == 0x41 and i + 1 < len(code) and 0x50 <= code[i + 1] <= 0x57:
        return 2
    if b == 0x66 and i + 1 < len(code) and code[i + 1] == 0x90:
        return 2
    if 0x70 <= b <= 0x7F or b == 0xEB:
        return 2
    if b in (0xE8, 0xE9):
        return 5
    if b == 0x0F and i + 1 < len(code) and 0x80 <= code[i + 1] <= 0x8F:
        return 6
    return 0


def _flags_only_len(code: bytes, i: int) -> int:
    """Length of an instruction that changes only flags (not rsp, not argument registers, no
    branch): endbr64, test reg,reg, cmp reg,reg, cmpb $imm8,disp32(%rip). Else 0."""
    c = code[i : i + 7]
    if c[:4] == b"\xf3\x0f\x1e\xfa":
        return 4
    if len(c) >= 3 and c[0] in (0x48, 0x49, 0x4C, 0x4D) and c[1] in (0x85, 0x39, 0x3B) and c[2] >> 6 == 3:
        return 3
    if len(c) >= 2 and c[0] == 0x85 and c[1] >> 6 == 3:
        return 2
    if len(c) >= 7 and c[0] == 0x80 and c[1] == 0x3D:
        return 7
    return 0


def _branch_targets(code: bytes, base: int) -> set[int]:
    """Every offset (relative to code[base]) some byte sequence in ``code`` could branch to
    directly: a superset of the real direct branch targets (raw scan, no decoding)."""
    out: set[int] = set()
    n = len(code)
    for p in range(n - 1):
        b = code[p]
        if 0x70 <= b <= 0x7F or b == 0xEB:
            out.add(p + 2 + struct.unpack_from("<b", code, p + 1)[0] - base)
        if p + 5 <= n and b in (0xE8, 0xE9):
            out.add(p + 5 + struct.unpack_from("<i", code, p + 1)[0] - base)
        if p + 6 <= n and b == 0x0F and 0x80 <= code[p + 1] <= 0x8F:
            out.add(p + 6 + struct.unpack_from("<i", code, p + 2)[0] - base)
    return out


def probe_offset(code: bytes, base: int) -> tuple[int, str]:
    """Where in the function at ``code[base]`` (the code around its entry, as the symbol helper
    returns it) to put its entry probe: 0, or just past up to two leading flags-only instructions
    when the next one is emulated and nothing in the function's neighbourhood branches there
    (arguments and rsp are untouched there, so the probe reads the same registers and the return
    address is still at rsp). Returns (delta, how)."""
    if not 0 <= base < len(code):
        return 0, "entry"
    if _emulated_len(code, base):
        return 0, "entry (emulated)"
    k = 0
    for _ in range(2):
        n = _flags_only_len(code, base + k)
        if not n:
            break
        k += n
        if _emulated_len(code, base + k):
            if k in _branch_targets(code, base):
                return 0, "entry (single-step)"
            return k, f"+{k} (emulated)"
    return 0, "entry (single-step)"


# -- targets ------------------------------------------------------------------------------------


def _start_time(pid: int, proc_root: str = "/proc") -> int | None:
    try:
        text = Path(proc_root, str(pid), "stat").read_text("utf-8", "surrogateescape")
    except OSError:
        return None
    return int(text[text.rindex(")") + 2 :].split()[19])


def _rss_anon_bytes(pid: int, proc_root: str = "/proc") -> int | None:
    try:
        for line in Path(proc_root, str(pid), "status").read_text("utf-8", "surrogateescape").splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _image(pid: int, proc_root: str = "/proc") -> tuple[int, int, int] | None:
    """What tells one program image of ``pid`` from the next (exec keeps the pid and the start
    time): its executable's (device, inode) and where its stack starts (a new stack at every exec,
    placed at random, so a program exec'ing itself is seen too)."""
    try:
        st = os.stat(os.path.join(proc_root, str(pid), "exe"))
        text = Path(proc_root, str(pid), "stat").read_text("utf-8", "surrogateescape")
        return st.st_dev, st.st_ino, int(text[text.rindex(")") + 2 :].split()[25])  # field 28
    except (OSError, ValueError, IndexError):
        return None


#: the return programs a pid whose allocator is not glibc gets from a program in chunk-header mode
EXACT_RETURNS = {"ret_realloc": "ret_realloc_exact", "ret_posix_memalign": "ret_posix_memalign_exact"}


def _comm(pid: int, proc_root: str = "/proc") -> str:
    try:
        return clean(Path(proc_root, str(pid), "comm").read_bytes().strip(), 64)
    except OSError:
        return "?"


def find_libc(pid: int, proc_root: str = "/proc") -> tuple[str, int, int] | None:
    """(path, text start, text end) of the libc ``pid`` has mapped, or None."""
    try:
        lines = Path(proc_root, str(pid), "maps").read_text("utf-8", "surrogateescape").splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1]:
            continue
        path = parts[5].strip()
        if _LIBC.match(os.path.basename(path)):
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            return path, lo, hi
    return None


@dataclass
class _Target:
    pid: int
    comm: str
    start_time: int | None
    state: str = "attaching"
    message: str = ""
    events: list[str] = field(default_factory=list)
    symbols: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    exited_ts_ns: int = 0
    symbolizer: Any = None
    allocator: str = ""
    #: the program image traced (_image) and how many execs replaced it while traced
    image: tuple[int, int, int] | None = None
    execs: int = 0
    #: the files it maps with their build ids (a pprof profile's mappings), read again when a
    #: stack names a file not among them (a library loaded since), at most every MAPPINGS_EVERY_S
    mappings: tuple[tuple[str, str, int, int, int], ...] = ()
    mappings_stale: bool = True
    mappings_next: float = 0.0
    #: what was attached, to attach again at each budgeted window: (program, file, offset, ret,
    #: hot)
    attach_list: list[tuple[str, str, int, bool, bool]] = field(default_factory=list)
    #: the events of the functions a program calls most (malloc, free & co.): detached first
    hot: set[str] = field(default_factory=set)
    #: on a budget, its uprobe_multi links (fd, hot): one per program and file
    links: list[tuple[int, bool]] = field(default_factory=list)


#: the functions a program calls most: their probes are detached first when a window ends (each
#: detach takes the kernel ~0.1 s, and the hot ones cost while they wait their turn)
HOT_SYMBOLS = frozenset({"malloc", "free", "_Znwm", "_ZdlPv", "_ZdlPvm"})
#: on a budget the windows probe these only (the allocator's prefix apart), in one link (they
#: share a return program). Every window attaches them again, and a link costs memtop ~1.5 ms of
#: CPU and each probe in it ~0.6 ms more (the kernel walks every mapping of the file in the
#: system: libc's, ~2,000 here). free is not probed: a candidate is resolved by its address
#: handed out again (what resolves nearly all of them anyway: at a duty of a few per mille a
#: candidate's free falls between windows), and without its trap a traced malloc+free costs
#: ~1.5 us instead of ~2.5 us, so a budget traces 1.6 times the calls and sees as many more of
#: a leak's. The rest (free, realloc, posix_memalign, aligned_alloc, memalign, valloc, pvalloc,
#: mmap, munmap, an allocator's extended API) are not traced, as the target's line says
BUDGET_SYMBOLS = frozenset({"malloc", "calloc", "_Znwm", "_Znam"})
#: what a budgeted window cannot do without
BUDGET_REQUIRED = ("malloc",)
#: the time the hot probes stay on beyond the first window's slice, before one was measured
FIRST_LATENCY_S = 0.2
#: the address table's blocks at most on a budget (alloc_slots: 128k slots, 1 MiB of addresses)
BUDGET_MAX_ALLOCS = 1 << 15
#: the same with uprobe_multi links (all breakpoints out at once: the slice's last check)
FIRST_LATENCY_LINKS_S = 0.01
#: a window's probe the kernel refused to attach again is tried once more after this long (s)
REATTACH_RETRY_S = 0.1
#: how often a target's mapped files may be read again (each is opened for its build id)
MAPPINGS_EVERY_S = 10.0
_MODULE = re.compile(r" \[([^\]]*)\]")
#: /proc/PID/stat's clock ticks per second
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _close_fd(fd: int) -> None:
    """A link's fd closed (in a thread of its own: never an exception to print)."""
    with contextlib.suppress(OSError):
        os.close(fd)


def _age_bucket(age_ns: int) -> int:
    s = age_ns / 1e9
    for i, hi in enumerate(AGE_BUCKETS_S):
        if s < hi:
            return i
    return len(AGE_BUCKETS_S)


class LeaksProbe(BpfProbe):
    name = "leaks"
    program = "leaks"
    features = ("uprobes",)
    cadence_s = 1.0

    def __init__(
        self,
        pids: Sequence[int],
        *,
        max_allocs: int = 1 << 18,
        max_stacks: int = 16384,
        stack_depth: int = 32,
        exact_sizes: bool | None = None,
        place_probes: bool = True,
        proc_root: str = "/proc",
        sample_bytes: int = 0,
        trap_floor: bool = False,
        kernel_stacks: bool = False,
        stack_at_entry: bool = False,
        budget: float = 0.0,
        calls_per_s: float = 0.0,
        prior_cost_s: float = 0.0,
        prior_s: float = 0.0,
    ) -> None:
        super().__init__()
        #: tracing on a budget (a share of one core; 0: all the time): windows, candidates
        self.budget = max(0.0, float(budget))
        if self.budget:
            # the table is read twice a window (candidates, ages), and memtop's CPU is part of
            # the budget: 1M slots took ~20 ms a read. A window holds its slice's live blocks
            # and the candidates (at most half the table)
            max_allocs = min(max_allocs, BUDGET_MAX_ALLOCS)
        self._window_calls_per_s = max(0.0, float(calls_per_s))
        #: the preflight's cost (its traps, CPU s) and how long before this probe it counted:
        #: on a budget both are part of what tracing has spent, and since when
        self._prior_cost_s = max(0.0, float(prior_cost_s))
        self._prior_s = max(0.0, float(prior_s))
        # half the address table at most: the rest for the blocks a window sees come and go
        self.candidates = leakwindows.Candidates(min(leakwindows.MAX_CANDIDATES, max(1024, max_allocs // 2)))
        self._win_lock = threading.RLock()
        self._win_stop = threading.Event()
        self._win_thread: threading.Thread | None = None
        self._win_on = False
        self._win_on_s, self._win_period_s, self._win_wait_s = 0.0, 0.0, 0.0
        self._win_start_ns = 0
        #: the calls the current window's slice counted when last checked
        self._slice_calls = 0
        #: the windows' cost, measured (the targets' CPU from /proc, memtop's own)
        self.meter = leakwindows.CostMeter()
        #: memtop's CPU in polls (ns), and that total when the last window was planned
        self._poll_ns = 0
        self._poll_ns_planned = 0
        self._win_ends: dict[int, int] = {}
        self._last_verdicts: dict[tuple[int, int], tuple[int, int, int, int, float]] = {}
        self.pids = list(dict.fromkeys(int(p) for p in pids))
        self.max_allocs = max_allocs
        self.max_stacks = max_stacks
        self.stack_depth = stack_depth
        self.exact_sizes = exact_sizes
        #: move entry probes onto emulated instructions (False: function entry, as bcc does)
        self.place_probes = place_probes
        self.proc_root = proc_root
        #: byte sampling: mean bytes between samples (0: every allocation, exact)
        self.sample_bytes = max(0, int(sample_bytes))
        #: bench/leaks_cost.py: programs that return at once (the traps' own cost)
        self.trap_floor = trap_floor
        #: stacks walked by bpf_get_stackid() (bench/leaks_cost.py --stacks; default: the
        #: program's own walk, which stops where the frame chain does instead of faulting there)
        self.kernel_stacks = kernel_stacks
        #: bench/leaks_stacks.py: the stack taken by an entry program on malloc/calloc
        self.stack_at_entry = stack_at_entry
        self.targets: dict[int, _Target] = {}
        self._frames: dict[tuple[int, int], tuple[str, ...]] = {}
        self._last_emitted: dict[tuple[int, int], tuple[int, int, int, int]] = {}
        self._ages: dict[tuple[int, int], tuple[int, tuple[int, ...]]] = {}
        self._ages_ts_ns = 0
        self._ages_next = 0.0
        self._ages_cost_s = 0.0
        #: the address table changed since the last age scan (budget: a window traced)
        self._ages_stale = True
        self._how: dict[str, str] = {}
        self._pending: list[int] = []
        self._pending_lock = threading.Lock()
        self._allocators: dict[int, allocators.Allocator] = {}
        self._allocs_map: tuple[mmap.mmap, mmap.mmap] | None = None
        #: on a budget, windows attach through uprobe_multi links (Linux 6.6+): each program's
        #: probes in one link, all breakpoints in or out at once, one grace period per link
        #: instead of one per probe under the kernel's event_mutex (a perf-event uprobe's close:
        #: 0.1-0.4 s each, the hot ones trapping meanwhile). False when the kernel refused one
        #: (``multi_error`` says why): perf-event uprobes, as without a budget
        self._multi = bool(self.budget)
        self.multi_error = ""
        #: the window the last poll of the stacks' tables followed, and the blocks it counted
        #: outstanding per pid (on a budget the tables change only while a window traces)
        self._polled_window = -1
        self._tracked: dict[int, int] = {}

    def defines(self) -> dict[str, int]:
        return {
            "MAX_ALLOCS": self.max_allocs,
            "ALLOC_SLOTS_LOG2": alloc_slots(self.max_allocs).bit_length() - 1,
            "MAX_STACKS": self.max_stacks,
            "MAX_STACK_TRACES": self.max_stacks,
            "STACK_DEPTH": self.stack_depth,
            "MAX_TIDS": MAX_TIDS,
            "MAX_PIDS": max(8, len(self.pids)),
            "SIZE_FROM_HEADER": 0 if self._exact_mode() else 1,
            "SAMPLE_BYTES": self.sample_bytes,
            "TRAP_FLOOR": int(self.trap_floor),
            "KERNEL_STACKS": int(self.kernel_stacks),
            "STACK_AT_ENTRY": int(self.stack_at_entry),
            "A_EMPTY": A_EMPTY,
            "A_FREED": A_FREED,
            "A_BUSY": A_BUSY,
            **{f"C_{c.name}": c.value for c in Counter},
            "N_COUNTERS": len(Counter),
            # the compiler's process also loads each uprobe program for uprobe_multi links
            "UPROBE_MULTI": int(self._multi),
        }

    def _exact_mode(self) -> bool:
        if self.exact_sizes is not None:
            return self.exact_sizes
        # chunk headers are glibc's layout; any other allocator (or one that cannot be told)
        # keeps requested sizes at entry
        for pid in self.pids:
            alloc = self._allocator(pid)
            if alloc.traceable and not alloc.header_sizes:
                self.exact_sizes = True
                return True
        self.exact_sizes = False
        return False

    def _allocator(self, pid: int) -> allocators.Allocator:
        alloc = self._allocators.get(pid)
        if alloc is None:
            alloc = self._allocators[pid] = allocators.find_allocator(pid, self.proc_root)
        return alloc

    def load(self) -> None:
        alive = [p for p in self.pids if _start_time(p, self.proc_root) is not None]
        if not alive:
            raise PidNotFound(
                f"no such process: {', '.join(map(str, self.pids))}",
                "pick running pids (see the processes pane)",
            )
        super().load()

    # -- attach / detach ------------------------------------------------------------------------
    def after_load(self) -> None:
        if self.sample_bytes:
            self._fill_sampling_tables()
        # every program verified before the first probe lands: BCC loads a function at its first
        # attach, and the verifier's time between malloc's entry probe and its return probe would
        # be a window where allocations are seen going in but not coming out
        names = {fn for specs in (SPECS_HEADER, SPECS_EXACT) for _s, e, r in specs for fn in (e, r) if fn}
        names |= set(EXACT_RETURNS.values())
        if self.stack_at_entry:
            names.add("enter_stack")
        bcc_compat.load_uprobe_programs(self.bpf, sorted(names))
        for pid in self.pids:
            t = _Target(pid, _comm(pid, self.proc_root), _start_time(pid, self.proc_root))
            self.targets[pid] = t
            self._attach_pid(t)
        if self.budget and any(t.state == "tracing" for t in self.targets.values()):
            self._start_windows()
        if not any(t.state == "tracing" for t in self.targets.values()):
            reasons = "; ".join(f"pid {t.pid}: {t.message}" for t in self.targets.values())
            self.close()
            raise ProbeError(
                f"leaks could not attach to any pid ({reasons})",
                "check the pids are alive; the pane's target line says why each one failed",
            )

    def _fill_sampling_tables(self) -> None:
        """The tables the program draws sampling intervals and weights from (no floating point in
        BPF): -ln(u) for 256 quantiles of u, and g(x) = x / (1 - e^-x) every eighth of x."""
        exp_tab, weight_tab = self.bpf["exp_tab"], self.bpf["weight_tab"]
        for k in range(256):
            exp_tab[exp_tab.Key(k)] = exp_tab.Leaf(round(-math.log((k + 0.5) / 256) * 1024))
        for i in range(66):
            x = i / 8
            g = 1.0 if x == 0 else x / (1 - math.exp(-x))
            weight_tab[weight_tab.Key(i)] = weight_tab.Leaf(round(g * 1024))

    def _attach_pid(self, t: _Target) -> None:
        if t.start_time is None:
            t.state, t.message = "failed", "process not found"
            return
        t.image = _image(t.pid, self.proc_root)
        alloc = self._allocator(t.pid)
        t.allocator = alloc.lane
        if not alloc.traceable:
            t.state, t.message = "failed", f"{alloc.lane}: {alloc.why}"
            return
        table = self.bpf["libc_text"]
        if not alloc.static:  # mmap calls from inside the allocator are its own
            table[table.Key(t.pid)] = table.Leaf(alloc.lo, alloc.hi)
        # a non-glibc allocator has no chunk headers to read sizes from: requested sizes, whatever
        # mode the program runs in (a pid that exec'd into jemalloc under a glibc-mode program)
        exact = bool(self.exact_sizes) or not alloc.header_sizes
        plan = probe_plan(t.pid, alloc, exact, self.proc_root)
        if self.budget:
            plan = [
                (p, kept)
                for p, sp in plan
                if (kept := [x for x in sp if x[0].removeprefix(alloc.prefix) in BUDGET_SYMBOLS])
            ]
        if exact and not self.exact_sizes:
            plan = [(p, [(s, e, EXACT_RETURNS.get(r or "", r)) for s, e, r in sp]) for p, sp in plan]
        if self.stack_at_entry:
            plan = [(p, [(s, "enter_stack" if r == "ret_hdr" else e, r) for s, e, r in sp]) for p, sp in plan]
        t.attach_list, t.hot = [], set()
        t.symbolizer = symbols.Symbolizer(t.pid, self.proc_root)
        t.symbolizer.frames([alloc.lo])  # load the allocator's symbols while the process is alive
        seen: dict[tuple[str, int], str] = {}
        for path, specs in plan:
            if self.budget:
                # the hot ones last, as every later window attaches them: each attach takes the
                # kernel ~0.1 s, and free's probe landing first had every call trap for the two
                # seconds the others took (at 1M/s, a second of the target's CPU)
                specs = sorted(specs, key=lambda sp: sp[0].removeprefix(alloc.prefix) in HOT_SYMBOLS)
            self._attach_file(t, alloc, path, specs, seen)
        if self._multi:
            self._first_links(t)
            if self._multi:
                pass  # the window thread attaches the first window's links as it starts
            elif not t.events:
                t.state, t.message = "failed", f"{alloc.describe()}: could not attach ({self.multi_error})"
                return
        attached = {s.split("=", 1)[0] for s in t.symbols}
        required = BUDGET_REQUIRED if self.budget else REQUIRED
        missing = [s for s in required if alloc.prefix + s not in attached]
        if missing:
            self._detach_pid(t)
            t.state, t.message = "failed", f"{alloc.describe()}: could not attach {', '.join(missing)}"
            return
        if _start_time(t.pid, self.proc_root) != t.start_time:
            self._detach_pid(t)
            t.state, t.message = "exited", "exited while attaching"
            return
        t.state = "tracing"
        t.message = self._tracing_message(t, alloc)

    def _attach_file(
        self,
        t: _Target,
        alloc: allocators.Allocator,
        path: str,
        specs: list[tuple[str, str | None, str | None]],
        seen: dict[tuple[str, int], str],
    ) -> None:
        """Attach the entry and return probes of ``specs`` (symbol, entry program, return
        program) in the file at ``path``; ``seen`` holds the addresses already probed (aliases)."""
        try:
            # the entries, from the file the process maps (by the symbol helper, bounded in
            # time: a target's files cannot hold the attach up)
            found = symbols.resolve_functions(t.pid, path, [sym for sym, _e, _r in specs])
        except symbols.SymbolError as exc:
            t.failed.append(f"{clean(os.path.basename(path), 80)}: {exc}")
            return
        for sym, enter_fn, ret_fn in specs:
            where = found.get(sym, "not looked up")
            if isinstance(where, str):  # one symbol failing is reported, not fatal
                if not where.startswith("no function"):  # one the object lacks is no failure
                    t.failed.append(f"{sym}: {clean(where, 200)}")
                continue
            mod_path, off, code, base = where
            if (mod_path, off) in seen:  # an alias (memalign = aligned_alloc): one probe serves both
                t.symbols.append(f"{sym}={seen[(mod_path, off)]}")
                continue
            seen[(mod_path, off)] = sym
            # only rsp-neutral, argument-preserving instructions are skipped, so a return probe
            # still finds the return address at rsp
            delta, how = probe_offset(code, base) if self.place_probes else (0, "entry")
            hot = sym.removeprefix(alloc.prefix) in HOT_SYMBOLS
            if self._multi:  # attached by _first_links, one link per program
                for fn, ret in ((enter_fn, False), (ret_fn, True)):
                    if fn is not None:
                        t.attach_list.append((fn, mod_path, off + delta, ret, hot))
                t.symbols.append(sym)
                self._how[sym.removeprefix(alloc.prefix)] = how
                continue
            try:
                if enter_fn is not None:
                    t.events.append(
                        bcc_compat.attach_uprobe_at(self.bpf, enter_fn, mod_path, off + delta, t.pid, False)
                    )
                    t.attach_list.append((enter_fn, mod_path, off + delta, False, hot))
                    if hot:
                        t.hot.add(t.events[-1])
                if ret_fn is not None:
                    t.events.append(
                        bcc_compat.attach_uprobe_at(self.bpf, ret_fn, mod_path, off + delta, t.pid, True)
                    )
                    t.attach_list.append((ret_fn, mod_path, off + delta, True, hot))
                    if hot:
                        t.hot.add(t.events[-1])
            except Exception as exc:  # noqa: BLE001
                t.failed.append(f"{sym}: {clean(str(exc), 200)}")
                continue
            t.symbols.append(sym)
            self._how[sym.removeprefix(alloc.prefix)] = how

    def _tracing_message(self, t: _Target, alloc: allocators.Allocator) -> str:
        """The target's line once it traces: the lane, what was probed, what it cannot see."""
        probed = len([s for s in t.symbols if "=" not in s])
        message = f"{alloc.lane}: {probed} symbols in {os.path.basename(alloc.path)}"
        if alloc.static:
            message += " (static: its own mmap calls are not traced)"
        # what it held before: allocations made before attach are not seen (nor their frees)
        anon = _rss_anon_bytes(t.pid, self.proc_root)
        if self.sample_bytes:
            message += f"; byte sampling every ~{fmt.bytes_h(self.sample_bytes)}: bytes are estimates"
        message += f"; counting since {time.strftime('%H:%M:%S')}"
        if anon is not None:
            message += f", {fmt.bytes_h(anon)} anonymous memory already resident then (not seen)"
        if alloc.note:
            message += f"; {alloc.note}"
        if self.budget:
            message += (
                "; on a budget only malloc and calloc (and new) are traced: blocks from realloc"
                " and the others are not seen, a block is counted freed once its address is"
                " handed out again"
            )
        if self.multi_error:
            message += f"; {self.multi_error}"
        return message

    def add_pids(self, pids: Sequence[int]) -> None:
        """Trace more pids with the running program (attached at the next poll, in the probe's
        own thread)."""
        with self._pending_lock:
            for pid in pids:
                if int(pid) not in self.targets and int(pid) not in self._pending:
                    self._pending.append(int(pid))

    def _attach_pending(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, []
        for pid in pending:
            if pid in self.targets and self.targets[pid].state == "tracing":
                continue
            self.pids.append(pid)
            t = _Target(pid, _comm(pid, self.proc_root), _start_time(pid, self.proc_root))
            self.targets[pid] = t
            if (
                not self.exact_sizes
                and self._allocator(pid).traceable
                and not self._allocator(pid).header_sizes
            ):
                # this program reads glibc's chunk headers for sizes: another allocator's blocks
                # would be mis-sized, so this pid is refused rather than misread
                a = self._allocator(pid)
                t.allocator = a.lane
                t.state = "failed"
                t.message = (
                    f"{a.lane}: traced with requested sizes, but the probe already runs in glibc's "
                    "chunk-header mode; trace it alone (memtop --leaks PID)"
                )
                continue
            self._attach_pid(t)

    def _on_exec(self, t: _Target) -> None:
        """``t`` exec'd: the old image's uprobes, allocations and symbols go; the new image's
        allocator is found and traced."""
        was = t.allocator
        self._detach_pid(t)
        dropped = self._forget_pid(t.pid)
        self.candidates.forget_pid(t.pid)  # the old image's candidates went with it
        if t.symbolizer is not None:
            t.symbolizer.close()
            t.symbolizer = None
        self._allocators.pop(t.pid, None)
        t.execs += 1
        t.comm = _comm(t.pid, self.proc_root)
        t.symbols, t.failed, t.state = [], [], "attaching"
        t.mappings, t.mappings_stale, t.mappings_next = (), True, 0.0
        self._attach_pid(t)
        t.message = (
            f"exec'd (was {was or 'not traced'}; {dropped} outstanding allocations of the old image "
            f"dropped); {t.message}"
        )

    def _forget_pid(self, pid: int) -> int:
        """Drop ``pid``'s allocations from the kernel tables and this probe's caches (its address
        space went with an exec); how many blocks were outstanding."""
        assert self.bpf is not None
        stats = self.bpf["stats"]
        for key in [k for k in stats.keys() if int(k.pid) == pid]:
            try:
                del stats[key]
            except KeyError:
                pass
        addr_map, info_map = self._alloc_table()
        addrs = self.bpf["alloc_addr"]
        isz = ALLOC_INFO.layout.size or 0
        dropped = 0
        with memoryview(info_map) as info:
            mine = [i for i in live_slots(addr_map) if ALLOC_INFO.unpack_from(info, i * isz)[0] == pid]
        for i in mine:  # tombstones: searches go on past them, new blocks may take them
            addrs[addrs.Key(i)] = addrs.Leaf(A_FREED)
            dropped += 1
        text = self.bpf["libc_text"]
        try:
            del text[text.Key(pid)]
        except KeyError:
            pass
        for cache in (self._frames, self._last_emitted, self._ages):
            for key in [k for k in cache if k[0] == pid]:
                del cache[key]
        return dropped

    def _detach_pid(self, t: _Target) -> None:
        self._close_links(t)
        if self.bpf is None:
            return
        for ev in t.events:
            bcc_compat.detach_uprobe_event(self.bpf, ev)
        t.events.clear()

    def close(self) -> None:
        self._win_stop.set()
        if self._win_thread is not None and self._win_thread is not threading.current_thread():
            self._win_thread.join(timeout=30)
        self._win_thread = None
        with self._win_lock:  # a window thread that outlived the join finds bpf gone, never half
            if self._allocs_map is not None:
                for m in self._allocs_map:
                    m.close()
                self._allocs_map = None
            for t in self.targets.values():
                if t.symbolizer is not None:
                    t.symbolizer.close()
                    t.symbolizer = None
                self._close_links(t)
                t.events.clear()
            super().close()

    def note(self) -> str:
        tracing = [t for t in self.targets.values() if t.state == "tracing"]
        sizes = "requested sizes" if self.exact_sizes else "usable sizes from glibc chunk headers"
        free_how = self._how.get("free", "")
        return f"pids {', '.join(str(t.pid) for t in tracing)}; {sizes}; free probe {free_how}"

    # -- polling --------------------------------------------------------------------------------
    def _counters(self) -> list[int]:
        t = self.bpf["counters"]
        return [int(t.sum(t.Key(i)).value) for i in range(len(Counter))]

    def _stack_frames(self, pid: int, sid: int) -> tuple[str, ...]:
        key = (pid, sid)
        cached = self._frames.get(key)
        if cached is not None:
            return cached
        if sid < 0:
            frames: tuple[str, ...] = (NO_STACK,)
        else:
            t = self.bpf["stacks"]
            try:
                leaf = t[t.Key(sid)]
                ips = [int(ip) for ip in leaf.ip if ip]
            except KeyError:
                ips = []
            target = self.targets.get(pid)
            sym = target.symbolizer if target else None
            if not ips:
                frames = (NO_STACK,)
            elif sym is not None:
                try:
                    frames = tuple(f.replace(";", ":") for f in sym.frames(ips))
                except Exception:  # noqa: BLE001
                    frames = tuple(f"0x{ip:x}" for ip in ips)
            else:
                frames = tuple(f"0x{ip:x}" for ip in ips)
            if target is not None and not target.mappings_stale:
                known = {os.path.basename(m[0]) for m in target.mappings}
                if any(m.group(1) not in known for f in frames if (m := _MODULE.search(f))):
                    target.mappings_stale = True
        self._frames[key] = frames
        return frames

    def _refresh_mappings(self, t: _Target) -> None:
        """The files ``t`` maps and their build ids, when a stack named one not known yet."""
        now = time.monotonic()
        if not t.mappings_stale or now < t.mappings_next:
            return
        t.mappings_next = now + MAPPINGS_EVERY_S
        try:
            found = symbols.mappings(t.pid)
        except symbols.SymbolError:
            return  # the helper could not answer: the profile names fewer files, no build ids
        if found:
            t.mappings = tuple((clean(p, 4096), clean(b, 128), lo, hi, off) for p, b, lo, hi, off in found)
            t.mappings_stale = False

    def _alloc_table(self) -> tuple[mmap.mmap, mmap.mmap]:
        """The address table's two arrays (addresses, and what each slot's block is), mapped
        read-only: mmapable arrays, read in place, not copied."""
        if self._allocs_map is None:
            assert self.bpf is not None
            slots = alloc_slots(self.max_allocs)
            maps = []
            for name, size in (("alloc_addr", 8), ("alloc_info", ALLOC_INFO.layout.size or 0)):
                length = -(-slots * size // mmap.PAGESIZE) * mmap.PAGESIZE
                maps.append(mmap.mmap(int(self.bpf[name].map_fd), length, mmap.MAP_SHARED, mmap.PROT_READ))
            self._allocs_map = (maps[0], maps[1])
        return self._allocs_map

    def _scan_ages(self, now_ns: int) -> None:
        """Oldest outstanding allocation and an age histogram per stack, from the address table.
        The table can be large, so the scan's own cost sets how often it runs."""
        t0 = time.monotonic()
        if t0 < self._ages_next:
            return
        if self.budget and not self._ages_stale:
            # on a budget the table changes only while a window traces: one scan after each
            # (a scan of the default table is ~20 ms: every second, 2 % of a core)
            return
        self._ages_stale = False
        addr_map, info_map = self._alloc_table()
        oldest: dict[tuple[int, int], int] = {}
        hist: dict[tuple[int, int], list[int]] = {}
        nb = len(AGE_BUCKETS_S) + 1
        isz = ALLOC_INFO.layout.size or 0
        # Read while the program writes: a slot freed and taken again between the two reads
        # gives another block's figures, which is no worse for ages than reading a moment later
        with memoryview(info_map) as info:
            for i in live_slots(addr_map):
                pid, sid, size, ts = ALLOC_INFO.unpack_from(info, i * isz)
                k = (pid, sid)
                o = oldest.get(k)
                if o is None or ts < o:
                    oldest[k] = ts
                h = hist.get(k)
                if h is None:
                    h = hist[k] = [0] * nb
                h[_age_bucket(max(0, now_ns - ts))] += size
        self._ages = {k: (oldest[k], tuple(hist[k])) for k in oldest}
        self._ages_ts_ns = now_ns
        self._ages_cost_s = time.monotonic() - t0
        self._ages_next = t0 + max(0.0, 20 * self._ages_cost_s)

    def poll(self) -> list[Record]:
        cpu0 = time.thread_time_ns()
        with self._win_lock:  # never while a window attaches or detaches
            out = self._poll()
            if self.budget:
                out += self._budget_records()
            # on a budget, memtop's polls are part of what tracing costs
            self._poll_ns += time.thread_time_ns() - cpu0
            return out

    def _poll(self) -> list[Record]:
        if self.bpf is None:
            return []
        out: list[Record] = []
        if self._pending:
            self._attach_pending()
        now_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        exiting: list[_Target] = []
        for t in self.targets.values():
            if t.state == "tracing" and _start_time(t.pid, self.proc_root) != t.start_time:
                exiting.append(t)
            elif t.state == "tracing" and t.image is not None:
                image = _image(t.pid, self.proc_root)
                if image is not None and image != t.image:
                    self._on_exec(t)
        if exiting or self._win_on:
            self._ages_stale = True
        if exiting:
            self._ages_next = 0.0  # the final figures of an exiting pid include its ages
        if not (
            self.budget and not exiting and not self._win_on and self._polled_window == self.candidates.window
        ):
            out += self._poll_stacks(now_ns)
            self._polled_window = self.candidates.window
        # else on a budget between windows: nothing traces, the tables are as the last poll read
        # them (memtop's polls are part of the budget: ~1.5 ms each, a fifth of 1 % of a core)
        for t in exiting:
            self._detach_pid(t)
            t.state = "exited"
            t.exited_ts_ns = now_ns
            t.message = "exited; showing its last figures"
            if t.symbolizer is not None:
                t.symbolizer.close()
                t.symbolizer = None
        for t in self.targets.values():
            out.append(
                LeakTarget(
                    pid=t.pid,
                    comm=t.comm,
                    state=t.state,
                    message=t.message,
                    symbols=tuple(t.symbols),
                    failed_symbols=tuple(t.failed),
                    tracked_allocs=self._tracked.get(t.pid, 0),
                    exited_ts_ns=t.exited_ts_ns,
                    allocator=t.allocator,
                    execs=t.execs,
                    mappings=t.mappings,
                )
            )
        c = self._counters()
        for i in LOST_COUNTERS:
            out.append(Lost(probe=self.name, what=COUNTERS[i], count=c[i]))
        out.append(LeakCalls(calls=c[Counter.CALLS], sample_bytes=self.sample_bytes))
        return out

    def _poll_stacks(self, now_ns: int) -> list[Record]:
        """Each stack's figures from the kernel's tables (those that changed, and those with
        blocks outstanding: their ages move), and the blocks tracked per pid."""
        assert self.bpf is not None
        out: list[Record] = []
        _k, values, n, ksz, vsz = bcc_compat.map_dump(self.bpf, "stats")
        stats: dict[tuple[int, int], tuple[int, int, int, int]] = {}
        for i in range(n):
            pid, sid = STACK_KEY.unpack_from(_k, i * ksz)
            ab, ac, fb, fc = STACK_VAL.unpack_from(values, i * vsz)
            stats[(pid, sid)] = (ab, ac, fb, fc)
        self._scan_ages(now_ns)
        live = {t.pid for t in self.targets.values() if t.state == "tracing"}
        for t in self.targets.values():
            if t.pid in live:
                self._refresh_mappings(t)
        tracked: dict[int, int] = {}
        for (pid, sid), (ab, ac, fb, fc) in stats.items():
            if pid not in live:
                continue
            tracked[pid] = tracked.get(pid, 0) + max(0, ac - fc)
            prev = self._last_emitted.get((pid, sid))
            cur = (ab, ac, fb, fc)
            if prev == cur and ac <= fc:
                continue  # nothing outstanding and unchanged: the state keeps the last figures
            self._last_emitted[(pid, sid)] = cur
            oldest, hist = self._ages.get((pid, sid), (0, ()))
            if ac <= fc:
                oldest, hist = 0, ()
            out.append(
                LeakStack(
                    pid=pid,
                    stack_id=sid,
                    frames=self._stack_frames(pid, sid),
                    alloc_bytes=ab,
                    alloc_count=ac,
                    free_bytes=fb,
                    free_count=fc,
                    oldest_ts_ns=oldest,
                    age_hist_bytes=hist,
                    ages_ts_ns=self._ages_ts_ns,
                )
            )
        self._tracked = tracked
        return out

    def counters(self) -> dict[str, int]:
        """All kernel-side counters by name (drops, failed allocations, internal mmaps)."""
        c = self._counters()
        return {what: c[i] for i, what in COUNTERS.items()}

    # -- tracing on a budget ----------------------------------------------------------------------
    def _start_windows(self) -> None:
        """The first window is on (load attached everything): the window thread ends it, then
        attaches and detaches every target's uprobes in slices sized to the budget."""
        self._win_on = True
        # the budget's clock starts with the preflight, whose count is spent already
        self._win_start_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC) - int(self._prior_s * 1e9)
        self.meter.prior(self._prior_cost_s)
        # the first window as the next ones are planned: at the headroom, with the hot probes'
        # two detaches (~0.1 s each) on beyond the slice
        self._win_wait_s, self._win_period_s = leakwindows.plan_window(
            leakwindows.HEADROOM * self.budget,
            self._window_calls_per_s,
            0.0,
            FIRST_LATENCY_LINKS_S if self._multi else FIRST_LATENCY_S,
        )
        self._win_on_s = self._win_wait_s
        self._win_thread = threading.Thread(target=self._windows, name="memtop-leak-windows", daemon=True)
        self._win_thread.start()

    def _targets_cpu_s(self) -> float | None:
        """The traced targets' CPU time (s): a single-threaded one's from /proc/PID/schedstat (ns),
        else /proc/PID/stat's utime+stime (every thread's, in clock ticks). None when one cannot
        be read (gone): that window's cost is estimated."""
        total = 0.0
        for t in self.targets.values():
            if t.state != "tracing":
                continue
            try:
                text = Path(self.proc_root, str(t.pid), "stat").read_text("utf-8", "surrogateescape")
                f = text[text.rindex(")") + 2 :].split()
                if f[17] == "1":  # num_threads
                    total += int(Path(self.proc_root, str(t.pid), "schedstat").read_text().split()[0]) / 1e9
                else:
                    total += (int(f[11]) + int(f[12])) / _CLK_TCK
            except (OSError, ValueError, IndexError):
                return None
        return total

    def _windows(self) -> None:
        """Each window: wait the slice (ended early once it counted the calls the budget affords:
        a rate jump), detach, follow the candidates; wait half the untraced span, read the
        targets' CPU (the window's cost: what they spent beyond their untraced rate), wait the
        other half, read it again (their untraced rate); plan the next window from what the
        windows cost, measured, and start it once the budget's headroom since tracing began has
        paid for it; attach again. The probes are on from the first attach to the last detach
        (both take time: the kernel lets go of a uprobe after a grace period), so that whole span
        is the window's."""
        attach_ns = 0
        attach_s = 0.0
        cpu0 = time.thread_time_ns()
        with self._win_lock:
            if self.bpf is None:
                return
            calls0 = self._counters()[Counter.CALLS]
            cpu_began = self._targets_cpu_s()
            attach_began = time.monotonic()
            if self._multi:  # the first window's links (load checked the kernel takes them)
                attach_began = min(
                    (self._reattach(t) for t in self.targets.values() if t.state == "tracing"),
                    default=attach_began,
                )
                attach_s = time.monotonic() - attach_began
                attach_ns = time.thread_time_ns() - cpu0
        planned = (self._win_wait_s, self._win_period_s)
        cap = leakwindows.slice_calls(leakwindows.HEADROOM * self.budget, self._win_period_s, 0.0)
        self._slice_calls = 0
        while self._slice(self._win_wait_s, calls0, cap):
            cpu0 = time.thread_time_ns()
            # the window lasts until the hot probes are off: from there it costs next to nothing
            hot_off = detach_began = time.monotonic()
            for t in list(self.targets.values()):
                hot_off = max(hot_off, self._detach_window(t))
            detach_s = time.monotonic() - detach_began
            on_s = max(0.0, hot_off - attach_began)
            with self._win_lock:
                if self.bpf is None:
                    return
                self._win_on = False
                calls = max(calls0, self._counters()[Counter.CALLS]) - calls0
                if on_s > 0:
                    self._window_calls_per_s = calls / on_s
                    self.meter.calls(self._window_calls_per_s)
                self._end_window()
            spent_ns = time.thread_time_ns() - cpu0
            self.meter.own((spent_ns + attach_ns) / 1e9)
            # the targets' added CPU as estimated: each call (with its free) at leakcost's cost
            estimated_s = calls * leakcost.estimate(1.0, 1.0).exact_cpu
            # memtop's own work per window (this detach and scan, the last attach) and the time
            # the probes were on beyond the slice (attaching, detaching)
            overhead_s = (spent_ns + attach_ns) / 1e9
            latency_s = max(0.0, on_s - self._win_wait_s)
            off_s = max(0.0, self._win_period_s - (time.monotonic() - attach_began))
            if self._win_stop.wait(off_s / 2):
                return
            mid, cpu_mid = time.monotonic(), self._targets_cpu_s()
            if self._win_stop.wait(off_s / 2):
                return
            end, cpu_end = time.monotonic(), self._targets_cpu_s()
            if cpu_mid is not None and cpu_end is not None:
                self.meter.untraced(cpu_end - cpu_mid, end - mid)
            traced = cpu_mid - cpu_began if cpu_mid is not None and cpu_began is not None else None
            measured0 = self.meter.measured
            counted_s = self.meter.window(estimated_s, traced, mid - attach_began)
            self.meter.window_spent(counted_s + overhead_s)
            self.meter.log.append(
                leakwindows.WindowLog(
                    index=self.candidates.window,
                    planned_on_s=planned[0],
                    planned_period_s=planned[1],
                    on_s=on_s,
                    calls=calls,
                    estimated_s=estimated_s,
                    target_s=counted_s,
                    measured=self.meter.measured > measured0,
                    own_s=overhead_s,
                    attach_s=attach_s,
                    detach_s=detach_s,
                    slice_calls=self._slice_calls,
                    cap_calls=cap,
                    spent_s=self.meter.spent_s,
                    elapsed_s=(time.clock_gettime_ns(time.CLOCK_MONOTONIC) - self._win_start_ns) / 1e9,
                )
            )
            hold_s = self._plan_next(overhead_s, latency_s, attach_began)
            if hold_s > 0 and self._win_stop.wait(hold_s):
                return
            planned = (self._win_wait_s, self._win_period_s)
            cap = leakwindows.slice_calls(
                leakwindows.HEADROOM * self.budget, self._win_period_s, overhead_s, self.meter.scale()
            )
            cpu0 = time.thread_time_ns()
            with self._win_lock:
                if self.bpf is None:
                    return
                calls0 = self._counters()[Counter.CALLS]
                self._slice_calls = 0
                cpu_began = self._targets_cpu_s()
                attach_began = time.monotonic()
                hot_on = [self._reattach(t) for t in self.targets.values() if t.state == "tracing"]
                attach_s = time.monotonic() - attach_began
                # the window is on from its first hot probe (the others cost next to nothing)
                attach_began = min(hot_on, default=attach_began)
                self._win_on = True
            attach_ns = time.thread_time_ns() - cpu0

    def _slice(self, wait_s: float, calls0: int, cap: float) -> bool:
        """Wait out a window's slice, checking the calls it counted SLICE_CHECKS times: once
        they reach ``cap`` (what the budget affords; the rate jumped) the slice ends. False:
        the probe is closing."""
        end = time.monotonic() + wait_s
        step = max(0.005, wait_s / leakwindows.SLICE_CHECKS)
        while (left := end - time.monotonic()) > 0:
            if self._win_stop.wait(min(step, left)):
                return False
            # never waiting for a poll (its symbol lookups take tens of ms of wall time, the
            # probes trapping all along): the slice ends on time, its calls checked next step
            if not self._win_lock.acquire(blocking=False):
                continue
            try:
                if self.bpf is None:
                    return False
                self._slice_calls = self._counters()[Counter.CALLS] - calls0
                if cap > 0 and self._slice_calls >= cap:
                    break
            finally:
                self._win_lock.release()
        return not self._win_stop.is_set()

    def _plan_next(self, overhead_s: float, latency_s: float, attach_began: float) -> float:
        """The next window's slice and period, planned at the headroom on the highest recent
        rate and the measured cost per call; returns how long to wait beyond now for the budget
        to have paid for it (0: at once)."""
        with self._win_lock:
            poll_s = (self._poll_ns - self._poll_ns_planned) / 1e9
            self._poll_ns_planned = self._poll_ns
            self.meter.own(poll_s)
            rate = self.meter.planning_rate(self._window_calls_per_s)
            scale = self.meter.scale()
            wait, period = leakwindows.plan_window(
                leakwindows.HEADROOM * self.budget, rate, overhead_s, latency_s, scale
            )
            expected_s = self.meter.expected_s(
                leakwindows.window_cost(rate, wait, overhead_s, latency_s, scale)
            )
            elapsed_s = (time.clock_gettime_ns(time.CLOCK_MONOTONIC) - self._win_start_ns) / 1e9
            hold_s = max(0.0, self.meter.start_after_s(self.budget, expected_s) - elapsed_s)
            self._win_wait_s = wait
            self._win_period_s = period
            self._win_on_s = wait + latency_s
            return hold_s

    def _first_links(self, t: _Target) -> None:
        """Whether the kernel takes ``t``'s links: attached and closed at once (the window thread
        attaches the first window's as it starts: attached here, the probes would trap through
        the rest of the load, ~50 ms, 50k calls at 1M/s). Where the kernel refuses one (before
        Linux 6.6, or a program not loaded for them) every window uses perf-event uprobes, and
        this first one is on from here."""
        try:
            self._link_attach(t, strict=True)
            self._close_links(t)
        except OSError as exc:
            self._close_links(t)
            self._multi = False
            self.multi_error = f"uprobe_multi links refused ({clean(str(exc), 120)}): one uprobe at a time"
            self._reattach(t)

    def _link_groups(self, t: _Target) -> list[tuple[str, str, bool, list[int], bool]]:
        """``t``'s attach list as links: (program, file, return probe, offsets, hot), the hot
        ones last."""
        groups: dict[tuple[str, str, bool], tuple[list[int], bool]] = {}
        for fn, path, off, ret, hot in t.attach_list:
            offs, was_hot = groups.get((fn, path, ret), ([], False))
            groups[(fn, path, ret)] = ([*offs, off], was_hot or hot)
        out = [(fn, path, ret, offs, hot) for (fn, path, ret), (offs, hot) in groups.items()]
        return sorted(out, key=lambda g: g[4])

    def _link_attach(self, t: _Target, strict: bool = False) -> float:
        """``t``'s probes as uprobe_multi links, the hot ones last. Returns when the first hot
        link began to attach (monotonic s). ``strict``: raise on the first refusal (else that
        link goes without, as a perf-event uprobe the kernel refuses does)."""
        hot_on = None
        for fn, path, ret, offs, hot in self._link_groups(t):
            if hot and hot_on is None:
                hot_on = time.monotonic()
            try:
                prog = bcc_compat.load_uprobe_multi(self.bpf, fn)
                fd = bcc_compat.attach_uprobe_multi(prog, path, offs, t.pid, ret)
            except Exception as exc:  # noqa: BLE001 - BCC raises plain Exceptions
                if strict:
                    raise OSError(str(exc)) from exc
                if _start_time(t.pid, self.proc_root) != t.start_time:
                    break  # the process is gone: the next poll says so
                continue
            t.links.append((fd, hot))
        return time.monotonic() if hot_on is None else hot_on

    def _close_links(self, t: _Target) -> float:
        """``t``'s links closed, all at once (one thread each): a close takes its breakpoints out
        at once, then waits for a grace period; closed one after another the hot ones would
        trap through the others' waits. Returns when the closes began (monotonic s): the
        breakpoints are out within microseconds of it."""
        links, t.links = t.links, []
        began = time.monotonic()
        if len(links) == 1:
            _close_fd(links[0][0])
        elif links:
            threads = [threading.Thread(target=_close_fd, args=(fd,), daemon=True) for fd, _hot in links]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        return began

    def _reattach(self, t: _Target) -> float:
        """``t``'s uprobes again, as the first attach placed them (no symbol lookups); the hot
        ones last (each attach takes the kernel ~0.1 s, and they cost from the moment they
        land). Returns when the first hot one began to attach (monotonic s)."""
        if self._multi:
            return self._link_attach(t)
        t.events, t.hot = [], set()
        hot_on = None
        for fn, path, off, ret, hot in sorted(t.attach_list, key=lambda sp: sp[4]):
            if hot and hot_on is None:
                hot_on = time.monotonic()
            try:
                ev = bcc_compat.attach_uprobe_at(self.bpf, fn, path, off, t.pid, ret)
            except OSError as exc:
                if "exiting" in str(exc) or _start_time(t.pid, self.proc_root) != t.start_time:
                    break  # memtop is exiting, or the process is gone: the next poll says which
                # the kernel refuses (EINVAL) a probe where another tracer holds the same place
                # with another ref_ctr_offset (a memtop from before bcc_compat passed 0: 3
                # windows in 24 here): once more after a moment (its own window may be over),
                # else this window goes without it (before, it attached nothing from there on)
                if self._win_stop.wait(REATTACH_RETRY_S):
                    break
                try:
                    ev = bcc_compat.attach_uprobe_at(self.bpf, fn, path, off, t.pid, ret)
                except OSError:
                    continue
            t.events.append(ev)
            if hot:
                t.hot.add(ev)
        return time.monotonic() if hot_on is None else hot_on

    def _detach_window(self, t: _Target) -> float:
        """``t``'s uprobes off at a window's end, the hot ones first, each under the lock on its
        own (a detach takes the kernel ~0.1 s: a poll waits for one, not for all). One at a time:
        detached all at once (in threads), the waits overlapped but the target spent 0.36-0.58 CPU
        s per window at 1M calls/s against 0.07-0.09 s one by one, on few calls (bench/
        leaks_windows.py's measurements, docs/panes/leaks.md). Returns when the hot ones were off
        (monotonic s)."""
        if self._multi:
            return self._close_links(t)
        hot_off = time.monotonic()
        with self._win_lock:
            # the hot entry probes (free) first, the hot return probes (malloc) last of the hot:
            # with free off first, the blocks in flight when the window ends stay candidates
            # (malloc's return still records new ones a moment); freed by a free probe left on,
            # the churn would leave none to tell its rate of resolving by
            events, t.events = sorted(t.events, key=lambda e: (e not in t.hot, e.startswith("r_"))), []
        for ev in events:
            with self._win_lock:
                if self.bpf is None:
                    break
                bcc_compat.detach_uprobe_event(self.bpf, ev)
            if ev in t.hot:
                hot_off = time.monotonic()
        t.hot = set()
        return hot_off

    def _end_window(self) -> None:
        """The address table's live blocks are the candidates: followed across windows."""
        addr_map, info_map = self._alloc_table()
        isz = ALLOC_INFO.layout.size or 0
        blocks: dict[tuple[int, int], tuple[tuple[int, int], int, int]] = {}
        slots: dict[tuple[int, int], int] = {}
        with memoryview(info_map) as info, memoryview(addr_map) as addrs:
            for i in live_slots(addr_map):
                pid, sid, size, ts = ALLOC_INFO.unpack_from(info, i * isz)
                (addr,) = struct.unpack_from("<Q", addrs, i * 8)
                blocks[(pid, addr)] = ((pid, sid), size, ts)
                slots[(pid, addr)] = i
        # candidates forgotten to stay bounded leave the table too (tombstones, as after an
        # exec): nothing traces now, so the slot still holds that block
        table = self.bpf["alloc_addr"]
        for key in self.candidates.end_window(blocks):
            table[table.Key(slots[key])] = table.Leaf(A_FREED)
        for stack in self.candidates.dropped:  # forgotten: its verdict is sent again if it returns
            self._last_verdicts.pop(stack, None)
        self._ages_stale = True
        self._win_ends[self.candidates.window] = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        self._win_ends.pop(self.candidates.window - 4096, None)  # bounded: growing_since's range

    def _budget_records(self) -> list[Record]:
        """The windows' figures and each stack's verdict (when it changed)."""
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        c = self.candidates
        out: list[Record] = [
            LeakBudget(
                budget=self.budget,
                windows=c.window,
                on_ns=int(self._win_on_s * 1e9),
                period_ns=int(self._win_period_s * 1e9),
                calls_per_s=round(self._window_calls_per_s, 1),
                own_cpu_ns=int(self.meter.own_s * 1e9),
                target_cpu_ns=int(self.meter.target_s * 1e9),
                elapsed_ns=max(0, now - self._win_start_ns),
                p_resolve=-1.0 if c.p_resolve is None else round(c.p_resolve, 4),
                candidates=len(c.live),
                aged_out=c.aged_out,
                stacks_dropped=c.stacks_dropped,
                cost_scale=round(self.meter.scale(), 4),
                measured_windows=self.meter.measured,
            )
        ]
        for key, v in c.stacks.items():
            cur = (v.born, v.resolved, v.unresolved, v.unresolved_bytes, round(v.confidence, 6))
            if self._last_verdicts.get(key) == cur:
                continue
            self._last_verdicts[key] = cur
            out.append(
                LeakVerdict(
                    pid=key[0],
                    stack_id=key[1],
                    born=v.born,
                    resolved=v.resolved,
                    unresolved=v.unresolved,
                    unresolved_bytes=v.unresolved_bytes,
                    confidence=round(v.confidence, 6),
                    growing_since_ns=self._win_ends.get(v.growing_since, 0) if v.growing_since > 0 else 0,
                )
            )
        return out
