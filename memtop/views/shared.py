"""The Shared pane: System V segments (orphans marked) and the calls on them, tmpfs files and
memfds, the header's Shmem broken down, hugetlb pools and huge page use per process, THP rates,
madvise calls for huge pages, page migrations by reason and khugepaged."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, TypedDict, get_args

from memtop.core import fmt
from memtop.records.shared import SharedCall
from memtop.state import State
from memtop.state.host import HostState
from memtop.state.shared import SharedState
from memtop.views import Column, Head, Options, View, measuring, render_table
from memtop.views.segments import Sentence

#: what the segments' table sorts by
SortKey = Literal["shmid", "key", "size_bytes", "rss_bytes", "swap_bytes", "nattch", "cpid", "lpid", "uid"]
SORT_KEYS: tuple[SortKey, ...] = get_args(SortKey)
#: the segments' table's columns
RowKey = Literal[
    "shmid",
    "key",
    "size_bytes",
    "rss_bytes",
    "swap_bytes",
    "nattch",
    "orphan",
    "uid",
    "perms",
    "creator",
    "last",
    "ctime_age_s",
]
#: the sections the pane shows, one at a time (`s` cycles)
PANE_SECTIONS = ("sysv", "posix", "huge", "migrate")
THP_COUNTERS = (
    ("thp_fault_alloc", "fault alloc"),
    ("thp_fault_fallback", "fault fallback"),
    ("thp_collapse_alloc", "collapse"),
    ("thp_collapse_alloc_failed", "collapse failed"),
    ("thp_split_page", "split"),
    ("thp_deferred_split_page", "deferred split"),
)
NUMA_COUNTERS = (
    ("numa_hint_faults", "hint faults"),
    ("numa_pages_migrated", "pages migrated"),
    ("numa_pte_updates", "pte updates"),
    ("pgmigrate_success", "pgmigrate ok"),
    ("pgmigrate_fail", "pgmigrate fail"),
)


class Mapper(TypedDict):
    pid: int
    comm: str


class SegmentRow(TypedDict):
    """A System V segment (``rows[]``)."""

    shmid: int
    key: int
    perms: int
    size_bytes: int
    rss_bytes: int
    swap_bytes: int
    nattch: int
    orphan: bool
    uid: int
    gid: int
    cuid: int
    cpid: int
    lpid: int
    creator_comm: str
    last_comm: str
    creator: str
    last: str
    atime_s: int
    dtime_s: int
    ctime_s: int
    ctime_age_s: int | None
    mapped_by: list[int]
    mappers: list[Mapper]


class CallDoc(TypedDict):
    """A traced call (``sysv.events[]``)."""

    ts_ns: int
    age_ns: int
    pid: int
    tid: int
    comm: str
    call: str
    result: int
    error: str
    key: int | None
    shmid: int | None
    size_bytes: int | None
    addr: int | None
    flags: int | None
    cmd: str
    advice: str
    name: str
    what: str


class CallerDoc(TypedDict):
    """A process that made shm calls (``sysv.callers[]``)."""

    pid: int
    comm: str
    calls: dict[str, int]
    errors: int
    advice: dict[str, int]
    advised_bytes: int


class SysvDoc(TypedDict):
    readable: bool | None
    why: str
    segments: int
    orphans: int
    orphan_rss_bytes: int
    orphan_swap_bytes: int
    rss_bytes: int
    events: list[CallDoc] | None
    calls_total: int | None
    callers: list[CallerDoc]


class MountDoc(TypedDict):
    mount: str
    size_bytes: int
    used_bytes: int
    files_seen: int
    truncated: bool


class FileDoc(TypedDict):
    mount: str
    path: str
    uid: int
    size_bytes: int
    alloc_bytes: int


class MemfdDoc(TypedDict):
    pid: int
    comm: str
    uid: int
    inode: int
    name: str
    size_bytes: int
    alloc_bytes: int
    mapped: bool


class ShmemProcDoc(TypedDict):
    pid: int
    comm: str
    uid: int
    rss_shmem_bytes: int


class PosixDoc(TypedDict):
    """tmpfs and memfd (``posix``)."""

    scanned: bool
    mounts: list[MountDoc]
    files: list[FileDoc]
    memfds: list[MemfdDoc]
    processes: list[ShmemProcDoc]


class ShmemDoc(TypedDict):
    """/proc/meminfo's Shmem broken down (``shmem``)."""

    shmem_bytes: int
    sysv_bytes: int
    tmpfs_bytes: int
    memfd_bytes: int
    other_bytes: int


class PoolDoc(TypedDict):
    page_size_bytes: int
    total: int
    free: int
    reserved: int
    surplus: int
    used: int
    used_bytes: int
    total_bytes: int


class HugeProcDoc(TypedDict):
    pid: int
    comm: str
    hugetlb_bytes: int
    anon_huge_bytes: int | None


class KhugepagedDoc(TypedDict):
    pmds_scanned: int | None
    pmds_scanned_per_s: float | None
    collapses: dict[str, int]


