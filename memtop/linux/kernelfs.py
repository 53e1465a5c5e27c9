"""The kernel's own memory accounting files, read and parsed (no BPF): /proc/meminfo, /proc/slabinfo,
/proc/buddyinfo, /proc/vmallocinfo, /proc/allocinfo and the vm.mem_profiling sysctl.

Every read goes through :func:`memtop.linux.cgroupfs.read_text` (no symlink followed, regular files
only, bounded): memtop runs as root and a proc root given on the command line, or a fixture tree,
is not trusted. Parsers take text and skip what they cannot read (a line of another kernel's
format) instead of failing the whole file; text that names things (cache names, symbols, source
files) is made printable with :func:`memtop.core.text.clean`.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import select
from collections.abc import Callable
from dataclasses import dataclass

from memtop.core.text import clean
from memtop.linux.cgroupfs import MAX_FILE, HeldFiles, read_text

#: /proc/slabinfo and /proc/vmallocinfo may be long on a big machine: read at most this much
MAX_PROC_FILE = 8 << 20
#: /proc/allocinfo has one line per allocation call site (tens of thousands)
MAX_ALLOCINFO = 16 << 20
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


# -- /proc/meminfo ---------------------------------------------------------------------------------
def parse_meminfo(text: str) -> dict[str, int]:
    """``name -> bytes`` (kB figures times 1024; the HugePages_ counts stay counts)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if not parts or not parts[0].isdigit():
            continue
        value = int(parts[0])
        out[name.strip()] = value * 1024 if len(parts) > 1 and parts[1] == "kB" else value
    return out


def lines_with(text: str, word: str) -> str:
    """The lines of ``text`` (split at ``\\n``) that hold ``word``, in order, found by
    ``str.find``: a parser given them alone gives the figures of every name that holds ``word``
    as it does given the whole text (a line it splits further, where ``str.splitlines`` splits
    and ``\\n`` does not, is split the same), without splitting the other lines."""
    lines = []
    at = text.find(word)
    while at >= 0:
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        lines.append(text[text.rfind("\n", 0, at) + 1 : end])
        at = text.find(word, end)
    return "\n".join(lines)


def parse_meminfo_of(text: str, word: str) -> dict[str, int]:
    """:func:`parse_meminfo` of only the lines that hold ``word`` (:func:`lines_with`): the
    figures of every name that holds it, the other ~55 lines not parsed."""
    return parse_meminfo(lines_with(text, word))


