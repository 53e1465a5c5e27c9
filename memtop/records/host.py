"""Host records: the machine's own memory accounting, host-wide (fed by the procfs probe)."""

from __future__ import annotations

from dataclasses import dataclass

from memtop.records import Record, record


@record("meminfo")
@dataclass(frozen=True, slots=True)
class MemInfo(Record):
    """System-wide memory from /proc/meminfo."""

    total_bytes: int
    free_bytes: int
    available_bytes: int
    buffers_bytes: int
    cached_bytes: int
    swap_total_bytes: int
    swap_free_bytes: int
    shmem_bytes: int = 0
    slab_bytes: int = 0
    #: zswap's pool (compressed) and what it holds (uncompressed): swapped-out pages that are
    #: in RAM, not on a disk, though they take swap space (meminfo Zswap, Zswapped)
    zswap_bytes: int = 0
    zswapped_bytes: int = 0
    #: meminfo's ``Cached`` alone (``cached_bytes`` adds SReclaimable, as free's buff/cache
    #: does): the page cache the Page cache pane sets its list beside; None in recordings made
    #: before it was recorded
    page_cache_bytes: int | None = None

    @property
    def used_bytes(self) -> int:
        return self.total_bytes - self.free_bytes - self.buffers_bytes - self.cached_bytes


@record("pressure")
@dataclass(frozen=True, slots=True)
class Pressure(Record):
    """PSI for memory (/proc/pressure/memory); totals are cumulative microseconds stalled."""

    some_avg10: float
    full_avg10: float
    some_avg60: float = 0.0
    full_avg60: float = 0.0
    some_total_us: int = 0
    full_total_us: int = 0


@record("vmstat")
@dataclass(frozen=True, slots=True)
class VmStat(Record):
    """Selected cumulative counters from /proc/vmstat, as (name, value) pairs."""

    counters: tuple[tuple[str, int], ...]

    def as_dict(self) -> dict[str, int]:
        return dict(self.counters)


@record("host_facts")
@dataclass(frozen=True, slots=True)
class HostFacts(Record):
    """The machine the data comes from, so a replay shows the recorded host, not the viewer's.

    Emitted by the live source at start and again whenever a fact changes (the header tree is
    found at the first BPF compilation; BPF turns out unavailable). Text is as the system gave it,
    made printable (a recording's strings are cleaned again when it is read)."""

    kernel_release: str  # uname -r
    hostname: str
    #: wall-clock time of boot (ns since the epoch, from /proc/stat btime); 0 when unknown
    boot_time_ns: int = 0
    #: the kernel headers BPF programs compile against: "exact" | "standin" | "none" (BPF could
    #: not find any) | "" (not known: BPF not tried yet, or a recording older than these facts)
    headers_kind: str = ""
    #: the headers' kernel version (for a stand-in, the Debian package's, not the running kernel)
    headers_version: str = ""
    #: why BPF cannot load at all, and what to do; "" while BPF is usable or not yet tried
    bpf_error: str = ""
    bpf_hint: str = ""
    #: CLOCK_REALTIME - CLOCK_MONOTONIC when collected, ns: a sample's ts_ns plus this is its
    #: wall-clock time (a replay's is the recorded machine's); 0 when unknown
    wall_minus_monotonic_ns: int = 0