class RangeDoc(TypedDict):
    # a call the probe saw has both; a recording's record may lack them
    start: int | None
    length_bytes: int | None
    advice: str
    result: int
    error: str


class MadviseDoc(TypedDict):
    pid: int
    comm: str
    calls: int
    advice: dict[str, int]
    advised_bytes: int
    ranges: list[RangeDoc]


class HugeDoc(TypedDict):
    """Huge pages (``huge``)."""

    pools: list[PoolDoc]
    hugetlb_bytes: int | None
    anon_huge_bytes: int | None
    shmem_huge_bytes: int | None
    file_huge_bytes: int | None
    thp_enabled: str
    thp_defrag: str
    thp_shmem_enabled: str
    thp_per_s: dict[str, float] | None
    thp_since_start: dict[str, int] | None
    khugepaged: KhugepagedDoc | None
    processes: list[HugeProcDoc]
    smaps_read: int | None
    madvise: list[MadviseDoc] | None


class ReasonDoc(TypedDict):
    reason: str
    calls: int
    succeeded: int
    failed: int
    thp_succeeded: int
    thp_failed: int
    thp_split: int
    succeeded_per_s: float
    failed_per_s: float


class NumaCounter(TypedDict):
    per_s: float
    since_start: int


class MigrateDoc(TypedDict):
    """Page migration (``migrate``)."""

    reasons: list[ReasonDoc] | None
    vmstat: dict[str, NumaCounter] | None
    compact_stall_per_s: float | None


class SharedDoc(Head):
    """The Shared pane's document (docs/panes/shared.md)."""

    rows: list[SegmentRow]
    sysv: SysvDoc
    posix: PosixDoc
    shmem: ShmemDoc | None
    huge: HugeDoc
    migrate: MigrateDoc


def key_hex(key: int) -> str:
    return f"0x{key & 0xFFFFFFFF:08x}"


def _orphan(v: Any) -> str:
    return "ORPHAN" if v else ""


#: why the calls are not traced, what to do
NOT_SNOOPING = (
    "the shmsnoop probe runs while this pane is shown, or a snapshot or --batch of it"
    " (syscall tracepoints slow every syscall, so not unseen)"
)


class SharedView(View[SharedDoc]):
    name = "shared"
    title = "Shared memory and huge pages"
    tab_title = "Shared"
    order = 90
    probes = ("sharedinfo", "shared", "shmsnoop")
    while_shown = ("shmsnoop",)
    vmstat_fallback = (
        "shared",
        (("pgmigrate_success", "pages migrated", "rate"), ("thp_fault_alloc", "THP faults", "rate")),
    )
    columns: ClassVar[tuple[Column[RowKey], ...]] = (
        Column("shmid", "SHMID"),
        Column("key", "KEY", key_hex, numeric=False, priority=1),
        Column("size_bytes", "SIZE", fmt.bytes_h),
        Column("rss_bytes", "RSS", fmt.bytes_h),
        Column("swap_bytes", "SWAP", fmt.bytes_h),
        Column("nattch", "ATT", priority=1),
        Column("orphan", "", _orphan, numeric=False),
        Column("uid", "UID", priority=2),
        Column("perms", "PERM", lambda p: f"{p:o}", priority=3),
        Column("creator", "CREATOR", numeric=False, priority=1, min_width=10),
        Column("last", "LAST", numeric=False, priority=2, min_width=10),
        Column("ctime_age_s", "CREATED", fmt.age_h, priority=2),
    )

    def document(self, state: State, opts: Options) -> SharedDoc:
        st = state.get(SharedState)
        host = state.get(HostState)
        now_s = _now_s(state)
        segments: list[SegmentRow] = []
        for seg in st.segments.values():
            row: SegmentRow = {
                "shmid": seg.shmid,
                "key": seg.key,
                "perms": seg.perms,
                "size_bytes": seg.size_bytes,
                "rss_bytes": seg.rss_bytes,
                "swap_bytes": seg.swap_bytes,
                "nattch": seg.nattch,
                "orphan": seg.nattch == 0,
                "uid": seg.uid,
                "gid": seg.gid,
                "cuid": seg.cuid,
                "cpid": seg.cpid,
                "lpid": seg.lpid,
                "creator_comm": seg.creator_comm,
                "last_comm": seg.last_comm,
                "creator": f"{seg.cpid} {seg.creator_comm or '(gone)'}",
                "last": f"{seg.lpid} {seg.last_comm or '(gone)'}" if seg.lpid else "-",
                "atime_s": seg.atime_s,
                "dtime_s": seg.dtime_s,
                "ctime_s": seg.ctime_s,
                "ctime_age_s": max(0, now_s - seg.ctime_s) if now_s and seg.ctime_s else None,
                "mapped_by": list(seg.mapped_by),
                "mappers": [
                    {"pid": pid, "comm": st.procs[pid].comm if pid in st.procs else ""}
                    for pid in seg.mapped_by
                ],
            }
            if opts.filter and not _matches(opts.filter, row):
                continue
            segments.append(row)
        key: SortKey = next((k for k in SORT_KEYS if k == opts.sort), "rss_bytes")
        segments.sort(key=lambda r: (r[key], r["shmid"]), reverse=opts.reverse)
        traced = measuring(state, "shmsnoop")
        events = [_event(e, state.ts_ns) for e in st.events if opts.pid is None or e.pid == opts.pid]
        callers: list[CallerDoc] = [
            {
                "pid": c.pid,
                "comm": c.comm,
                "calls": dict(c.calls),
                "errors": c.errors,
                "advice": dict(c.advice),
                "advised_bytes": c.advised_bytes,
            }
            for c in reversed(st.callers.values())
            if opts.pid is None or c.pid == opts.pid
        ]
        orphans = [s for s in segments if s["orphan"]]
        return {
            **self.head(state),
            "rows": segments,
            "sysv": {
                "readable": st.sysv_readable,
                "why": st.sysv_why,
                "segments": len(segments),
                "orphans": len(orphans),
                "orphan_rss_bytes": sum(s["rss_bytes"] for s in orphans),
                "orphan_swap_bytes": sum(s["swap_bytes"] for s in orphans),
                "rss_bytes": sum(s["rss_bytes"] for s in segments),
                "events": events if traced or events else None,
                "calls_total": st.calls_total if traced else None,
                "callers": [c for c in callers if set(c["calls"]) - {"madvise", "memfd_create"}],
            },
            "posix": _posix(st),
            "shmem": _shmem(st, segments),
            "huge": _huge(st, host, callers, traced),
            "migrate": _migrate(st, host, measuring(state, "shared")),
        }

    def text_extra(self, doc: SharedDoc) -> str:
        return "\n".join(text_sections(doc)) + "\n"