def parse_vmstat(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


#: The breakdown's lines, in the order they stack: (key, label). Each is derived from
#: /proc/meminfo (and vmstat's nr_zspages) in :func:`breakdown`; "unexplained" is MemTotal minus
#: the sum of the others.
BREAKDOWN = (
    ("anon", "processes' anon"),
    ("file_mapped", "file mapped"),
    ("page_cache", "page cache not mapped"),
    ("shmem", "shmem/tmpfs"),
    ("swap_cache", "swap cache"),
    ("slab_reclaimable", "slab reclaimable"),
    ("slab_unreclaimable", "slab unreclaimable"),
    ("kernel_reclaimable", "other reclaimable"),
    ("page_tables", "page tables"),
    ("kernel_stack", "kernel stacks"),
    ("vmalloc", "vmalloc"),
    ("percpu", "percpu"),
    ("hugetlb", "hugetlb"),
    ("zsmalloc", "zswap/zram pool"),
    ("balloon", "balloon"),
    ("free", "free"),
    ("unexplained", "unexplained"),
)


def breakdown(meminfo: dict[str, int], zspages_bytes: int | None, vmap_stack: bool | None) -> dict[str, int]:
    """Where MemTotal went, in bytes per :data:`BREAKDOWN` key, adding up to MemTotal exactly
    (``unexplained`` takes the rest and may be negative when the kernel's counters overlap more
    than accounted for here).

    - page cache is Buffers + Cached - Shmem (Cached counts shmem); of it, "file mapped" is
      Mapped less shmem's mapped share, which meminfo does not split out: Mapped - ShmemPmdMapped,
      capped by the cache (a slight over-count where tmpfs pages are mapped small);
    - vmalloc is VmallocUsed less KernelStack when stacks are vmalloc'd (CONFIG_VMAP_STACK),
      which counts them in both;
    - zswap/zram is nr_zspages (zsmalloc's pages, both zswap's pool and zram's), which no
      meminfo line counts.
    """
    m = meminfo.get
    total = m("MemTotal", 0)
    shmem = m("Shmem", 0)
    cache = max(0, m("Buffers", 0) + m("Cached", 0) - shmem)
    mapped = min(cache, max(0, m("Mapped", 0) - m("ShmemPmdMapped", 0)))
    stacks = m("KernelStack", 0)
    vmalloc = m("VmallocUsed", 0)
    if vmap_stack:
        vmalloc = max(0, vmalloc - stacks)
    hugetlb = m("Hugetlb")
    if hugetlb is None:
        hugetlb = m("HugePages_Total", 0) * m("Hugepagesize", 0)
    out = {
        "anon": m("AnonPages", 0),
        "file_mapped": mapped,
        "page_cache": cache - mapped,
        "shmem": shmem,
        "swap_cache": m("SwapCached", 0),
        "slab_reclaimable": m("SReclaimable", 0),
        "slab_unreclaimable": m("SUnreclaim", 0),
        "kernel_reclaimable": max(0, m("KReclaimable", 0) - m("SReclaimable", 0)),
        "page_tables": m("PageTables", 0) + m("SecPageTables", 0),
        "kernel_stack": stacks,
        "vmalloc": vmalloc,
        "percpu": m("Percpu", 0),
        "hugetlb": hugetlb,
        "zsmalloc": zspages_bytes or 0,
        "balloon": m("Balloon", 0),
        "free": m("MemFree", 0),
    }
    out["unexplained"] = total - sum(out.values())
    return out


def vmap_stack(proc: str = "/proc") -> bool | None:
    """Whether kernel stacks are vmalloc'd (CONFIG_VMAP_STACK), from /proc/config.gz; None when
    the kernel does not say."""
    raw = None
    try:
        fd = os.open(
            os.path.join(proc, "config.gz"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        )
    except OSError:
        return None
    try:
        import stat as stat_mod

        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(os.dup(fd), "rb") as f, gzip.GzipFile(fileobj=f) as z:
            raw = z.read(4 << 20)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    finally:
        os.close(fd)
    for line in raw.decode("utf-8", "replace").splitlines():
        if line == "CONFIG_VMAP_STACK=y":
            return True
    return False


# -- /proc/slabinfo ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Slab:
    """One cache's line of /proc/slabinfo (version 2.1)."""

    name: str
    active_objs: int
    num_objs: int
    objsize: int
    objperslab: int
    pagesperslab: int
    num_slabs: int

    @property
    def total_bytes(self) -> int:
        """Memory the cache holds: its slabs' pages (what slabtop calls CACHE SIZE)."""
        return self.num_slabs * self.pagesperslab * PAGE

    def as_tuple(self) -> tuple[str, int, int, int, int, int, int]:
        return (
            self.name,
            self.active_objs,
            self.num_objs,
            self.objsize,
            self.objperslab,
            self.pagesperslab,
            self.num_slabs,
        )


def parse_slabinfo(text: str) -> dict[str, Slab]:
    """Caches by name. Lines: ``name active num objsize objperslab pagesperslab : tunables ... :
    slabdata active_slabs num_slabs sharedavail``."""
    out: dict[str, Slab] = {}
    for line in text.splitlines():
        if not line or line.startswith(("#", "slabinfo")):
            continue
        head, _, rest = line.partition(":")
        parts = head.split()
        if len(parts) < 6:
            continue
        try:
            nums = [int(x) for x in parts[-5:]]
        except ValueError:
            continue
        name = clean(" ".join(parts[:-5]), 128)
        slabdata = rest.rpartition("slabdata")[2].split()
        try:
            num_slabs = int(slabdata[1])
        except (IndexError, ValueError):
            num_slabs = -(-nums[1] // nums[3]) if nums[3] else 0
        out[name] = Slab(name, nums[0], nums[1], nums[2], nums[3], nums[4], num_slabs)
    return out


SlabTuple = tuple[str, int, int, int, int, int, int]


def slab_tuples(text: str, memo: dict[str, SlabTuple]) -> tuple[dict[str, SlabTuple], dict[str, SlabTuple]]:
    """:func:`parse_slabinfo`'s caches as tuples (``Slab.as_tuple``), a line parsed only when it is
    not in ``memo`` (the lines of the read before: most caches' lines are the same from one read
    to the next); (the caches by name, the memo for the next read)."""
    out: dict[str, SlabTuple] = {}
    lines: dict[str, SlabTuple] = {}
    for line in text.splitlines():
        t = memo.get(line)
        if t is None:
            one = parse_slabinfo(line)
            if not one:
                continue
            t = next(iter(one.values())).as_tuple()
        lines[line] = t
        out[t[0]] = t
    return out, lines


# -- /proc/buddyinfo ---------------------------------------------------------------------------------
def parse_buddyinfo(text: str) -> list[tuple[int, str, tuple[int, ...]]]:
    """(node, zone, free blocks per order) per zone."""
    out = []
    for line in text.splitlines():
        parts = line.replace(",", " ").split()
        if len(parts) < 5 or parts[0] != "Node" or parts[2] != "zone":
            continue
        try:
            out.append((int(parts[1]), clean(parts[3], 32), tuple(int(x) for x in parts[4:])))
        except ValueError:
            continue
    return out


def fragmentation(free: tuple[int, ...], order: int) -> float | None:
    """Share of a zone's free memory in blocks smaller than ``2**order`` pages (0: all of it is in
    blocks that can serve an order-``order`` request; 1: none is): the unusable free space index
    of Documentation/admin-guide/sysctl/vm.rst's extfrag, computed from buddyinfo."""
    total = sum(n << o for o, n in enumerate(free))
    if not total:
        return None
    usable = sum(n << o for o, n in enumerate(free) if o >= order)
    return (total - usable) / total


# -- /proc/vmallocinfo -------------------------------------------------------------------------------
def parse_vmallocinfo(text: str) -> dict[tuple[str, str], tuple[int, int]]:
    """(caller function, kind) -> (areas, bytes). A line is ``start-end size caller+off/len
    [pages=N] [phys=...] kind...``; the caller's offset is dropped (one row per function), the kind
    is vmalloc, vmap, ioremap, user, vpages or "" when the kernel gave none; bytes count the guard
    page the kernel adds (as the file's size does)."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    kinds = ("vmalloc", "vmap", "ioremap", "user", "vpages", "dma-coherent")
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2 or "-" not in parts[0]:
            continue
        try:
            size = int(parts[1])
        except ValueError:
            continue
        caller = ""
        if len(parts) > 2 and parts[2] == "unpurged":
            caller = "(unpurged: freed, not yet flushed)"  # lazily freed areas, still mapped
        elif len(parts) > 2 and "=" not in parts[2] and parts[2] not in kinds:
            caller = parts[2].split("+", 1)[0]
        kind = next((p for p in parts[2:] if p in kinds and p != "vpages"), "")
        key = (clean(caller, 128) or "(unknown)", kind)
        n, b = out.get(key, (0, 0))
        out[key] = (n + 1, b + size)
    return out


# -- /proc/allocinfo (CONFIG_MEM_ALLOC_PROFILING, Linux 6.10+) ---------------------------------------
@dataclass(frozen=True, slots=True)
class AllocSite:
    """One allocation call site of /proc/allocinfo: bytes it holds now and allocations it has
    live (calls), where it is (file:line, module "" for the kernel itself, function) and whether
    the kernel counts it accurately (format 2.0 says "accurate:no" for a tag whose counters were
    lost, e.g. allocations made before profiling was switched on)."""

    bytes: int
    calls: int
    file: str
    line: int
    module: str
    function: str
    accurate: bool = True

    @property
    def key(self) -> str:
        return f"{self.file}:{self.line}" + (f" [{self.module}]" if self.module else "") + f" {self.function}"


def parse_allocinfo(text: str) -> tuple[str, list[AllocSite]]:
    """(format version, e.g. "1.0" or "2.0"; "" when the header is missing, the sites). Lines::

    allocinfo - version: 1.0
    #     <size>  <calls> <tag info>
           12288        3 mm/memory.c:6234 func:__pte_alloc
           4096         1 drivers/foo.c:12 [foo] func:foo_init accurate:no
    """
    version = ""
    sites = []
    for line in text.splitlines():
        if line.startswith("allocinfo"):
            version = line.rpartition(":")[2].strip()
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if len(parts) < 3:
            continue
        try:
            size, calls = int(parts[0]), int(parts[1])
        except ValueError:
            continue
        where, _, ln = parts[2].rpartition(":")
        if not where or not ln.isdigit():
            continue
        module, function, accurate = "", "", True
        for p in parts[3:]:
            if p.startswith("[") and p.endswith("]"):
                module = p[1:-1]
            elif p.startswith("func:"):
                function = p[5:]
            elif p == "accurate:no":
                accurate = False
        sites.append(
            AllocSite(
                size, calls, clean(where, 256), int(ln), clean(module, 64), clean(function, 128), accurate
            )
        )
    return version, sites


#: what /proc/allocinfo and vm.mem_profiling say about allocation profiling
PROFILING_STATES = ("not built", "never", "off", "on")
PROFILING_HINT = (
    "allocation profiling needs a kernel built with CONFIG_MEM_ALLOC_PROFILING=y (Linux 6.10+); "
    "switch it on with `sysctl vm.mem_profiling=1`, or at boot with sysctl.vm.mem_profiling=1 "
    "(CONFIG_MEM_ALLOC_PROFILING_ENABLED_BY_DEFAULT=y makes that the default)"
)


def profiling_state(proc: str = "/proc") -> tuple[str, str]:
    """(state, what to do): "not built" (no /proc/allocinfo, no vm.mem_profiling sysctl),
    "never" (booted with mem_profiling=never: it cannot be switched on without a reboot),
    "off" (vm.mem_profiling is 0), "on" (1). A kernel with the file but no sysctl is "on"."""
    has_file = read_text(os.path.join(proc, "allocinfo"), 64) is not None
    sysctl = read_text(os.path.join(proc, "sys", "vm", "mem_profiling"), 64)
    if sysctl is None:
        if has_file:
            return "on", ""
        return "not built", PROFILING_HINT
    value = sysctl.strip().strip("[]").lower()
    if "never" in value:
        return "never", (
            "this kernel was booted with mem_profiling=never: reboot without it (or with "
            "sysctl.vm.mem_profiling=1) to profile allocations"
        )
    if value.startswith("0"):
        return "off", "switch it on with `sysctl vm.mem_profiling=1` (counts allocations made from then on)"
    return "on", ""


# -- compressed swap: zswap and zram ----------------------------------------------------------------
#: zswap's module parameters memtop shows (/sys/module/zswap/parameters); a kernel may lack some
#: (``zpool`` went in 6.15, when zsmalloc became the only pool)
ZSWAP_PARAMS = (
    "enabled",
    "compressor",
    "zpool",
    "max_pool_percent",
    "accept_threshold_percent",
    "shrinker_enabled",
)
#: /sys/block/zramN/mm_stat columns (Documentation/admin-guide/blockdev/zram.rst): the first five
#: in bytes, the rest in pages; older kernels print fewer columns
ZRAM_MM_STAT = (
    "orig_data_size",
    "compr_data_size",
    "mem_used_total",
    "mem_limit",
    "mem_used_max",
    "same_pages",
    "pages_compacted",
    "huge_pages",
    "huge_pages_since",
)
#: /sys/block/zramN/io_stat columns
ZRAM_IO_STAT = ("failed_reads", "failed_writes", "invalid_io", "notify_free")
#: /sys/block/zramN/bd_stat columns (writeback to a backing device), in 4 KiB units
ZRAM_BD_STAT = ("bd_count", "bd_reads", "bd_writes")
#: the most files memtop reads from debugfs's zswap directory (it holds about a dozen counters)
MAX_ZSWAP_DEBUG = 64


def parse_columns(text: str | None, names: tuple[str, ...]) -> dict[str, int]:
    """Whitespace-separated integers named by position; a column a kernel does not print (or
    prints as something else) is left out, never guessed."""
    out: dict[str, int] = {}
    for name, word in zip(names, (text or "").split(), strict=False):
        try:
            out[name] = int(word)
        except ValueError:
            continue
    return out


def selected_algorithm(text: str | None) -> str:
    """The algorithm a zram device uses: ``lzo lzo-rle [lz4] zstd`` names it in brackets."""
    words = (text or "").split()
    for w in words:
        if w.startswith("[") and w.endswith("]"):
            return clean(w[1:-1])
    return clean(words[0]) if len(words) == 1 else ""


def _reader(held: HeldFiles | None) -> Callable[[str, int], str | None]:
    """How a small kernel file is read: opened for the read (:func:`read_text`), or held open
    in ``held`` and pread from offset 0, where sysfs and procfs print it anew."""
    if held is None:
        return lambda path, limit: read_text(path, limit)
    return lambda path, limit: held.read(path, limit)


def zswap_param_names(sys: str = "/sys") -> tuple[str, ...]:
    """The parameters of :data:`ZSWAP_PARAMS` this kernel has (a kernel drops some: zpool went
    in 6.15), in that order; none without zswap. Fixed for the kernel's life: zswap is built in
    (mm/Kconfig: ``bool``), and a built-in's parameters are made once at boot
    (kernel/params.c param_sysfs_builtin()), none added or removed after."""
    try:
        present = set(os.listdir(os.path.join(sys, "module", "zswap", "parameters")))
    except OSError:
        return ()
    return tuple(name for name in ZSWAP_PARAMS if name in present)


def read_zswap_params(
    sys: str = "/sys", held: HeldFiles | None = None, names: tuple[str, ...] = ZSWAP_PARAMS
) -> dict[str, str]:
    """zswap's parameters as text (``Y``/``N``, ``lzo``, ``20``); empty without zswap.
    ``names``: those read (:func:`zswap_param_names`: not a missing file's open at each read)."""
    d = os.path.join(sys, "module", "zswap", "parameters")
    out: dict[str, str] = {}
    read = _reader(held)
    for name in names:
        text = read(os.path.join(d, name), 256)
        if text is not None:
            out[name] = clean(text.strip())
    return out


class MountTable:
    """/proc/self/mountinfo held open, read again only when the mount table changed: a poll(2)
    of a mountinfo file says POLLPRI once after each mount or unmount in its namespace since the
    last poll (fs/proc_namespace.c mounts_poll(): the namespace's event count against the one
    the file last saw). A file of the real /proc only; elsewhere (a proc root given on the
    command line, a fixture) it is read every time, as :func:`read_text` reads it."""

    def __init__(self, proc: str = "/proc") -> None:
        self.path = os.path.join(proc, "self", "mountinfo")
        self._watch = proc == "/proc"
        self._fd: int | None = None
        self._text: str | None = None
        #: reads of the file (for tests)
        self.reads = 0
        #: (the text, where debugfs is in it) of the last :meth:`debugfs`
        self._debugfs: tuple[str | None, str | None] | None = None

    def debugfs(self) -> str | None:
        """Where debugfs is mounted (:func:`debugfs_mount` of :meth:`text`), found again only
        when the text is another object: one read of the table is one text, kept while no mount
        or unmount happened (the table's ~30 lines are not split again at every poll)."""
        text = self.text()
        last = self._debugfs
        if last is not None and last[0] is text and text is not None:
            return last[1]
        where = debugfs_mount(text)
        self._debugfs = (text, where)
        return where

    def text(self) -> str | None:
        if not self._watch:
            self.reads += 1
            return read_text(self.path, errors="surrogateescape")
        if self._fd is not None:
            p = select.poll()
            p.register(self._fd, select.POLLPRI)
            if not p.poll(0):
                return self._text
        else:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
        self.reads += 1
        parts: list[bytes] = []
        at = 0
        try:
            while at < MAX_FILE and (chunk := os.pread(self._fd, 65536, at)):
                parts.append(chunk)
                at += len(chunk)
        except OSError:
            self.close()
            return None
        self._text = b"".join(parts).decode("utf-8", "surrogateescape")
        return self._text

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._text = None

    def __del__(self) -> None:
        # a raw fd is not closed with the object: one dropped unclosed (a probe never closed)
        # would keep it for the life of the process
        with contextlib.suppress(Exception):
            self.close()


def debugfs_mount(mountinfo: str | None) -> str | None:
    """Where debugfs is mounted (the first mount of it), from /proc/self/mountinfo text."""
    for line in (mountinfo or "").splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if sep and len(fields) >= 5 and right.split()[:1] == ["debugfs"]:
            return fields[4].replace("\\040", " ")
    return None


def read_zswap_debug(debugfs: str) -> dict[str, int]:
    """zswap's counters in debugfs (``stored_pages``, ``pool_total_size``,
    ``written_back_pages``, ``reject_*``, ``pool_limit_hit``…): every file of the directory that
    holds one integer, so a kernel's new counter shows without a change here."""
    d = os.path.join(debugfs, "zswap")
    try:
        names = sorted(os.listdir(d))[:MAX_ZSWAP_DEBUG]
    except OSError:
        return {}
    out: dict[str, int] = {}
    for name in names:
        # opened for each read: debugfs's simple attributes cannot be pread
        text = read_text(os.path.join(d, name), limit=64)
        if text is not None and text.strip().isdigit():
            out[clean(name)] = int(text.strip())
    return out


@dataclass(frozen=True, slots=True)
class Zram:
    """One zram device's figures: ``stats`` holds mm_stat, io_stat and bd_stat columns by name."""

    name: str
    algorithm: str
    disksize_bytes: int
    stats: dict[str, int]


def read_zram(sys: str = "/sys", limit: int = 64, held: HeldFiles | None = None) -> list[Zram]:
    """Every initialised zram device under ``sys``/block (at most ``limit``)."""
    read = _reader(held)
    block = os.path.join(sys, "block")
    try:
        names = sorted(n for n in os.listdir(block) if n.startswith("zram") and n[4:].isdigit())
    except OSError:
        return []
    out: list[Zram] = []
    for name in names[:limit]:
        d = os.path.join(block, name)
        disksize = read(os.path.join(d, "disksize"), 64)
        if disksize is None or not disksize.strip().isdigit() or int(disksize) == 0:
            continue  # not initialised: no figures to show
        stats = parse_columns(read(os.path.join(d, "mm_stat"), 1024), ZRAM_MM_STAT)
        stats.update(parse_columns(read(os.path.join(d, "io_stat"), 1024), ZRAM_IO_STAT))
        stats.update(parse_columns(read(os.path.join(d, "bd_stat"), 1024), ZRAM_BD_STAT))
        algorithm = selected_algorithm(read(os.path.join(d, "comp_algorithm"), 1024))
        out.append(Zram(name, algorithm, int(disksize), stats))
    return out


# -- MGLRU: /sys/kernel/mm/lru_gen and debugfs lru_gen -------------------------------------------------
#: debugfs lru_gen lists every memcg, node and generation (a few hundred bytes per memcg): past
#: this much it is not used at all, as a cut listing would leave a parent's subtree part-counted
MAX_LRU_GEN = 8 << 20

#: per memcg path: its generations on every node, as (age_ms, anon_pages, file_pages)
LruGenAges = dict[str, list[tuple[int, int, int]]]


def lru_gen_enabled(sys: str = "/sys") -> tuple[str, bool]:
    """(the text of ``lru_gen/enabled``, whether MGLRU is on): "0x0007" is a mask of its
    features, 0 is off; "" when the kernel has no MGLRU."""
    text = clean((read_text(os.path.join(sys, "kernel", "mm", "lru_gen", "enabled"), 64) or "").strip())
    try:
        return text, int(text, 16) != 0
    except ValueError:
        return text, False


def parse_lru_gen(text: str) -> LruGenAges:
    """Debugfs ``lru_gen`` (Documentation/admin-guide/mm/multigen_lru.rst)::

        memcg  memcg_id  memcg_path
           node  node_id
               min_gen_nr  age_in_ms  nr_anon_pages  nr_file_pages
               ...

    Each memcg's generations, those of every node (a node's generations have their own ages). A memcg path is a
    cgroup name, which anyone with a delegated cgroup chooses: one holding a newline could forge
    a "memcg" line naming another cgroup, so a path or an id listed twice is dropped (that cgroup
    falls back to memory.stat). Lines of another format are skipped; ``lru_gen_full``'s ``x``
    marks are ignored."""
    gens: dict[str, list[tuple[int, int, int]]] = {}
    seen_ids: dict[str, str] = {}
    dropped: set[str] = set()
    cur: list[tuple[int, int, int]] | None = None
    for line in text.split("\n"):
        words = line.split(None, 2)
        if not words:
            continue
        if words[0] == "memcg":
            cur = None
            if len(words) < 2:
                continue
            mid, path = words[1], (words[2] if len(words) > 2 else "").rstrip()
            if not path.startswith("/"):
                continue  # memcg disabled (an empty path) or not a path
            if path in gens or mid in seen_ids:
                dropped.update((path, seen_ids.get(mid, path)))
                continue
            seen_ids[mid] = path
            cur = gens[path] = []
        elif words[0] == "node":
            continue
        elif cur is not None:
            nums = line.replace("x", " ").split()
            if len(nums) != 4 or not all(n.isdigit() for n in nums):
                continue
            _seq, age_ms, anon, file = (int(n) for n in nums)
            cur.append((age_ms, anon, file))
    return {p: g for p, g in gens.items() if p not in dropped}


def read_lru_gen(debugfs: str) -> tuple[LruGenAges | None, str]:
    """(the memcgs' generations, "") from ``debugfs``/lru_gen, or (None, why not). Opened
    read-only (the file is writable: writing it ages or evicts generations), not through a
    symlink, a regular file only, at most :data:`MAX_LRU_GEN` bytes."""
    text = read_text(os.path.join(debugfs, "lru_gen"), MAX_LRU_GEN + 1, errors="surrogateescape")
    if text is None:
        return None, f"{clean(debugfs)}/lru_gen is not readable"
    if len(text.encode("utf-8", "surrogateescape")) > MAX_LRU_GEN:
        return None, f"{clean(debugfs)}/lru_gen is larger than {MAX_LRU_GEN >> 20} MiB"
    return parse_lru_gen(text), ""
