"""The kernel's own memory accounting files, read and parsed (no BPF): /proc/meminfo, /proc/slabinfo,
/proc/buddyinfo, /proc/vmallocinfo, /proc/allocinfo and the vm.mem_profiling sysctl.

Every read goes through :func:`memtop.linux.cgroupfs.read_text` (no symlink followed, regular files
only, bounded): memtop runs as root and a proc root given on the command line, or a fixture tree,
is not trusted. Parsers take text and skip what they cannot read (a line of another kernel's
format) instead of failing the whole file; text that names things (cache names, symbols, source
files) is made printable with :func:`memtop.core.text.clean`.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass

from memtop.core.text import clean
from memtop.linux.cgroupfs import read_text

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
