"""Cgroups as the kernel lays them out: one model over cgroup v1, v2 and hybrid hierarchies.

Where memory is owned: the hierarchy the ``memory`` controller is bound to (a v1 mount with the
``memory`` option, or the cgroup2 mount when its root lists ``memory`` in cgroup.controllers).
Where pressure is measured: per-cgroup ``memory.pressure`` exists only in the cgroup2 hierarchy,
whose tree may be a different one (hybrid: systemd mirrors its units in both, with the same paths).
Both are found from ``/proc/self/mountinfo``; a cgroup is named by its path below the hierarchy's
root (``/`` for the root), which is how /proc/PID/cgroup names it too.

Pure file reading and parsing (no bcc): the cgroups probe, ``memtop doctor`` and the tests share
it; tests run the v2 readers on fixture trees written in the kernel's documented formats, since
the v2 memory controller cannot be enabled where the v1 one is bound.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import stat as stat_mod
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import AnyStr

#: v1 limits at or above this mean "no limit" (the kernel reports PAGE_COUNTER_MAX * PAGE_SIZE,
#: rounded down to a page: 9223372036854771712 on 64-bit)
V1_UNLIMITED = 1 << 62
#: the largest cgroup file memtop reads (memory.stat is ~1.5 KiB; cgroup.procs of a huge cgroup
#: is bounded so one cgroup cannot make a tick slow)
MAX_FILE = 1 << 20
#: the most one pread of a held memory.stat takes (~1.5 KiB on v1 and v2; a bigger text is cut,
#: as MAX_FILE cuts a file opened per read)
MAX_STAT = 64 << 10
#: containers/storage's containers.json: ~600 bytes a container, so room for ten thousand
MAX_STORAGE_INDEX = 8 << 20


@dataclass(frozen=True)
class Hierarchy:
    """A mounted cgroup hierarchy: where, which version, which controllers."""

    mountpoint: str
    version: int  # 1 or 2
    controllers: tuple[str, ...]
    #: the path of the mount's root within the hierarchy ("/" unless a sub-tree is mounted, as in
    #: a container): a cgroup path from /proc/PID/cgroup is below it
    root: str = "/"

    def dir(self, path: str) -> str:
        """The directory of cgroup ``path`` (as /proc/PID/cgroup names it) under this mount."""
        rel = path
        if self.root != "/" and (rel == self.root or rel.startswith(self.root + "/")):
            rel = rel[len(self.root) :] or "/"
        return self.mountpoint.rstrip("/") + ("" if rel == "/" else rel)


@dataclass(frozen=True)
class Layout:
    """How this machine's cgroups are arranged."""

    mode: str  # "v1" | "v2" | "hybrid" | "none"
    hierarchies: tuple[Hierarchy, ...] = ()
    #: where the memory controller is (None: no memory controller mounted)
    memory: Hierarchy | None = None
    #: the cgroup2 hierarchy (v2 and hybrid), where per-cgroup PSI lives
    unified: Hierarchy | None = None
    #: per-cgroup memory.pressure readable (PSI built in and not disabled)
    psi: bool = False

    def describe(self) -> str:
        """One line for doctor: the mode, which controllers where, PSI per cgroup."""
        if self.mode == "none":
            return "no cgroup hierarchy mounted"
        parts = [self.mode]
        if self.memory is not None:
            parts.append(f"memory controller: v{self.memory.version} at {self.memory.mountpoint}")
        else:
            parts.append("no memory controller")
        if self.unified is not None and self.unified is not self.memory:
            ctl = ", ".join(self.unified.controllers) or "no controllers"
            parts.append(f"cgroup2 at {self.unified.mountpoint} ({ctl})")
        parts.append("PSI per cgroup: " + ("on" if self.psi else "off"))
        return "; ".join(parts)


def _unescape(field_: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field_)


def parse_mountinfo(text: str) -> list[tuple[str, str, str, str]]:
    """(root, mountpoint, fstype, super options) of each cgroup/cgroup2 mount in ``text``."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        lf, rf = left.split(), right.split()
        if len(lf) < 5 or len(rf) < 3 or rf[0] not in ("cgroup", "cgroup2"):
            continue
        out.append((_unescape(lf[3]), _unescape(lf[4]), rf[0], rf[2]))
    return out


def _depth(root: str) -> int:
    """How deep a mount's root is in its hierarchy: 0 for "/", 2 for "/a/b", -2 for "/../.."."""
    return sum(-1 if part == ".." else 1 for part in root.split("/") if part)


