"""Swap-in waiters (swapin probe), swap devices and zswap (swapinfo probe), OOM kills (oom probe)."""

from __future__ import annotations

from dataclasses import dataclass

from memtop.records import Record, record


@record("swapin_proc")
@dataclass(frozen=True, slots=True)
class SwapinProc(Record):
    """One process's cumulative major faults since the probe attached, split into swap-ins
    (anonymous / shmem pages read back from swap) and file reads, with the time its threads spent
    blocked inside those faults."""

    pid: int
    comm: str
    swapins: int
    swapin_wait_ns: int
    swapin_wait_max_ns: int
    file_major_faults: int
    file_wait_ns: int = 0
    file_wait_max_ns: int = 0
    swapins_nowait: int = 0  # swap-ins that never blocked (zswap, zram, swap cache)
    #: this process's log2 wait histograms, sparse: (bucket, count) pairs
    swapin_hist: tuple[tuple[int, int], ...] = ()
    file_hist: tuple[tuple[int, int], ...] = ()


@record("swapin_hist")
@dataclass(frozen=True, slots=True)
class SwapinHistogram(Record):
    """Cumulative log2 histograms of wait per fault: ``swapin_counts[i]`` counts swap-ins that
    waited [2**i, 2**(i+1)) ns (index 0 also holds no wait)."""

    swapin_counts: tuple[int, ...]
    file_counts: tuple[int, ...] = ()
    fault_sleeps: int = 0  # blocked-in-fault sleeps timed
    stack_walks: int = 0  # D-state switches examined


@record("swap_info")
@dataclass(frozen=True, slots=True)
class SwapInfo(Record):
    """What `swapon -s` shows (/proc/swaps) and compressed swap: zswap's state (/proc/meminfo,
    module parameters, debugfs counters) and zram devices (/sys/block/zram*).
    ``devices``: (name, type, size_bytes, used_bytes, priority)."""

    devices: tuple[tuple[str, str, int, int, int], ...]
    zswap_enabled: bool = False
    zswap_pool_bytes: int = 0  # compressed size in the pool (meminfo Zswap)
    zswapped_bytes: int = 0  # uncompressed size of what it holds (meminfo Zswapped)
    #: /sys/module/zswap/parameters as (name, text): compressor, max_pool_percent…; () without
    #: zswap
    zswap_params: tuple[tuple[str, str], ...] = ()
    #: /sys/kernel/debug/zswap counters as (name, value): stored_pages, pool_total_size (bytes),
    #: written_back_pages, reject_*…; () when debugfs is not mounted (or a recording predates it)
    zswap_debug: tuple[tuple[str, int], ...] = ()
    #: where those were read ("" when not: debugfs is not mounted)
    debugfs: str = ""
    #: zram devices: (name, algorithm, disksize_bytes, ((column, value), ...)) with mm_stat,
    #: io_stat and bd_stat columns by their names in the kernel's zram documentation
    zram: tuple[tuple[str, str, int, tuple[tuple[str, int], ...]], ...] = ()