def _now_s(state: State) -> int:
    from memtop.views import wall_ns

    ns = wall_ns(state)
    return ns // 1_000_000_000 if ns else 0


def _matches(needle: str, row: SegmentRow) -> bool:
    """The filter matches the segment's creator, its last user, its id or its key."""
    n = needle.lower()
    return any(n in v.lower() for v in (row["creator"], row["last"])) or n in (
        str(row["shmid"]),
        key_hex(row["key"]),
    )


def _event(e: SharedCall, ts_ns: int) -> CallDoc:
    return {
        "ts_ns": e.ts_ns,
        "age_ns": max(0, ts_ns - e.ts_ns),
        "pid": e.pid,
        "tid": e.tid,
        "comm": e.comm,
        "call": e.call,
        "result": e.result,
        "error": e.error,
        "key": e.key,
        "shmid": e.shmid,
        "size_bytes": e.size_bytes,
        "addr": e.addr,
        "flags": e.flags,
        "cmd": e.cmd,
        "advice": e.advice,
        "name": e.name,
        "what": describe(e),
    }


def describe(e: SharedCall) -> str:
    """One line for a traced call, as shmsnoop would print it."""
    res = e.error or str(e.result)
    if e.call == "shmget":
        return f"shmget(key {key_hex(e.key or 0)}, {fmt.bytes_h(e.size_bytes)}, flags {e.flags:#o}) = {res}"
    if e.call == "shmat":
        got = e.error or (f"{e.addr:#x}" if e.addr is not None else res)
        return f"shmat(shmid {e.shmid}, flags {e.flags:#o}) = {got}"
    if e.call == "shmdt":
        return f"shmdt({(e.addr or 0):#x}) = {res}"
    if e.call == "shmctl":
        return f"shmctl(shmid {e.shmid}, {e.cmd}) = {res}"
    if e.call == "madvise":
        end = (e.addr or 0) + (e.size_bytes or 0)
        return f"madvise({(e.addr or 0):#x}-{end:#x} {fmt.bytes_h(e.size_bytes)}, {e.advice.upper()}) = {res}"
    if e.call == "memfd_create":
        return f"memfd_create({e.name!r}, flags {e.flags:#x}) = {res}"
    return f"{e.call} = {res}"


def _posix(st: SharedState) -> PosixDoc:
    mounts: list[MountDoc] = []
    files: list[FileDoc] = []
    for m in st.mounts.values():
        mounts.append(
            {
                "mount": m.mount,
                "size_bytes": m.size_bytes,
                "used_bytes": m.used_bytes,
                "files_seen": m.files_seen,
                "truncated": m.truncated,
            }
        )
        for path, uid, size, alloc in m.files:
            files.append(
                {"mount": m.mount, "path": path, "uid": uid, "size_bytes": size, "alloc_bytes": alloc}
            )
    files.sort(key=lambda f: -f["alloc_bytes"])
    memfds: list[MemfdDoc] = []
    for p in st.procs.values():
        for ino, name, size, alloc, mapped in p.memfds:
            memfds.append(
                {
                    "pid": p.pid,
                    "comm": p.comm,
                    "uid": p.uid,
                    "inode": ino,
                    "name": name,
                    "size_bytes": size,
                    "alloc_bytes": alloc,
                    "mapped": bool(mapped),
                }
            )
    memfds.sort(key=lambda m: (-m["alloc_bytes"], m["pid"]))
    return {
        "scanned": st.scan is not None,
        "mounts": mounts,
        "files": files,
        "memfds": memfds,
        "processes": [
            {"pid": p.pid, "comm": p.comm, "uid": p.uid, "rss_shmem_bytes": p.rss_shmem_bytes}
            for p in sorted(st.procs.values(), key=lambda p: -p.rss_shmem_bytes)
            if p.rss_shmem_bytes
        ],
    }