def find_layout(mountinfo: str, read_controllers: bool = True) -> Layout:
    """The layout described by the text of a mountinfo file. The cgroup2 root's controllers come
    from its cgroup.controllers (``read_controllers``); PSI from whether its root's
    cgroup.pressure / a memory.pressure file can be read."""
    hierarchies: list[Hierarchy] = []
    seen: set[str] = set()
    for root, mountpoint, fstype, opts in parse_mountinfo(mountinfo):
        if mountpoint in seen:
            continue
        seen.add(mountpoint)
        if fstype == "cgroup2":
            ctl: tuple[str, ...] = ()
            if read_controllers:
                text = read_text(os.path.join(mountpoint, "cgroup.controllers"))
                ctl = tuple((text or "").split())
            hierarchies.append(Hierarchy(mountpoint, 2, ctl, root))
        else:
            known = {"memory", "cpu", "cpuacct", "cpuset", "io", "blkio", "pids", "devices", "freezer"}
            names = tuple(o for o in opts.split(",") if o in known or o.startswith("name="))
            hierarchies.append(Hierarchy(mountpoint, 1, names, root))
    # A hierarchy mounted at its root sees every cgroup; a container's own view (the runtime
    # mounts the container's subtree at /sys/fs/cgroup) sees one. memtop in a container with the
    # host's cgroupfs mounted beside its own (contrib/container) must take the host's: the mount
    # whose root is highest. In a cgroup namespace of the container's own, mountinfo names roots
    # relative to it, and the host's root is above it ("/../.."): highest of all.
    hierarchies.sort(key=lambda h: _depth(h.root))
    v1 = [h for h in hierarchies if h.version == 1]
    v2 = [h for h in hierarchies if h.version == 2]
    unified = v2[0] if v2 else None
    memory = next((h for h in v1 if "memory" in h.controllers), None)
    if memory is None and unified is not None and "memory" in unified.controllers:
        memory = unified
    if not hierarchies:
        mode = "none"
    elif v1 and v2:
        mode = "hybrid"
    else:
        mode = "v2" if v2 else "v1"
    psi = unified is not None and read_text(os.path.join(unified.mountpoint, "memory.pressure")) is not None
    return Layout(mode, tuple(hierarchies), memory, unified, psi)


def layout(proc: str = "/proc") -> Layout:
    """This machine's layout, as this process sees it."""
    # mount points are paths memtop opens: read as os names them (surrogate-escaped), so one
    # whose name is not UTF-8 is found; shown only once cleaned (a record, doctor's line)
    return find_layout(read_text(os.path.join(proc, "self", "mountinfo"), errors="surrogateescape") or "")


def read_text(path: str, limit: int = MAX_FILE, errors: str = "replace") -> str | None:
    """A small file's text, None when it cannot be read (as :func:`read_bytes` reads it).
    ``errors="surrogateescape"`` where the text holds paths to open again (mountinfo): a byte
    that is not UTF-8 stays that byte."""
    data = read_bytes(path, limit)
    return None if data is None else data.decode("utf-8", errors)


