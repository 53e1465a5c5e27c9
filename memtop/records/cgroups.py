"""Cgroups records (the cgroups probe): the layout of the hierarchies and each cgroup's memory
figures, as cgroupfs gives them. Counters are cumulative; rates are derived in
``memtop.state.cgroups``."""

from __future__ import annotations

from dataclasses import dataclass

from memtop.records import Record, record


@record("cgroup_layout")
@dataclass(frozen=True, slots=True)
class CgroupLayout(Record):
    """Where the hierarchies are: ``mode`` "v1", "v2", "hybrid" or "none"; the memory
    controller's mount and version (0: none); the cgroup2 mount ("" when none) and whether it
    has per-cgroup PSI. ``hierarchies``: (mountpoint, version, controllers)."""

    mode: str
    memory_mount: str
    memory_version: int
    unified_mount: str
    psi: bool
    hierarchies: tuple[tuple[str, int, tuple[str, ...]], ...] = ()


@record("cgroup")
@dataclass(frozen=True, slots=True)
class CgroupSample(Record):
    """One cgroup, named by its path below the hierarchy root ("/" for the root). Sent when it
    appears and when a figure changed. ``version`` is the memory controller's (0: the cgroup
    exists only in the cgroup2 hierarchy of a hybrid machine, which has no memory figures).
    Limits None: no limit; any other None: this version or kernel does not have the figure.
    ``events``: v2 memory.events as named there, v1 failcnt/oom_kill/under_oom; ``stat``:
    memory.stat under memtop's common names (memtop.linux.cgroupfs.STAT_NAMES; hierarchical on v1);
    ``psi_*_us``: memory.pressure totals, from the cgroup2 directory of the same path.
    ``pids``: processes in it (memory hierarchy); ``unified_pids``: those in the cgroup2
    directory of the same path, when that is another hierarchy. ``cgroup_id``: that cgroup2
    directory's id (what BPF's bpf_get_current_cgroup_id gives), 0 when none.
    ``container``: (runtime, id, pod uid, name, "namespace/pod") when the path is a container's
    or a pod's; ``image``: the image that container runs, where the runtime's files say ("" when
    not known; a field of its own so recordings made before it still read)."""

    path: str
    version: int
    usage_bytes: int | None = None
    limit_bytes: int | None = None
    high_bytes: int | None = None
    low_bytes: int | None = None
    min_bytes: int | None = None
    soft_limit_bytes: int | None = None
    swap_bytes: int | None = None
    swap_limit_bytes: int | None = None
    events: tuple[tuple[str, int], ...] = ()
    stat: tuple[tuple[str, int], ...] = ()
    psi_some_us: int | None = None
    psi_full_us: int | None = None
    pids: tuple[int, ...] = ()
    unified_pids: tuple[int, ...] = ()
    cgroup_id: int = 0
    container: tuple[str, str, str, str, str] | None = None
    image: str = ""


@record("cgroup_gone")
@dataclass(frozen=True, slots=True)
class CgroupGone(Record):
    """A cgroup removed since the last sample."""

    path: str


@record("cgroup_poll")
@dataclass(frozen=True, slots=True)
class CgroupPoll(Record):
    """Sent on every poll of the cgroups probe, after its samples: a cgroup not resent in this
    poll did not change (its rates are zero now). ``cgroups``: how many it read; ``over_limit``:
    how many more its last walk found and left out, past ``max_cgroups``."""

    cgroups: int
    over_limit: int = 0
    max_cgroups: int = 0


@record("cgroup_lru_gen")
@dataclass(frozen=True, slots=True)
class CgroupLruGen(Record):
    """MGLRU's page ages per memory cgroup (debugfs ``lru_gen``), sent each time the cgroups
    probe reads it (every few seconds, where MGLRU is on): per cgroup path (its own pages, not its
    children's), its generations on every node as (age_ns, anon_bytes, file_bytes). ``memcgs``
    empty and ``why`` set: the file could not be used (the state forgets the ages it had)."""

    memcgs: tuple[tuple[str, tuple[tuple[int, int, int], ...]], ...] = ()
    why: str = ""