def _shmem(st: SharedState, segments: list[SegmentRow]) -> ShmemDoc | None:
    """/proc/meminfo's Shmem broken down: System V segments' resident pages, tmpfs mounts' used
    blocks, memfds (each inode once), the rest (shared anonymous mappings, GPU buffers...)."""
    if st.pools is None:
        return None
    total = st.pools.shmem_bytes
    sysv = sum(s["rss_bytes"] for s in segments)
    tmpfs = sum(m.used_bytes for m in st.mounts.values())
    inodes: dict[int, int] = {}
    for p in st.procs.values():
        for ino, _name, _size, alloc, _mapped in p.memfds:
            inodes[ino] = alloc
    memfd = sum(inodes.values())
    return {
        "shmem_bytes": total,
        "sysv_bytes": sysv,
        "tmpfs_bytes": tmpfs,
        "memfd_bytes": memfd,
        "other_bytes": max(0, total - sysv - tmpfs - memfd),
    }


def _huge(st: SharedState, host: HostState, callers: list[CallerDoc], traced: bool) -> HugeDoc:
    p = st.pools
    pools: list[PoolDoc] = [
        {
            "page_size_bytes": size,
            "total": total,
            "free": free,
            "reserved": resv,
            "surplus": surp,
            "used": total - free,
            "used_bytes": (total - free) * size,
            "total_bytes": total * size,
        }
        for size, total, free, resv, surp in (p.pools if p else ())
    ]
    procs: list[HugeProcDoc] = [
        {
            "pid": q.pid,
            "comm": q.comm,
            "hugetlb_bytes": q.hugetlb_bytes,
            "anon_huge_bytes": q.anon_huge_bytes,
        }
        for q in sorted(st.procs.values(), key=lambda q: -(q.hugetlb_bytes + (q.anon_huge_bytes or 0)))
        if q.hugetlb_bytes or q.anon_huge_bytes
    ]
    have_vmstat = bool(host.vmstat) and any(k.startswith("thp_") for k in host.vmstat)
    thp_rates = (
        {k: round(host.vmstat_rate(k), 3) for k, _ in THP_COUNTERS if k in host.vmstat}
        if have_vmstat
        else None
    )
    thp_totals = (
        {k: host.vmstat_since_start(k) for k, _ in THP_COUNTERS if k in host.vmstat} if have_vmstat else None
    )
    kh = st.khuge
    khuge: KhugepagedDoc | None = None
    if kh is not None:
        dt = st.khuge_ts_ns - st.khuge_prev_ts_ns
        prev = st.khuge_prev
        scans_rate = None
        if kh.scans is not None and prev is not None and prev.scans is not None and dt > 0:
            scans_rate = round((kh.scans - prev.scans) * 1e9 / dt, 3)
        khuge = {
            "pmds_scanned": kh.scans,
            "pmds_scanned_per_s": scans_rate,
            "collapses": dict(kh.collapses),
        }
    madvise: list[MadviseDoc] = []
    for pid in [c["pid"] for c in callers if "madvise" in c["calls"]]:
        c = st.callers[pid]
        madvise.append(
            {
                "pid": pid,
                "comm": c.comm,
                "calls": c.calls["madvise"],
                "advice": dict(c.advice),
                "advised_bytes": c.advised_bytes,
                "ranges": [
                    {
                        "start": r.addr,
                        "length_bytes": r.size_bytes,
                        "advice": r.advice,
                        "result": r.result,
                        "error": r.error,
                    }
                    for r in c.ranges
                ],
            }
        )
    return {
        "pools": pools,
        "hugetlb_bytes": p.hugetlb_bytes if p else None,
        "anon_huge_bytes": p.anon_huge_bytes if p else None,
        "shmem_huge_bytes": p.shmem_huge_bytes if p else None,
        "file_huge_bytes": p.file_huge_bytes if p else None,
        "thp_enabled": p.thp_enabled if p else "",
        "thp_defrag": p.thp_defrag if p else "",
        "thp_shmem_enabled": p.thp_shmem_enabled if p else "",
        "thp_per_s": thp_rates,
        "thp_since_start": thp_totals,
        "khugepaged": khuge,
        "processes": procs,
        "smaps_read": st.scan.smaps_read if st.scan else None,
        "madvise": madvise if traced or madvise else None,
    }