def read_bytes(path: str, limit: int = MAX_FILE) -> bytes | None:
    """A small file's bytes, None when it cannot be read. Never follows a symlink, never opens
    anything but a regular file (a FIFO planted where a file is expected cannot block memtop),
    reads at most ``limit`` bytes: cgroupfs is written by whoever may create cgroups, and runtime
    files (container configs) by other programs."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            return None
        parts, size = [], 0
        while size < limit:
            chunk = os.read(fd, min(65536, limit - size))
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
        return b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


class HeldFiles:
    """Files read every tick (a cgroup's usage and pressure), kept open and re-read with pread:
    a tenth of the cost of opening them again (kernfs regenerates the text at offset 0). Opened
    as read_text opens (no symlink, regular files only); at most ``max_open`` are held (the
    process's file limit is shared with BPF maps and /proc), the others are opened per read. A
    file whose cgroup went away reads as None and is closed."""

    def __init__(self, max_open: int = 2048) -> None:
        self._ceiling = max_open
        self._soft = 0
        self.max_open = 0
        self._limit()
        self._fds: dict[str, int] = {}
        #: the held files by directory: a cgroup gone closes its own without a pass over every
        #: held file (with 500 cgroups, 0.8 ms of CPU for each one removed)
        self._by_dir: dict[str, set[str]] = {}
        #: files that refused a pread (ESPIPE): opened for each read
        self._unseekable: set[str] = set()

    def _limit(self) -> None:
        """``max_open`` from the soft RLIMIT_NOFILE now, a quarter of it: read again when the
        limit moved (the /proc reader raises it when it loads, after this was made; a service's
        default soft limit of 1,024 would have held 256 files: 128 cgroups)."""
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != self._soft:
            self._soft = soft
            self.max_open = max(0, min(self._ceiling, soft // 4 if soft > 0 else self._ceiling))

    def _fd(self, path: str) -> int | None:
        """The held fd of ``path``, opened now if need be; None when it cannot be opened or no
        more may be held (then the caller reads it as read_text does)."""
        fd = self._fds.get(path)
        if fd is not None:
            return fd
        if len(self._fds) >= self.max_open:
            self._limit()
        if len(self._fds) >= self.max_open:
            return None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            regular = stat_mod.S_ISREG(os.fstat(fd).st_mode)
        except OSError:
            regular = False
        if not regular:
            os.close(fd)
            return None
        self._fds[path] = fd
        self._by_dir.setdefault(os.path.dirname(path), set()).add(path)
        return fd

    def read(self, path: str, size: int = 4096) -> str | None:
        fd = self._fds.get(path)
        if fd is None:
            if path in self._unseekable:
                return read_text(path, size)
            fd = self._fd(path)
            if fd is None:
                return read_text(path, size) if len(self._fds) >= self.max_open else None
        try:
            return os.pread(fd, size, 0).decode("utf-8", "replace")
        except OSError as exc:
            self.drop(path)
            if exc.errno != errno.ESPIPE:
                return None
            # a file that cannot be pread (debugfs's simple attributes are not seekable): read
            # as it is opened, from now on
            self._unseekable.add(path)
            return read_text(path, size)

    def read_whole(self, path: str, limit: int = MAX_FILE) -> bytes | None:
        """A file of many records (cgroup.procs), read to its end, at most ``limit`` bytes. A
        seq_file hands out at most a buffer's worth a read, so it is read on at the offset
        reached until a read returns nothing; a read at offset 0 starts the listing anew
        (kernel/cgroup/cgroup.c __cgroup_procs_start() restarts its task iterator at position
        0). Held like :meth:`read`: an open and a first read of a cgroup file cost five times
        what a pread on a held one does. cgroup2's only: v1's cgroup.procs, held, reads a list
        the kernel keeps for a second after each read (memtop.probes.cgroups says why)."""
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fd(path)
            if fd is None:
                return read_bytes(path, limit) if len(self._fds) >= self.max_open else None
        parts: list[bytes] = []
        size = 0
        try:
            while size < limit:
                chunk = os.pread(fd, min(16384, limit - size), size)
                if not chunk:
                    break
                parts.append(chunk)
                size += len(chunk)
        except OSError:
            self.drop(path)
            return None
        return b"".join(parts)

    def drop(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            directory = os.path.dirname(path)
            held = self._by_dir.get(directory)
            if held is not None:
                held.discard(path)
                if not held:
                    del self._by_dir[directory]
            os.close(fd)

    def drop_under(self, directory: str) -> None:
        """Close the files of a cgroup that went away."""
        for path in list(self._by_dir.get(directory, ())):
            self.drop(path)

    def close(self) -> None:
        for path in list(self._fds):
            self.drop(path)

    def __del__(self) -> None:
        # raw fds are not closed with the object: a holder dropped unclosed (its probe never
        # closed) would keep them for the life of the process
        with contextlib.suppress(Exception):
            self.close()

    def __len__(self) -> int:
        return len(self._fds)


def parse_int(text: str | None) -> int | None:
    """A single-number cgroup file's value; None for "max" (no limit) or unreadable."""
    if text is None:
        return None
    t = text.strip()
    if t == "max":
        return None
    try:
        return int(t)
    except ValueError:
        return None


def _flat_keyed(text: str | None) -> dict[str, int]:
    """``name value`` lines (memory.stat, memory.events, oom_control)."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        k, _, v = line.partition(" ")
        try:
            out[k] = int(v)
        except ValueError:
            continue
    return out


#: a flat-keyed file's name as the kernel prints them (memory.stat: "total_rss", "pgscan")
_FLAT_NAME = re.compile(r"[A-Za-z0-9_]+")


class FlatLayouts:
    """memory.stat's figures of ``wanted`` names by one match of its layout: the kernel prints a
    memcg's memory.stat lines in the same order for its life, the same for every memcg of a
    hierarchy (mm/memcontrol*.c memcg_stat_format(), memcg1_stat_format()), so a text is
    matched whole against the pattern of the lines of one read before (the last few kept), its
    wanted values the groups; a text no pattern matches is parsed line by line
    (:func:`_flat_keyed`) and makes a pattern of its own. A pattern matches a text only where
    _flat_keyed would give each wanted name the value its group gives: each line its name and a
    space, a wanted name's last line then digits, every other line printable ASCII or tabs to
    its newline (nothing ``str.splitlines`` would split into another line)."""

    def __init__(self, wanted: frozenset[str], keep: int = 4) -> None:
        self.wanted = wanted
        self.keep = keep
        #: (pattern, the wanted names it captures in order), the last matched first
        self._layouts: list[tuple[re.Pattern[str], tuple[str, ...]]] = []

    def parse(self, text: str | None) -> dict[str, int]:
        """The wanted names' values as :func:`_flat_keyed` gives them (other names left out)."""
        if not text:
            return {}
        layouts = self._layouts
        for i, (pattern, names) in enumerate(layouts):
            m = pattern.fullmatch(text)
            if m is not None:
                if i:
                    layouts.insert(0, layouts.pop(i))
                return dict(zip(names, map(int, m.groups()), strict=True))
        raw = _flat_keyed(text)
        made = self._layout(text)
        if made is not None:
            layouts.insert(0, made)
            del layouts[self.keep :]
        return {k: v for k, v in raw.items() if k in self.wanted}

    def _layout(self, text: str) -> tuple[re.Pattern[str], tuple[str, ...]] | None:
        return keyed_layout(text, " ", _FLAT_NAME, self.wanted, " ([0-9]+)\n", " [\t\x20-\x7e]*\n")


def keyed_layout(
    text: AnyStr,
    sep: AnyStr,
    name_ok: re.Pattern[AnyStr],
    wanted: Collection[str],
    value: AnyStr,
    other: AnyStr,
) -> tuple[re.Pattern[AnyStr], tuple[str, ...]] | None:
    """A pattern of the lines of ``text``, a file of ``name<sep>…`` lines the kernel prints in
    the same order for its life (memory.stat, /proc/meminfo), that a later text matches whole
    only when it has the same names in the same order: a ``wanted`` name's last line its escaped
    name then ``value`` (the groups of its figure), every other line its name then ``other``;
    with the wanted names it captures, in order. ``value`` and ``other`` end in the newline, and
    ``other`` takes nothing a line parser's ``splitlines`` would split into another line. None
    when ``text`` is not such a text (a name ``name_ok`` refuses, a line without ``sep``, no
    newline at the end): then every text is parsed line by line."""
    nl = "\n" if isinstance(text, str) else b"\n"
    lines = text.split(nl)
    if lines.pop():
        return None  # no newline at the end
    names = [line.partition(sep)[0] for line in lines]
    last = {name: i for i, name in enumerate(names)}
    parts: list[AnyStr] = []
    order: list[str] = []
    for i, (line, name) in enumerate(zip(lines, names, strict=True)):
        if name_ok.fullmatch(name) is None or len(line) == len(name):
            return None
        key = name if isinstance(name, str) else name.decode()
        if key in wanted and last[name] == i:
            parts.append(re.escape(name) + value)
            order.append(key)
        else:
            parts.append(re.escape(name) + other)
    return re.compile(text[:0].join(parts)), tuple(order)


def parse_pressure(text: str | None) -> tuple[int, int] | None:
    """(some total µs, full total µs) of a PSI file; None when it cannot be read."""
    if text is None:
        return None
    some = full = None
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        m = re.search(r"\btotal=(\d+)", rest)
        if m and kind == "some":
            some = int(m.group(1))
        elif m and kind == "full":
            full = int(m.group(1))
    if some is None:
        return None
    return some, full or 0


@dataclass
class Reading:
    """One cgroup's memory figures, normalized across versions. Limits are None for "no limit";
    a figure this version does not have is None."""

    usage_bytes: int | None = None
    limit_bytes: int | None = None  # v2 memory.max | v1 limit_in_bytes
    high_bytes: int | None = None  # v2 memory.high
    low_bytes: int | None = None  # v2 memory.low
    min_bytes: int | None = None  # v2 memory.min
    soft_limit_bytes: int | None = None  # v1 soft_limit_in_bytes
    swap_bytes: int | None = None  # v2 memory.swap.current | v1 memsw.usage - usage
    swap_limit_bytes: int | None = None  # v2 memory.swap.max | v1 memsw.limit - limit
    #: events: v2 memory.events as they are (low, high, max, oom, oom_kill, oom_group_kill);
    #: v1 failcnt, oom_kill and under_oom
    events: dict[str, int] = field(default_factory=dict)
    #: memory.stat breakdown under common names (bytes, or counts for refault/pgscan/pgsteal)
    stat: dict[str, int] = field(default_factory=dict)


#: common name -> (v2 memory.stat key, v1 memory.stat key); hierarchical totals on v1
STAT_NAMES: dict[str, tuple[str, str]] = {
    "anon": ("anon", "total_rss"),
    "file": ("file", "total_cache"),
    "kernel": ("kernel", ""),
    "slab": ("slab", ""),
    "shmem": ("shmem", "total_shmem"),
    "sock": ("sock", ""),
    "dirty": ("file_dirty", "total_dirty"),
    "writeback": ("file_writeback", "total_writeback"),
    "mapped_file": ("file_mapped", "total_mapped_file"),
    "inactive_file": ("inactive_file", "total_inactive_file"),
    "active_file": ("active_file", "total_active_file"),
    "inactive_anon": ("inactive_anon", "total_inactive_anon"),
    "active_anon": ("active_anon", "total_active_anon"),
    "refault_anon": ("workingset_refault_anon", "total_workingset_refault_anon"),
    "refault_file": ("workingset_refault_file", "total_workingset_refault_file"),
    # refaults that activated the page (v2 only): evicted pages that were part of the working set
    "activate_anon": ("workingset_activate_anon", ""),
    "activate_file": ("workingset_activate_file", ""),
    "pgscan": ("pgscan", ""),
    "pgsteal": ("pgsteal", ""),
    "pgfault": ("pgfault", "total_pgfault"),
    "pgmajfault": ("pgmajfault", "total_pgmajfault"),
    # compressed swap, v2 only (v1 has no per-cgroup zswap figures): the pool's compressed bytes
    # charged to the cgroup, what they hold uncompressed, and pages loaded, stored, written back
    "zswap": ("zswap", ""),
    "zswapped": ("zswapped", ""),
    "zswpin": ("zswpin", ""),
    "zswpout": ("zswpout", ""),
    "zswpwb": ("zswpwb", ""),
}


#: v1 memory.stat's lines of the lowest limits of the cgroup and its ancestors
#: (mm/memcontrol-v1.c memcg1_stat_format(): the min of each one's ``memory.max`` and
#: ``memsw.max``, in bytes)
V1_HIER_LIMIT, V1_HIER_MEMSW = "hierarchical_memory_limit", "hierarchical_memsw_limit"

#: memory.stat's layouts, v2's and v1's (the names read: STAT_NAMES's; v1's hierarchical limits)
_STAT_V2 = FlatLayouts(frozenset(k2 for k2, _ in STAT_NAMES.values() if k2))
_STAT_V1 = FlatLayouts(
    frozenset([*(k1 for _, k1 in STAT_NAMES.values() if k1), V1_HIER_LIMIT, V1_HIER_MEMSW])
)


#: a cgroup file's path (os.path.join of its directory and name), kept for the cgroups read most:
#: a moving cgroup's full read joins nine a tick
_file_of = functools.lru_cache(maxsize=8192)(os.path.join)


def read_memory(
    version: int, d: str, held: HeldFiles | None = None, usage_text: str | None = None
) -> Reading:
    """The memory controller's figures of the cgroup at directory ``d``: its files opened for
    the read, or held open in ``held`` and re-read with pread (a cgroup read every tick: its
    usage keeps moving). ``usage_text``: its usage file's text as the caller just read it (not
    read again)."""
    r = Reading()
    j = _file_of

    def read(path: str, size: int = 4096) -> str | None:
        if held is None:
            return read_text(path)
        # one pread gives a whole file: each of these is printed by one show() into a seq_file
        # buffer grown to fit it, and a read at offset 0 prints it anew (fs/seq_file.c)
        return held.read(path, size)

    if version == 2:
        r.usage_bytes = parse_int(usage_text if usage_text is not None else read(j(d, "memory.current")))
        r.limit_bytes = parse_int(read(j(d, "memory.max")))
        r.high_bytes = parse_int(read(j(d, "memory.high")))
        r.low_bytes = parse_int(read(j(d, "memory.low")))
        r.min_bytes = parse_int(read(j(d, "memory.min")))
        r.swap_bytes = parse_int(read(j(d, "memory.swap.current")))
        r.swap_limit_bytes = parse_int(read(j(d, "memory.swap.max")))
        r.events = _flat_keyed(read(j(d, "memory.events")))
        raw = _STAT_V2.parse(read(j(d, "memory.stat"), MAX_STAT))
        r.stat = {name: raw[k2] for name, (k2, _) in STAT_NAMES.items() if k2 and k2 in raw}
        return r

    def unl(v: int | None) -> int | None:
        return None if v is None or v >= V1_UNLIMITED else v

    # memory.stat first: its hierarchical limits are the lowest of the cgroup's own and its
    # ancestors', so one unlimited there (>= V1_UNLIMITED) is the cgroup's own limit unlimited at
    # that read (its limit file would say as much, or more: None either way). Then that file is
    # not read: two reads less for a cgroup without limits, read in full at each tick it moves
    # (the root, whose limits cannot be set, and the usual parents of a v1 machine)
    raw = _STAT_V1.parse(read(j(d, "memory.stat"), MAX_STAT))
    hier, hier_sw = raw.get(V1_HIER_LIMIT), raw.get(V1_HIER_MEMSW)
    r.usage_bytes = parse_int(usage_text if usage_text is not None else read(j(d, "memory.usage_in_bytes")))
    if hier is None or hier < V1_UNLIMITED:
        r.limit_bytes = unl(parse_int(read(j(d, "memory.limit_in_bytes"))))
    r.soft_limit_bytes = unl(parse_int(read(j(d, "memory.soft_limit_in_bytes"))))
    memsw = parse_int(read(j(d, "memory.memsw.usage_in_bytes")))
    if memsw is not None and r.usage_bytes is not None:
        r.swap_bytes = max(0, memsw - r.usage_bytes)
    memsw_limit = None
    if hier_sw is None or hier_sw < V1_UNLIMITED:
        memsw_limit = unl(parse_int(read(j(d, "memory.memsw.limit_in_bytes"))))
    if memsw_limit is not None and r.limit_bytes is not None:
        r.swap_limit_bytes = max(0, memsw_limit - r.limit_bytes)
    failcnt = parse_int(read(j(d, "memory.failcnt")))
    oom = _flat_keyed(read(j(d, "memory.oom_control")))
    if failcnt is not None:
        r.events["failcnt"] = failcnt
    for k in ("oom_kill", "under_oom"):
        if k in oom:
            r.events[k] = oom[k]
    r.stat = {name: raw[k1] for name, (_, k1) in STAT_NAMES.items() if k1 and k1 in raw}
    kmem = parse_int(read(j(d, "memory.kmem.usage_in_bytes")))
    if kmem is not None:
        r.stat["kernel"] = kmem
    return r


def working_set(usage: int | None, inactive_file: int | None) -> int | None:
    """Working set as cAdvisor defines it: usage minus inactive file pages (not below 0)."""
    if usage is None:
        return None
    return max(0, usage - (inactive_file or 0))


def read_procs(d: str, held: HeldFiles | None = None) -> tuple[int, ...]:
    """The processes (tgids) directly in the cgroup at ``d`` (its file held open in ``held``)."""
    path = os.path.join(d, "cgroup.procs")
    data = held.read_whole(path) if held is not None else read_bytes(path)
    out = []
    for line in (data or b"").split():
        if line.isdigit():
            out.append(int(line))
    return tuple(out)


def walk(top: str, max_cgroups: int = 10000) -> Iterator[tuple[str, str]]:
    """(cgroup path, directory) of every cgroup under mount ``top``, parents before children,
    at most ``max_cgroups``; symlinks are never followed (cgroupfs has none)."""
    stack = [("/", top)]
    n = 0
    while stack and n < max_cgroups:
        path, d = stack.pop()
        yield path, d
        n += 1
        try:
            # a directory's links are 2 + its subdirectories on kernfs (as on ext4 and tmpfs;
            # btrfs and merged overlayfs directories say 1): at 2 it has none, and its listing
            # (a memcg's ~30 files, for each of 500 leaf cgroups) is not read
            if os.lstat(d).st_nlink == 2:
                continue
            with os.scandir(d) as it:
                subs = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
        for name in reversed(subs):
            stack.append(((path.rstrip("/") + "/" + name), os.path.join(d, name)))


def cgroup_id(d: str) -> int | None:
    """A cgroup2 directory's id as BPF's bpf_get_current_cgroup_id() gives it: its inode."""
    try:
        return os.stat(d, follow_symlinks=False).st_ino
    except OSError:
        return None


def parent(path: str) -> str:
    """The parent of cgroup ``path`` ("/" for the root's children and the root). A path that does
    not start with "/" (a recording may hold any string) is taken as a child of the root, so a
    walk up from any string ends at "/"."""
    if not path.startswith("/"):
        return "/"
    return path.rsplit("/", 1)[0] or "/"


def proc_cgroups(text: str) -> dict[str, str]:
    """/proc/PID/cgroup as {controller or "unified": path}; v1 lines list their controllers
    (``4:memory:/a``), the cgroup2 line has none (``0::/a``)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, ctl, path = parts
        if not ctl:
            out["unified"] = path
        for c in ctl.split(","):
            if c:
                out[c] = path
    return out


# -- containers and pods, from the cgroup path alone ---------------------------------------------

_ID = r"[0-9a-f]{64}"
_CONTAINER_PATTERNS = (
    ("docker", re.compile(rf"(?:^|/)docker-({_ID})\.scope$")),
    ("docker", re.compile(rf"(?:^|/)docker/({_ID})$")),
    ("containerd", re.compile(rf"(?:^|/)cri-containerd-({_ID})\.scope$")),
    ("crio", re.compile(rf"(?:^|/)crio-({_ID})\.scope$")),
    ("crio", re.compile(rf"(?:^|/)crio-({_ID})$")),
    ("podman", re.compile(rf"(?:^|/)libpod-({_ID})\.scope$")),
    ("podman", re.compile(rf"(?:^|/)libpod-({_ID})$")),
)
# kubepods under the systemd driver: kubepods-burstable-pod<uid with _>.slice; cgroupfs:
# kubepods/burstable/pod<uid>
_POD = re.compile(
    r"(?:^|/)kubepods(?:[-/][a-z]+)*[-/]pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?(?:/|$)"
)
# a container directly under a cgroupfs-driver pod: kubepods/.../pod<uid>/<64 hex>
_POD_CHILD = re.compile(rf"/pod[0-9a-f-]{{36}}/({_ID})$")


@dataclass(frozen=True)
class Container:
    runtime: str  # "docker" | "containerd" | "crio" | "podman" | "kubernetes" | ""
    id: str  # the container's full id ("" for a pod's own cgroup)
    pod_uid: str = ""
    #: the name from the runtime's files, where they could be read ("" otherwise)
    name: str = ""
    pod: str = ""  # "namespace/pod" where known
    image: str = ""  # the image it runs, where the runtime's files say

    def short(self) -> str:
        """What a narrow column shows: the name, else the runtime and a 12-char id, else the pod."""
        if self.name:
            return self.name
        if self.id:
            return f"{self.runtime}:{self.id[:12]}"
        return f"pod:{self.pod or self.pod_uid}"


def container_of(path: str) -> Container | None:
    """The container or pod a cgroup path belongs to, from its name alone (no runtime API)."""
    pod_uid = ""
    m = _POD.search(path)
    if m:
        pod_uid = m.group(1).replace("_", "-")
    for runtime, pattern in _CONTAINER_PATTERNS:
        cm = pattern.search(path)
        if cm:
            return Container(runtime, cm.group(1), pod_uid)
    cm = _POD_CHILD.search(path)
    if cm and pod_uid:
        return Container("kubernetes", cm.group(1), pod_uid)
    if pod_uid:
        return Container("kubernetes", "", pod_uid)
    return None


def unit_of(path: str) -> str:
    """The systemd unit a cgroup path ends in (``sshd.service``, ``user-1000.slice``), or ""."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return last if last.endswith((".service", ".scope", ".slice", ".socket", ".mount")) else ""


@dataclass
class RuntimeNames:
    """Container and pod names from the runtimes' own files, where readable; looked up once per
    container id and cached (a bounded cache: ids are forgotten in insertion order)."""

    root: str = "/"
    max_entries: int = 4096
    _cache: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    _pods: dict[str, str] | None = None
    #: containers/storage's index (podman, CRI-O): id -> (name, image), and the (mtime, size) of
    #: the file it was parsed from, so a new container re-reads it once, not once per container
    _storage: dict[str, tuple[str, str]] = field(default_factory=dict)
    _storage_stamp: tuple[int, int] | None = None

    def _p(self, *parts: str) -> str:
        return os.path.join(self.root, *[p.lstrip("/") for p in parts])

    def pods(self) -> dict[str, str]:
        """pod uid -> "namespace/name" from /var/log/pods/<ns>_<pod>_<uid> (kubelet's layout)."""
        if self._pods is None:
            out: dict[str, str] = {}
            try:
                with os.scandir(self._p("/var/log/pods")) as it:
                    for e in it:
                        parts = e.name.split("_")
                        if len(parts) == 3 and e.is_dir(follow_symlinks=False):
                            out[parts[2]] = f"{parts[0]}/{parts[1]}"
            except OSError:
                pass
            self._pods = out
        return self._pods

    def storage(self) -> dict[str, tuple[str, str]]:
        """Container id -> (name, image) from containers/storage's ``containers.json`` (podman's
        and CRI-O's store: podman's OCI config does not carry the name). Read as read_text reads
        (no symlink, a regular file, bounded), parsed again only when the file changed."""
        import json

        path = self._p("/var/lib/containers/storage/overlay-containers/containers.json")
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return self._storage
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._storage_stamp:
            return self._storage
        self._storage_stamp = stamp
        out: dict[str, tuple[str, str]] = {}
        text = read_text(path, MAX_STORAGE_INDEX)
        try:
            doc = json.loads(text) if text is not None else []
        except ValueError:
            doc = []
        for entry in doc if isinstance(doc, list) else []:
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                continue
            names = entry.get("names")
            name = names[0] if isinstance(names, list) and names and isinstance(names[0], str) else ""
            image = ""
            try:
                meta = json.loads(entry.get("metadata") or "{}")
            except (TypeError, ValueError):
                meta = {}
            if isinstance(meta, dict):
                name = name or str(meta.get("name") or "")
                image = str(meta.get("image-name") or "")
            out[entry["id"]] = (name, image)
        self._storage = out
        return out

    def name(self, c: Container) -> Container:
        """``c`` with its name, pod and image filled in where the runtime's files say."""
        import json

        if c.id and c.id not in self._cache:
            name = pod = image = ""
            candidates = []
            if c.runtime == "docker":
                candidates.append((self._p("/var/lib/docker/containers", c.id, "config.v2.json"), "docker"))
            if c.runtime in ("containerd", "kubernetes"):
                base = self._p("/run/containerd/io.containerd.runtime.v2.task")
                try:
                    with os.scandir(base) as it:
                        namespaces = [e.name for e in it if e.is_dir(follow_symlinks=False)]
                except OSError:
                    namespaces = []
                for ns in namespaces:
                    candidates.append((os.path.join(base, ns, c.id, "config.json"), "oci"))
            if c.runtime in ("crio", "podman", "kubernetes"):
                candidates.append(
                    (
                        self._p("/run/containers/storage/overlay-containers", c.id, "userdata/config.json"),
                        "oci",
                    )
                )
                candidates.append(
                    (
                        self._p(
                            "/var/lib/containers/storage/overlay-containers", c.id, "userdata/config.json"
                        ),
                        "oci",
                    )
                )
            for path, kind in candidates:
                text = read_text(path)
                if text is None:
                    continue
                try:
                    doc = json.loads(text)
                except ValueError:
                    continue
                if not isinstance(doc, dict):
                    continue
                if kind == "docker":
                    name = str(doc.get("Name", "")).lstrip("/")
                    config = doc.get("Config")
                    image = str(config.get("Image") or "") if isinstance(config, dict) else ""
                else:
                    ann = doc.get("annotations")
                    ann = ann if isinstance(ann, dict) else {}
                    name = str(
                        ann.get("io.kubernetes.cri.container-name")
                        or ann.get("io.kubernetes.container.name")
                        or ann.get("io.podman.annotations.name")
                        or ""
                    )
                    pod_ns = ann.get("io.kubernetes.cri.sandbox-namespace") or ann.get(
                        "io.kubernetes.pod.namespace"
                    )
                    pod_name = ann.get("io.kubernetes.cri.sandbox-name") or ann.get("io.kubernetes.pod.name")
                    if pod_ns and pod_name:
                        pod = f"{pod_ns}/{pod_name}"
                    image = str(
                        ann.get("io.kubernetes.cri.image-name")
                        or ann.get("io.kubernetes.cri-o.ImageName")
                        or ""
                    )
                if name:
                    break
            if c.runtime in ("crio", "podman") and (not name or not image):
                stored_name, stored_image = self.storage().get(c.id, ("", ""))
                # CRI-O's stored name is its own (k8s_...): a Kubernetes name from the config wins
                name, image = name or stored_name, image or stored_image
            from memtop.core.text import clean

            if len(self._cache) >= self.max_entries:
                self._cache.pop(next(iter(self._cache)))
            self._cache[c.id] = (clean(name, 128), clean(pod, 256), clean(image, 256))
        name, pod, image = self._cache.get(c.id, ("", "", ""))
        if not pod and c.pod_uid:
            pod = self.pods().get(c.pod_uid, "")
        return Container(c.runtime, c.id, c.pod_uid, name, pod, image)


def short_path(path: str | None) -> str:
    """A cgroup path for a narrow column: a container as runtime:id12 (with its pod's cgroup
    dropped), a long path as its last two components."""
    if path is None:
        return "-"
    c = container_of(path)
    if c is not None:
        return c.short()
    parts = [p for p in path.split("/") if p]
    if len(parts) <= 2:
        return path
    return "…/" + "/".join(parts[-2:])
