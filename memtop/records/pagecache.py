"""Page cache records: the files processes hold open or map and the files under ``--cache-path``,
each with what ``cachestat(2)`` (or mincore) says of its pages (the pagecacheinfo probe, no BPF),
and the pages the kernel adds to and deletes from the page cache, per file and per process
(the pagecache probe, filemap tracepoints). Counters are cumulative; rates are derived in
``memtop.state.pagecache``."""

from __future__ import annotations

from dataclasses import dataclass

from memtop.records import Record, record


@record("cached_file")
@dataclass(frozen=True, slots=True)
class CachedFile(Record):
    """One file, named by its device and inode (``dev`` as the kernel's st_dev), sent when it is
    first seen and when a figure changed. ``path``: a name it has (what /proc/PID/fd, maps or the
    walk of a ``--cache-path`` directory gave; " (deleted)" when unlinked). Bytes from
    ``cachestat(2)``; with ``method`` "mincore" only ``cached_bytes`` is measured and the others
    are None. ``evicted_bytes``: evicted since the file's pages were last all dropped (the
    kernel's shadow entries); ``recently_evicted_bytes``: of those, evicted recently enough that
    reading them back is a refault. ``holders``: (pid, comm) of the processes holding it open or
    mapped (bounded), () for a file only seen under ``--cache-path``. ``cgroup``: the memory
    cgroup (path below the memory hierarchy) holding most of a sample of its resident pages, as
    /proc/kpagecgroup tells it ("" when not: ``cgroup_why`` says why); ``cgroup_pages`` of the
    ``cgroup_sampled_pages`` sampled are charged to it (fewer: the file's pages are split)."""

    dev: int
    ino: int
    path: str
    size_bytes: int
    cached_bytes: int
    dirty_bytes: int | None = None
    writeback_bytes: int | None = None
    evicted_bytes: int | None = None
    recently_evicted_bytes: int | None = None
    method: str = "cachestat"
    holders: tuple[tuple[int, str], ...] = ()
    under_path: bool = False
    cgroup: str = ""
    cgroup_pages: int = 0
    cgroup_sampled_pages: int = 0
    cgroup_why: str = ""


@record("cached_files")
@dataclass(frozen=True, slots=True)
class CachedFiles(Record):
    """Sent every poll after the files: what the list can see. Only the files listed are sent
    (the top 500 by cached, dirty and recently evicted bytes: 100,000 records a scan would cost
    more than the scan); ``gone``: (dev, ino) of files listed before that are gone or no longer
    among the top (the list is sent as changes, not whole). ``cached_bytes``/``dirty_bytes``:
    of every file known, listed or not. ``method``:
    "cachestat", or "mincore" where the kernel has no cachestat (ENOSYS; then dirty, writeback
    and evictions are not measured). ``files_known``: every file the scans found, listed or
    not (a file with nothing cached is not sent). ``why``: which bound cut the list."""

    gone: tuple[tuple[int, int], ...] = ()
    method: str = "cachestat"
    paths: tuple[str, ...] = ()
    processes: int = 0
    fds_seen: int = 0
    files_known: int = 0
    files_under_paths: int = 0
    truncated: bool = False
    why: str = ""
    cached_bytes: int = 0
    dirty_bytes: int | None = None
    #: cached bytes of the files listed (the ones the records above are sent for), summed by the
    #: probe: what the exporter exports when it asks for no per-file records (None: a
    #: recording made before it was sent; the listed files' records are summed instead)
    listed_cached_bytes: int | None = None


@record("pagecache_activity")
@dataclass(frozen=True, slots=True)
class PagecacheActivity(Record):
    """Pages added to and deleted from the page cache (the filemap tracepoints), cumulative:
    ``added``/``deleted``: every page machine-wide; ``files``: (dev, ino, added, deleted) of the
    files whose counts changed since the last poll; ``pids``: (pid, comm, added, deleted) of the
    processes whose did (the task current at the tracepoint: for deletions often kswapd, or
    whoever's allocation reclaimed). Only changes are sent (16,384 files a tick would fill a
    recording); each map is an LRU of ``files_tracked``/``pids_tracked`` entries now, whose least
    recently counted go first, their counts with them. ``page_bytes``: the page size."""

    added: int
    deleted: int
    files: tuple[tuple[int, int, int, int], ...] = ()
    pids: tuple[tuple[int, str, int, int], ...] = ()
    files_tracked: int = 0
    pids_tracked: int = 0
    page_bytes: int = 4096