def _migrate(st: SharedState, host: HostState, traced: bool) -> MigrateDoc:
    rates = st.migrate_rates()
    reasons: list[ReasonDoc] = []
    for r in st.migrate.reasons if st.migrate else ():
        ok, bad = rates.get(r[0], (0.0, 0.0))
        reasons.append(
            {
                "reason": r[0],
                "calls": r[1],
                "succeeded": r[2],
                "failed": r[3],
                "thp_succeeded": r[4],
                "thp_failed": r[5],
                "thp_split": r[6],
                "succeeded_per_s": round(ok, 3),
                "failed_per_s": round(bad, 3),
            }
        )
    numa: dict[str, NumaCounter] | None = (
        {
            k: {"per_s": round(host.vmstat_rate(k), 3), "since_start": host.vmstat_since_start(k)}
            for k, _ in NUMA_COUNTERS
            if k in host.vmstat
        }
        if host.vmstat
        else None
    )
    return {
        "reasons": reasons if traced or reasons else None,
        "vmstat": numa,
        "compact_stall_per_s": round(host.vmstat_rate("compact_stall"), 3) if host.vmstat else None,
    }


#: the tables of the pane's other sections (the System V one is the view's own ``columns``)
POSIX_COLUMNS = (
    Column("kind", "KIND", numeric=False),
    Column("pid", "PID"),
    Column("owner", "OWNER", numeric=False),
    Column("alloc_bytes", "ALLOC", fmt.bytes_h),
    Column("size_bytes", "SIZE", fmt.bytes_h),
    Column("mapped", "MAPPED", lambda v: "yes" if v else "no", numeric=False),
    Column("name", "NAME", numeric=False),
)
HUGE_COLUMNS = (
    Column("pid", "PID"),
    Column("comm", "COMMAND", numeric=False),
    Column("hugetlb_bytes", "HUGETLB", fmt.bytes_h),
    Column("anon_huge_bytes", "ANON THP", fmt.bytes_h),
    Column("madvise_calls", "MADVISE", fmt.count_h),
    Column("advice", "ASKED", numeric=False),
    Column("advised_bytes", "ADVISED", fmt.bytes_h),
)
MIGRATE_COLUMNS = (
    Column("reason", "REASON", numeric=False),
    Column("succeeded_per_s", "PAGES/s", fmt.count_h),
    Column("failed_per_s", "FAILED/s", fmt.count_h),
    Column("succeeded", "MIGRATED", fmt.count_h),
    Column("failed", "FAILED", fmt.count_h),
    Column("thp_succeeded", "THP", fmt.count_h),
    Column("thp_split", "THP SPLIT", fmt.count_h),
    Column("calls", "CALLS", fmt.count_h),
)


class PosixRow(TypedDict):
    """A row of the POSIX section's table: a memfd or a tmpfs file."""

    key: str
    kind: str
    pid: int | None
    owner: str
    alloc_bytes: int
    size_bytes: int
    mapped: bool | None
    name: str


class HugeRow(TypedDict):
    """A row of the huge pages section's table: a process's huge pages and madvise calls."""

    pid: int
    comm: str
    hugetlb_bytes: int | None
    anon_huge_bytes: int | None
    madvise_calls: int | None
    advice: str
    advised_bytes: int | None


def posix_rows(doc: SharedDoc) -> list[PosixRow]:
    """memfds and tmpfs files in one table, the most allocated first."""
    rows: list[PosixRow] = []
    for m in doc["posix"]["memfds"]:
        rows.append(
            {
                "key": f"memfd:{m['pid']}:{m['inode']}",
                "kind": "memfd",
                "pid": m["pid"],
                "owner": m["comm"],
                "alloc_bytes": m["alloc_bytes"],
                "size_bytes": m["size_bytes"],
                "mapped": m["mapped"],
                "name": f"memfd:{m['name']}",
            }
        )
    for f in doc["posix"]["files"]:
        rows.append(
            {
                "key": f"file:{f['mount']}/{f['path']}",
                "kind": "tmpfs",
                "pid": None,
                "owner": f"uid {f['uid']}",
                "alloc_bytes": f["alloc_bytes"],
                "size_bytes": f["size_bytes"],
                "mapped": None,
                "name": f"{f['mount'].rstrip('/')}/{f['path']}",
            }
        )
    rows.sort(key=lambda r: (-r["alloc_bytes"], r["key"]))
    return rows


def huge_rows(doc: SharedDoc) -> list[HugeRow]:
    """Processes with huge pages or madvise calls for them, the most huge pages first."""
    hu = doc["huge"]
    by_pid: dict[int, HugeRow] = {}
    for q in hu["processes"]:
        by_pid[q["pid"]] = {
            "pid": q["pid"],
            "comm": q["comm"],
            "hugetlb_bytes": q["hugetlb_bytes"],
            "anon_huge_bytes": q["anon_huge_bytes"],
            "madvise_calls": None,
            "advice": "",
            "advised_bytes": None,
        }
    for m in hu["madvise"] or []:
        row = by_pid.setdefault(
            m["pid"],
            {
                "pid": m["pid"],
                "comm": m["comm"],
                "hugetlb_bytes": None,
                "anon_huge_bytes": None,
                "madvise_calls": None,
                "advice": "",
                "advised_bytes": None,
            },
        )
        row["madvise_calls"] = m["calls"]
        row["advice"] = " ".join(f"{k}:{v}" for k, v in sorted(m["advice"].items()))
        row["advised_bytes"] = m["advised_bytes"]
    return sorted(
        by_pid.values(),
        key=lambda r: (
            -((r["hugetlb_bytes"] or 0) + (r["anon_huge_bytes"] or 0)),
            -(r["advised_bytes"] or 0),
        ),
    )


