"""Shared-memory records: System V segments, tmpfs and memfd objects, huge page pools and
per-process huge page use (the sharedinfo probe, from /proc and /sys), and the calls and counters
the shared probe's BPF program sees (shm syscalls, madvise for huge pages, memfd_create,
migrations, khugepaged). Counters are cumulative; rates are derived in ``memtop.state.shared``."""

from __future__ import annotations

from dataclasses import dataclass

from memtop.records import Record, record


@record("shm_segment")
@dataclass(frozen=True, slots=True)
class ShmSegment(Record):
    """One System V segment as /proc/sysvipc/shm lists it, sent when it appears or changes.
    ``key`` as the kernel prints it (signed); times in seconds since the epoch (0: never);
    ``creator_comm``/``last_comm``: the commands of cpid and lpid when they still run ("" when
    gone). ``mapped_by``: the pids whose maps show it (read every few ticks)."""

    shmid: int
    key: int
    perms: int
    size_bytes: int
    cpid: int
    lpid: int
    nattch: int
    uid: int
    gid: int
    cuid: int
    cgid: int
    atime_s: int
    dtime_s: int
    ctime_s: int
    rss_bytes: int
    swap_bytes: int
    creator_comm: str = ""
    last_comm: str = ""
    mapped_by: tuple[int, ...] = ()


@record("shm_table")
@dataclass(frozen=True, slots=True)
class ShmTable(Record):
    """Sent on every poll after the segments: the shmids that exist now (others are gone).
    ``readable`` False: /proc/sysvipc/shm could not be read (``why``)."""

    shmids: tuple[int, ...]
    readable: bool = True
    why: str = ""


@record("huge_pools")
@dataclass(frozen=True, slots=True)
class HugePools(Record):
    """hugetlb pools per page size (/sys/kernel/mm/hugepages): (page size bytes, total, free,
    reserved, surplus) in pages; /proc/meminfo's huge and shared figures (bytes); THP's modes
    (the bracketed word of /sys/kernel/mm/transparent_hugepage/{enabled,defrag}, "" if absent)."""

    pools: tuple[tuple[int, int, int, int, int], ...]
    hugetlb_bytes: int = 0
    anon_huge_bytes: int = 0
    shmem_bytes: int = 0
    shmem_huge_bytes: int = 0
    shmem_pmd_mapped_bytes: int = 0
    file_huge_bytes: int = 0
    thp_enabled: str = ""
    thp_defrag: str = ""
    thp_shmem_enabled: str = ""


@record("shared_proc")
@dataclass(frozen=True, slots=True)
class SharedProc(Record):
    """A process holding shared or huge memory, from its status, smaps_rollup, fds and maps
    (every scan). ``anon_huge_bytes`` None: smaps_rollup not read for it this scan (it is read
    for the processes with the most anonymous memory, bounded). ``memfds``: (inode, name, size
    bytes, allocated bytes, mapped by it 0/1) per memfd it holds open. ``sysv``: the shmids it
    maps."""

    pid: int
    comm: str
    uid: int
    rss_shmem_bytes: int
    hugetlb_bytes: int
    anon_huge_bytes: int | None = None
    memfds: tuple[tuple[int, str, int, int, int], ...] = ()
    sysv: tuple[int, ...] = ()


@record("tmpfs_mount")
@dataclass(frozen=True, slots=True)
class TmpfsMount(Record):
    """A tmpfs mount (statvfs) with its largest files by allocated bytes: (path below the
    mount, owner uid, size bytes, allocated bytes). ``files_seen``: entries walked (bounded:
    ``truncated``)."""

    mount: str
    size_bytes: int
    used_bytes: int
    files: tuple[tuple[str, int, int, int], ...] = ()
    files_seen: int = 0
    truncated: bool = False


@record("shared_scan")
@dataclass(frozen=True, slots=True)
class SharedScan(Record):
    """Ends a scan of the processes and tmpfs mounts: the pids and mounts sent in it are the
    whole picture (the others hold nothing now). ``processes``: how many were read;
    ``smaps_read``: smaps_rollup files read (bounded)."""

    pids: tuple[int, ...]
    mounts: tuple[str, ...]
    processes: int = 0
    smaps_read: int = 0


@record("shared_call")
@dataclass(frozen=True, slots=True)
class SharedCall(Record):
    """One traced call (the shared probe): ``call`` is shmget, shmat, shmdt, shmctl, madvise or
    memfd_create. shmget: ``key``, ``size_bytes``, ``flags`` (shmflg), ``result`` the shmid;
    shmat: ``shmid``, ``flags``, ``result`` the address; shmdt: ``addr``; shmctl: ``shmid``,
    ``cmd``; madvise: ``addr`` (start), ``size_bytes`` (length), ``advice``; memfd_create:
    ``name``, ``flags``, ``result`` the fd. ``error``: the errno's name when it failed."""

    ts_ns: int
    pid: int
    tid: int
    comm: str
    call: str
    result: int
    error: str = ""
    key: int | None = None
    shmid: int | None = None
    size_bytes: int | None = None
    addr: int | None = None
    flags: int | None = None
    cmd: str = ""
    advice: str = ""
    name: str = ""


@record("migrate_totals")
@dataclass(frozen=True, slots=True)
class MigrateTotals(Record):
    """Cumulative per migrate reason (migrate:mm_migrate_pages): (reason, calls, succeeded,
    failed, thp succeeded, thp failed, thp split); pages except the thp counts (folios)."""

    reasons: tuple[tuple[str, int, int, int, int, int, int], ...]


@record("khugepaged_totals")
@dataclass(frozen=True, slots=True)
class KhugepagedTotals(Record):
    """Cumulative: PMDs khugepaged scanned (None: no tracepoint), collapse attempts by status
    (huge_memory:mm_collapse_huge_page: "succeeded" or why it failed)."""

    scans: int | None
    collapses: tuple[tuple[str, int], ...] = ()