def section_table(
    doc: SharedDoc, section: str
) -> tuple[tuple[Column[str], ...], Sequence[Mapping[str, Any]], str]:
    """(columns, rows, row key) of the pane's table for ``section`` (one of PANE_SECTIONS): the
    rows are SegmentRow, PosixRow, HugeRow or ReasonDoc, by section."""
    if section == "posix":
        return POSIX_COLUMNS, posix_rows(doc), "key"
    if section == "huge":
        return HUGE_COLUMNS, huge_rows(doc), "pid"
    if section == "migrate":
        return MIGRATE_COLUMNS, list(doc["migrate"]["reasons"] or []), "reason"
    return SharedView.columns, doc["rows"], "shmid"


def text_sections(doc: SharedDoc) -> list[str]:
    """The sections after the segments' table, as text lines (text snapshot, batch)."""
    return [
        "",
        *_sysv_lines(doc["sysv"]),
        *_posix_lines(doc["posix"], doc["shmem"]),
        *_huge_lines(doc["huge"]),
        *_migrate_lines(doc["migrate"]),
    ]


def _sysv_lines(sv: SysvDoc) -> list[str]:
    """System V segments and the traced calls."""
    out = []
    if sv["readable"] is False:
        out.append(f"System V segments not read: {sv['why']}")
    else:
        out.append(
            f"System V: {fmt.plural(sv['segments'], 'segment')}, {fmt.bytes_h(sv['rss_bytes'])} resident; "
            f"{fmt.plural(sv['orphans'], 'orphan')} (no process attached) holding "
            f"{fmt.bytes_h(sv['orphan_rss_bytes'])} + {fmt.bytes_h(sv['orphan_swap_bytes'])} swapped"
        )
    out.append("")
    out.append("traced calls, newest first (shm*, madvise for huge pages, memfd_create)")
    if sv["events"] is None:
        out.append(f"  not traced: {NOT_SNOOPING}")
    else:
        for e in sv["events"][:50]:
            out.append(f"  {e['pid']:>7} {e['comm']:<16} {e['what']}")
        if not sv["events"]:
            out.append("  none since memtop started")
    if sv["callers"]:
        out.append("calls per process")
        for c in sv["callers"][:20]:
            counts = " ".join(f"{k} {v}" for k, v in sorted(c["calls"].items()))
            out.append(f"  {c['pid']:>7} {c['comm']:<16} {counts}  errors {c['errors']}")
    return out


def _posix_lines(po: PosixDoc, sh: ShmemDoc | None) -> list[str]:
    """tmpfs mounts, memfds and what Shmem is made of."""
    out = ["", "tmpfs mounts"]
    for m in po["mounts"]:
        more = " (walk truncated)" if m["truncated"] else ""
        out.append(
            f"  {m['mount']}  {fmt.bytes_h(m['used_bytes'])} used of {fmt.bytes_h(m['size_bytes'])}{more}"
        )
    for f in po["files"][:20]:
        out.append(
            f"    {fmt.bytes_h(f['alloc_bytes']):>8}  uid {f['uid']:<6} {f['mount'].rstrip('/')}/{f['path']}"
        )
    out.append("memfds")
    for fd in po["memfds"][:30]:
        mapped = "mapped" if fd["mapped"] else "not mapped"
        out.append(
            f"  {fd['pid']:>7} {fd['comm']:<16} memfd:{fd['name']}  size {fmt.bytes_h(fd['size_bytes'])}"
            f"  allocated {fmt.bytes_h(fd['alloc_bytes'])}  {mapped}"
        )
    if not po["memfds"]:
        out.append("  none" if po["scanned"] else "  not scanned yet")
    if sh is not None:
        out.append(
            f"Shmem {fmt.bytes_h(sh['shmem_bytes'])} = System V {fmt.bytes_h(sh['sysv_bytes'])}"
            f" + tmpfs {fmt.bytes_h(sh['tmpfs_bytes'])} + memfd {fmt.bytes_h(sh['memfd_bytes'])}"
            f" + other {fmt.bytes_h(sh['other_bytes'])} (shared anonymous mappings, drivers)"
        )
    return out


def _huge_lines(hu: HugeDoc) -> list[str]:
    """Huge page pools, THP, khugepaged, per process, and madvise for huge pages."""
    out = ["", "hugetlb pools"]
    for p in hu["pools"]:
        out.append(
            f"  {fmt.bytes_h(p['page_size_bytes']):>6} pages: total {p['total']} free {p['free']}"
            f" reserved {p['reserved']} surplus {p['surplus']}"
        )
    out.append(
        f"THP enabled [{hu['thp_enabled']}] defrag [{hu['thp_defrag']}] shmem [{hu['thp_shmem_enabled']}]"
        f"  AnonHugePages {fmt.bytes_h(hu['anon_huge_bytes'])}  Hugetlb {fmt.bytes_h(hu['hugetlb_bytes'])}"
    )
    if hu["thp_per_s"] is not None:
        out.append(
            "THP/s: "
            + ", ".join(f"{label} {fmt.count_h(hu['thp_per_s'].get(k, 0))}" for k, label in THP_COUNTERS)
        )
    kh = hu["khugepaged"]
    if kh is not None:
        coll = ", ".join(f"{k} {v}" for k, v in sorted(kh["collapses"].items())) or "none"
        out.append(f"khugepaged: {fmt.count_h(kh['pmds_scanned'])} PMDs scanned; collapses: {coll}")
    out.append("huge pages per process")
    for q in hu["processes"][:20]:
        out.append(
            f"  {q['pid']:>7} {q['comm']:<16} hugetlb {fmt.bytes_h(q['hugetlb_bytes'])}"
            f"  AnonHugePages {fmt.bytes_h(q['anon_huge_bytes'])}"
        )
    out.append("madvise for huge pages")
    if hu["madvise"] is None:
        out.append(f"  not traced: {NOT_SNOOPING}")
    else:
        for m in hu["madvise"][:20]:
            adv = " ".join(f"{k} {v}" for k, v in sorted(m["advice"].items()))
            out.append(f"  {m['pid']:>7} {m['comm']:<16} {adv}  {fmt.bytes_h(m['advised_bytes'])} advised")
            for r in m["ranges"][:4]:
                out.append(
                    f"           {(r['start'] or 0):#x} +{fmt.bytes_h(r['length_bytes'])} {r['advice']}"
                    f" {r['error'] or 'ok'}"
                )
    return out


def _migrate_lines(mi: MigrateDoc) -> list[str]:
    """Page migration by reason, and the NUMA counters of /proc/vmstat."""
    out = ["", "page migration by reason"]
    if mi["reasons"] is None:
        out.append("  not traced (the shared probe is not running)")
    else:
        for r in mi["reasons"]:
            out.append(
                f"  {r['reason']:<18} {fmt.count_h(r['succeeded_per_s'])}/s ok {fmt.count_h(r['failed_per_s'])}/s"
                f" failed  (total {r['succeeded']} ok, {r['failed']} failed in {r['calls']} calls)"
            )
        if not mi["reasons"]:
            out.append("  none since memtop started")
    if mi["vmstat"]:
        out.append(
            "vmstat: "
            + ", ".join(
                f"{label} {fmt.count_h(mi['vmstat'][k]['per_s'])}/s"
                for k, label in NUMA_COUNTERS
                if k in mi["vmstat"]
            )
        )
    return out


#: log lines the detail box shows under the System V table
LOG_LINES = 8


def summary_segments(doc: SharedDoc, section: str) -> Sentence:
    """The lines above the table: Shmem broken down, then the section's own figures."""
    t = Sentence()
    sh = doc["shmem"]
    if sh is not None:
        t.add(f"Shmem {fmt.bytes_h(sh['shmem_bytes'])}", style="bold")
        t.add(
            f" = SysV {fmt.bytes_h(sh['sysv_bytes'])} + tmpfs {fmt.bytes_h(sh['tmpfs_bytes'])}"
            f" + memfd {fmt.bytes_h(sh['memfd_bytes'])} + other {fmt.bytes_h(sh['other_bytes'])}"
        )
    sv, hu, mi = doc["sysv"], doc["huge"], doc["migrate"]
    t.add("\n")
    if section == "sysv":
        if sv["readable"] is False:
            t.add(f"System V segments not read: {sv['why']}", style="yellow")
        else:
            t.add(f"{fmt.plural(sv['segments'], 'segment')} {fmt.bytes_h(sv['rss_bytes'])} resident; ")
            style = "bold red" if sv["orphans"] else ""
            t.add(
                f"{fmt.plural(sv['orphans'], 'orphan')} {fmt.bytes_h(sv['orphan_rss_bytes'])}"
                f" (+{fmt.bytes_h(sv['orphan_swap_bytes'])} swapped) held by no process",
                style=style,
            )
    elif section == "posix":
        mounts = doc["posix"]["mounts"]
        t.add(
            "tmpfs: "
            + (
                "  ".join(f"{m['mount']} {fmt.bytes_h(m['used_bytes'])}" for m in mounts)
                if mounts
                else "not read yet"
            )
        )
    elif section == "huge":
        pools = "  ".join(
            f"{fmt.bytes_h(p['page_size_bytes'])}: {p['used']}/{p['total']} used, {p['reserved']} rsvd,"
            f" {p['surplus']} surp"
            for p in hu["pools"]
            if p["total"] or p["surplus"]
        )
        t.add(f"hugetlb {pools or 'no pool'}")
        t.add(
            f"\nTHP [{hu['thp_enabled']}] defrag [{hu['thp_defrag']}]  AnonHugePages {fmt.bytes_h(hu['anon_huge_bytes'])}"
        )
        if hu["thp_per_s"] is not None:
            t.add(
                "  "
                + " ".join(
                    f"{label} {fmt.count_h(hu['thp_per_s'].get(k, 0))}/s" for k, label in THP_COUNTERS[:3]
                )
            )
    elif section == "migrate":
        vm = mi["vmstat"]
        if vm:
            t.add(
                "  ".join(f"{label} {fmt.count_h(vm[k]['per_s'])}/s" for k, label in NUMA_COUNTERS if k in vm)
            )
        else:
            t.add("no /proc/vmstat reading yet")
    return t


def detail_segments(
    doc: SharedDoc, section: str, row: Mapping[str, Any] | None, open_shmid: int | None
) -> Sentence:
    """The box under the table: the selected row's story (a segment's mappers, the call log, a
    process's madvise ranges, the pools, khugepaged)."""
    t = Sentence()
    if section == "sysv":
        sv = doc["sysv"]
        if row is not None and open_shmid == row["shmid"]:
            t.add(f"segment {row['shmid']} key {key_hex(row['key'])}", style="bold")
            t.add(
                f": {fmt.bytes_h(row['size_bytes'])}, {fmt.plural(row['nattch'], 'attach', 'attaches')},"
                f" created by {row['creator']}, last used by {row['last']}\n"
            )
            if row["mappers"]:
                t.add("mapped by: " + ", ".join(f"{m['pid']} {m['comm']}" for m in row["mappers"]))
            elif row["orphan"]:
                t.add(
                    "no process maps it: it holds its memory until shmctl(IPC_RMID) or `ipcrm -m`",
                    style="red",
                )
            else:
                t.add("no mapper found in the processes' maps yet (read every 5 s)", style="dim")
            return t
        events = sv["events"]
        if events is None:
            t.add(f"shm calls not traced: {NOT_SNOOPING}", style="yellow")
            return t
        if row is not None:
            events = [e for e in events if e["shmid"] == row["shmid"]] or events
        t.add("shm calls, newest first" + (" (Enter: who maps it)" if row is not None else ""), style="bold")
        for e in [e for e in events if e["call"].startswith("shm")][:LOG_LINES]:
            t.add(f"\n{fmt.age_h(e['age_ns'] / 1e9):>6} {e['pid']:>7} {e['comm']:<16} ")
            t.add(e["what"], style="red" if e["error"] else "")
        if not events:
            t.add("\nnone since memtop started", style="dim")
        return t
    if section == "posix":
        if row is None:
            t.add(
                "no tmpfs file or memfd found" if doc["posix"]["scanned"] else "not scanned yet", style="dim"
            )
            return t
        t.add(row["name"], style="bold")
        t.add(
            f"  {fmt.bytes_h(row['alloc_bytes'])} allocated of {fmt.bytes_h(row['size_bytes'])}"
            f"  owner {row['owner']}"
        )
        if row["kind"] == "memfd":
            t.add(f"  pid {row['pid']}  " + ("mapped" if row["mapped"] else "open, not mapped"))
        return t
    if section == "huge":
        hu = doc["huge"]
        kh = hu["khugepaged"]
        if kh is not None:
            coll = ", ".join(f"{k} {v}" for k, v in sorted(kh["collapses"].items())) or "none"
            t.add(f"khugepaged: {fmt.count_h(kh['pmds_scanned'])} PMDs scanned; collapses: {coll}\n")
        mad = next((m for m in hu["madvise"] or [] if row is not None and m["pid"] == row["pid"]), None)
        if mad is None:
            t.add(
                "madvise(MADV_HUGEPAGE / NOHUGEPAGE / COLLAPSE): "
                + ("not traced" if hu["madvise"] is None else "none by this process"),
                style="dim",
            )
        else:
            t.add(f"{mad['comm']} [{mad['pid']}] madvise ranges, newest first", style="bold")
            for r in mad["ranges"][:6]:
                end = (r["start"] or 0) + (r["length_bytes"] or 0)
                t.add(
                    f"\n  {(r['start'] or 0):#x}-{end:#x} {fmt.bytes_h(r['length_bytes'])} {r['advice']}"
                    f" {r['error'] or 'ok'}"
                )
        return t
    mi = doc["migrate"]
    if mi["reasons"] is None:
        t.add("migrations not traced: the shared probe is not running", style="yellow")
    elif not mi["reasons"]:
        t.add("no page migrated since memtop started", style="dim")
    elif row is not None:
        t.add(
            f"{row['reason']}: {fmt.count_h(row['succeeded'])} pages migrated, {fmt.count_h(row['failed'])} failed"
            f" in {fmt.count_h(row['calls'])} migrate_pages() calls; THP {row['thp_succeeded']} moved,"
            f" {row['thp_failed']} failed, {row['thp_split']} split"
        )
    return t


__all__ = ["SharedView", "render_table", "describe", "text_sections", "section_table", "PANE_SECTIONS"]
