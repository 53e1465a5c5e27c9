"""The cgroups probe: every cgroup's memory figures from cgroupfs (no BPF), over v1, v2 and hybrid
layouts (memtop.linux.cgroupfs).

At most ``max_cgroups`` are read. Past that, a walk lists up to WALK_FACTOR times as many to know
what it leaves out, and keeps the root and the largest (memory usage, then the shallowest): a
parent's usage includes its children's, so every cgroup kept has its parent kept and the tree's
totals stay whole; what goes are the smallest, the empty ones deepest first. How many are left out
is said (``CgroupPoll.over_limit``) and counted (a ``Lost`` record: "cgroups over limit", each
cgroup once each time it is left out).

Each tick reads, per cgroup, what moves: its usage, its processes (when the usage moved and a task
was created or exited on the machine since they were read: ``CgroupsProbe._count_tasks``) and,
where PSI is on, its
memory.pressure when its parent's PSI totals moved (a stall is charged to every ancestor:
``CgroupsProbe._pressure``). The rest (limits, events, memory.stat) is read when the usage or the pressure
moved (a cgroup pinned at its limit stalls: its PSI moves while its usage may not), when the
cgroup is new, and every ``full_every`` ticks otherwise, spread over the ticks (a limit can change
with no usage change). The files read every tick are held open and re-read with pread. An idle
cgroup under an idle parent costs one pread a tick, and at a walk one read of its cgroup.procs
(who is in it may change with nothing charged): its sample is kept when that lists the same
processes. A sample is sent only when something in it changed.
"""

from __future__ import annotations

import os
import time
import zlib

from memtop.core.errors import ProbeError
from memtop.linux import cgroupfs, kernelfs
from memtop.probes.base import Probe
from memtop.records import Lost, Record
from memtop.records.cgroups import CgroupGone, CgroupLayout, CgroupLruGen, CgroupPoll, CgroupSample

#: past ``max_cgroups`` a walk lists up to this many times as many directories, to rank them and
#: count what is left out (beyond, the count of those left out is a lower bound)
WALK_FACTOR = 4
PAGE = kernelfs.PAGE
OVER_LIMIT = "cgroups over limit"
#: at most this many files of full reads held open (64 cgroups' worth on v1, the busiest)
FULL_HELD_MAX = 576
#: how often MGLRU's debugfs lru_gen is read, at most: the kernel walks every memcg and node to
#: print it, and its ages move in seconds
LRU_GEN_EVERY_NS = 5_000_000_000


#: where the host's files are mounted when memtop runs in a container ("/" on the host)
HOST_ROOT_ENV = "MEMTOP_HOST_ROOT"


#: a cgroup's figures as a read makes them: eight sizes (None where the file is missing), events, stat
Figures = tuple[
    int | None,
    int | None,
    int | None,
    int | None,
    int | None,
    int | None,
    int | None,
    int | None,
    tuple[tuple[str, int], ...],
    tuple[tuple[str, int], ...],
]


def _figures(prev: CgroupSample) -> Figures:
    """A sample's figures in the order a read makes them (the poll compares the two)."""
    return (
        prev.usage_bytes,
        prev.limit_bytes,
        prev.high_bytes,
        prev.low_bytes,
        prev.min_bytes,
        prev.soft_limit_bytes,
        prev.swap_bytes,
        prev.swap_limit_bytes,
        prev.events,
        prev.stat,
    )


def _same(
    prev: CgroupSample,
    version: int,
    fig: tuple[object, ...],
    psi: tuple[int, int | None] | None,
    pids: tuple[int, ...],
    upids: tuple[int, ...],
    cid: int | None,
    container: tuple[object, str],
) -> bool:
    """Whether a sample of these figures would equal ``prev``."""
    return (
        fig == _figures(prev)
        and version == prev.version
        and (psi[0] if psi else None, psi[1] if psi else None) == (prev.psi_some_us, prev.psi_full_us)
        and pids == prev.pids
        and upids == prev.unified_pids
        and cid == prev.cgroup_id
        and container == (prev.container, prev.image)
    )


class CgroupsProbe(Probe):
    name = "cgroups"
    needs_bpf = False
    #: who is in each cgroup2 directory of a hybrid machine (its ``cgroup.procs``, read at each
    #: walk: 500 cgroups, 500 files more every walk): the OOM pane's PSI of a killed process's
    #: cgroup; the exporter's figures come from the memory controller's members
    optional_parts = ("unified_pids",)

    def __init__(
        self,
        proc_root: str = "/proc",
        max_cgroups: int = 5000,
        full_every: int = 30,
        walk_every: int = 5,
        runtime_root: str = "/",
        sys_root: str = "/sys",
    ) -> None:
        self.proc_root = proc_root
        self.sys_root = sys_root
        #: when lru_gen was last read (monotonic ns; None: never), and whether the last read gave ages
        self._lru_gen_ns: int | None = None
        self._lru_gen_sent = False
        #: the kernel has no MGLRU (found at load): ``lru_gen/enabled`` is not looked for again
        self._no_lru_gen = False
        self.max_cgroups = max_cgroups
        self.full_every = full_every
        self.walk_every = walk_every
        self._mem_dirs: dict[str, str] = {}
        self._uni_dirs: dict[str, str] = {}
        self.layout: cgroupfs.Layout | None = None
        self._last: dict[str, CgroupSample] = {}
        self._ids: dict[str, int] = {}
        #: per path: the container tuple of its samples and the image it runs
        self._containers: dict[str, tuple[tuple[str, str, str, str, str] | None, str]] = {}
        self._names = cgroupfs.RuntimeNames(runtime_root)
        self._tick = 0
        self._sent_layout = False
        #: every cgroup's usage and pressure files, held open (memtop.linux.cgroupfs.HeldFiles)
        self._held = cgroupfs.HeldFiles()
        #: their cgroup.procs on cgroup2, read at each walk and when the usage moved, held apart:
        #: past its limit they are opened per read, never in the place of a usage or pressure
        #: file. Not on v1, whose cgroup.procs an open file reads from a list the kernel keeps
        #: for a second after each read (kernel/cgroup/cgroup-v1.c cgroup_pidlist_start() finds
        #: it again, cgroup_pidlist_stop() frees it CGROUP_PIDLIST_DESTROY_DELAY later): a held
        #: one could read members a second old; a file opened anew builds the list anew
        self._procs_held = cgroupfs.HeldFiles(max_open=1024)
        #: the files of a full read (limits, events, memory.stat: 7-9 a cgroup) of the cgroups
        #: whose usage or pressure moved twice within ``full_every`` polls, held open while they
        #: keep moving: those are read at each move (an open, fstat, two reads and a close of a
        #: v1 limit file 7.9 µs of CPU, a pread of it held 0.9; memory.stat 14 against 7), while
        #: holding every cgroup's would hold 4,500 files with 500 cgroups, most of them read once
        #: in ``full_every`` ticks
        self._full_held = cgroupfs.HeldFiles(max_open=FULL_HELD_MAX)
        #: per cgroup whose usage or pressure moved: the tick it last did
        self._moved_at: dict[str, int] = {}
        #: moves on at each poll that finds a task created or exited on the machine since the
        #: last (:meth:`_count_tasks`); per memory cgroup directory, its value when that cgroup's
        #: members were last read: a cgroup's members change by a fork, an exit or a move into
        #: it, and only those change the members (v1 cgroup.procs builds the whole sorted list
        #: of pids at each read: 0.43 ms of CPU for a cgroup of 1,000 sleepers, at every tick
        #: its usage moved)
        self._task_epoch = 0
        self._tasks: tuple[str, str] | None = None
        self._members_at: dict[str, int] = {}
        self._loadavg = cgroupfs.HeldFiles(max_open=1) if proc_root == "/proc" else None
        self._loadavg_path = os.path.join(proc_root, "loadavg")
        #: the layout is the machine's, found by load() (a fixture tree's members move with no
        #: task created: the epoch moves at every poll there)
        self._real_tree = False
        #: per cgroup: (memory dir, cgroup2 dir, usage file, pressure file, a spread for full
        #: reads, its parent's path)
        self._files: dict[str, tuple[str | None, str | None, str | None, str | None, int, str]] = {}
        #: per cgroup: the usage and pressure text read last tick (unchanged: nothing to parse)
        self._raw: dict[str, tuple[str | None, str | None]] = {}
        #: the cgroups another read cgroup is the child of (their PSI totals are compared from
        #: poll to poll, :meth:`_pressure`), as of the last walk
        self._parents: set[str] = set()
        #: per parent: its PSI totals (some, full µs) at the last poll
        self._psi_totals: dict[str, tuple[int, int] | None] = {}
        #: the cgroups whose pressure text stands for their totals at or after their parent's
        #: reading in the same poll (read after it, or kept while it did not move)
        self._psi_after_parent: set[str] = set()
        #: cgroups the last walk found past ``max_cgroups`` and left out; how many times one was
        self._left_out: set[str] = set()
        self._left_out_total = 0
        #: the last poll's count record
        self._poll_rec: CgroupPoll | None = None

    @classmethod
    def at_start(cls, proc_root: str | os.PathLike[str]) -> CgroupsProbe:
        # in a container, the host's runtime files (container and pod names) are mounted below
        # $MEMTOP_HOST_ROOT (contrib/kubernetes mounts them at /host)
        return cls(str(proc_root), runtime_root=os.environ.get(HOST_ROOT_ENV) or "/")

    def load(self) -> None:
        self.layout = cgroupfs.layout(self.proc_root)
        self._real_tree = True
        # sysfs's mm directory without lru_gen: a kernel built without MGLRU, which cannot gain
        # it (CONFIG_LRU_GEN is built in, never a module: mm/vmscan.c init_lru_gen() makes the
        # directory at boot), so its enabled file is not opened again every LRU_GEN_EVERY_NS
        # only to be missing (no record was ever sent for it: _lru_gen says nothing then)
        mm = os.path.join(self.sys_root, "kernel", "mm")
        self._no_lru_gen = os.path.isdir(mm) and not os.path.lexists(os.path.join(mm, "lru_gen"))
        if self.layout.mode == "none":
            raise ProbeError(
                "no cgroup hierarchy is mounted (/proc/self/mountinfo lists none)",
                "mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup) or the v1 memory controller",
            )

    def close(self) -> None:
        self._held.close()
        self._procs_held.close()
        self._full_held.close()
        if self._loadavg is not None:
            self._loadavg.close()

    def _at_walk(
        self,
        prev: CgroupSample,
        mdir: str | None,
        udir: str | None,
        mem: cgroupfs.Hierarchy | None,
    ) -> tuple[CgroupSample | None, tuple[int, ...] | None]:
        """At a walk, of a cgroup whose usage and pressure read as before with no full read due:
        its last sample when who is in it did not move either, and the members read to tell
        (None when not read)."""
        if mdir is None or (udir is not None and udir != mdir and self.reads("unified_pids")):
            return None, None
        # only who is in it may have moved (a process moved in or out takes no charge along on
        # v2, nor on v1 by default)
        pids = self._members(mdir, mem)
        return (prev if pids == prev.pids else None), pids

    def _pids(
        self, prev: CgroupSample | None, read: bool, mdir: str, mem: cgroupfs.Hierarchy | None
    ) -> tuple[int, ...]:
        """Who is in the memory cgroup: read when ``read`` (a walk, or its usage moved and a task
        was created or exited on the machine since it was last read) or new."""
        return prev.pids if prev is not None and not read else self._members(mdir, mem)

    def _members(self, mdir: str, mem: cgroupfs.Hierarchy | None) -> tuple[int, ...]:
        """Who is in the memory cgroup at ``mdir`` (its cgroup.procs held on cgroup2)."""
        self._members_at[mdir] = self._task_epoch
        return cgroupfs.read_procs(mdir, self._procs_held if mem is not None and mem.version == 2 else None)

    def _tasks_moved(self, mdir: str) -> bool:
        """Whether a task was created or exited on the machine since ``mdir``'s members were
        last read (True when that cannot be told)."""
        return self._members_at.get(mdir) != self._task_epoch

    def _count_tasks(self) -> None:
        """Move the task epoch on when /proc/loadavg says a task was created or exited since the
        last poll: its fourth field ends with the number of tasks (threads) on the machine and
        its fifth is the last pid handed out in memtop's pid namespace (fs/proc/loadavg.c). A
        task created moves the last pid (a pid is allocated in each namespace up to the root,
        so also for one in a namespace below memtop's); with none created, one that exited
        moves the count down. Unreadable (a fixture root): the epoch moves at every poll."""
        text = None
        if self._loadavg is not None and self._real_tree:
            text = self._loadavg.read(self._loadavg_path, 256)
        fields = text.split() if text else []
        now = (fields[3].rpartition("/")[2], fields[4]) if len(fields) >= 5 else None
        if now is None or now != self._tasks:
            self._task_epoch += 1
        self._tasks = now

    def _drop_under(self, directory: str) -> None:
        """Close the held files of a cgroup that went away."""
        self._held.drop_under(directory)
        self._procs_held.drop_under(directory)
        self._full_held.drop_under(directory)
        self._members_at.pop(directory, None)

    def note(self) -> str:
        return self.layout.mode if self.layout is not None else ""

    def _walk(self, mem: cgroupfs.Hierarchy | None, uni: cgroupfs.Hierarchy | None) -> None:
        """List the trees (the memory controller's, and the cgroup2 tree for PSI when it is
        another: hybrid) and keep what the limit allows."""
        cap = self.max_cgroups * WALK_FACTOR
        mem_all = dict(cgroupfs.walk(mem.mountpoint, cap)) if mem else {}
        if uni is not None and uni is mem:
            uni_all = mem_all
        else:
            uni_all = dict(cgroupfs.walk(uni.mountpoint, cap)) if uni else {}
        self._mem_dirs, self._uni_dirs = self._within_limit(mem_all, uni_all)

    def _unified(
        self, path: str, mdir: str | None, udir: str | None, walk_tick: bool, prev: CgroupSample | None
    ) -> tuple[tuple[int, ...], int]:
        """Who is in the cgroup's cgroup2 directory when it is another than the memory one (read at
        each walk), and the cgroup2 id (read once)."""
        if udir is not None and udir != mdir and self.reads("unified_pids"):
            upids = cgroupfs.read_procs(udir) if walk_tick or prev is None else prev.unified_pids
        else:
            upids = ()
        cid = 0
        if udir is not None:
            cid = self._ids.get(path) or cgroupfs.cgroup_id(udir) or 0
            self._ids[path] = cid
        return upids, cid

    def poll_failed(self) -> None:
        """The next poll walks the trees again: the listing of the last walk may name the cgroup
        that made this one fail (removed since), and the walk runs only every ``walk_every``
        polls, which a failing probe's backoff spaces out to minutes."""
        self._tick = -1  # the next poll's tick is 0: a walk tick

    def _container(self, path: str) -> tuple[tuple[str, str, str, str, str] | None, str]:
        if path not in self._containers:
            c = cgroupfs.container_of(path)
            if c is not None:
                c = self._names.name(c)
            self._containers[path] = (
                (c.runtime, c.id, c.pod_uid, c.name, c.pod) if c else None,
                c.image if c else "",
            )
        return self._containers[path]

    def poll(self) -> list[Record]:
        lay = self.layout
        if lay is None:
            return []
        out: list[Record] = []
        if not self._sent_layout:
            out.append(layout_record(lay))
            self._sent_layout = True
        self._tick += 1
        self._count_tasks()
        mem, uni = lay.memory, lay.unified
        # the trees are walked every ``walk_every`` ticks (a new cgroup shows within that; listing
        # every directory of 500 cgroups cost more than reading their usage); a cgroup removed in
        # between is noticed at once, as its files are gone
        walk_tick = self._tick == 1 or self._tick % self.walk_every == 0
        if walk_tick:
            self._walk(mem, uni)
        mem_dirs, uni_dirs = self._mem_dirs, self._uni_dirs
        paths = list(mem_dirs) + [p for p in uni_dirs if p not in mem_dirs]
        if walk_tick:
            self._parents = {cgroupfs.parent(p) for p in paths if p != "/"}
        #: per cgroup with children whose pressure was had this poll: whether its totals moved
        psi_moved: dict[str, bool] = {}
        last = self._last
        now: dict[str, CgroupSample] = {}
        files = self._files
        raw_last, raw_now = self._raw, {}
        held, tick, full_every = self._held, self._tick, self.full_every
        for path in paths[: self.max_cgroups]:
            f = files.get(path)
            if f is None or walk_tick:
                mdir, udir = mem_dirs.get(path), uni_dirs.get(path)
                if f is None or f[0] != mdir or f[1] != udir:
                    f = files[path] = cgroup_files(path, mdir, udir, mem, lay.psi)
            else:
                # the directories change only at a walk (a cgroup gone since is not listed)
                mdir, udir = f[0], f[1]
            usage_text = held.read(f[2]) if f[2] is not None else None
            full = (tick + f[4]) % full_every == 0
            before = raw_last.get(path)
            psi_text = self._pressure(path, f[5], f[3], full, before[1] if before else None, psi_moved)
            prev = last.get(path)
            raw_now[path] = raw = (usage_text, psi_text)
            walk_pids = None
            if prev is not None and not full and unchanged(before, raw):
                if not walk_tick:
                    now[path] = prev  # nothing moved since the last tick: the common case, kept cheap
                    continue
                stands, walk_pids = self._at_walk(prev, mdir, udir, mem)
                if stands is not None:
                    now[path] = stands
                    continue
            psi = cgroupfs.parse_pressure(psi_text) if psi_text is not None else None
            if mdir is not None and mem is not None:
                version = mem.version
                usage = cgroupfs.parse_int(usage_text)
                if usage is None and path != "/" and not os.path.isdir(mdir):
                    self._drop_under(mdir)
                    continue  # removed since the last walk
                # who is in it: at each walk, and when its usage moved (new members charge pages)
                # if a task was created or exited since it was read (a process that moved in
                # without one, as into a cgroup whose usage holds still, shows at the next walk)
                moved = prev is None or usage != prev.usage_bytes
                read = walk_tick or (moved and self._tasks_moved(mdir))
                pids = walk_pids if walk_pids is not None else self._pids(prev, read, mdir, mem)
                stalled = psi is not None and prev is not None and psi[0] != prev.psi_some_us
                if prev is None or usage != prev.usage_bytes or stalled or full or prev.version != version:
                    r = cgroupfs.read_memory(
                        version,
                        mdir,
                        self._held_for(path, prev is not None and (moved or stalled)),
                        usage_text,
                    )
                    r.usage_bytes = usage
                    fig = (
                        r.usage_bytes,
                        r.limit_bytes,
                        r.high_bytes,
                        r.low_bytes,
                        r.min_bytes,
                        r.soft_limit_bytes,
                        r.swap_bytes,
                        r.swap_limit_bytes,
                        tuple(sorted(r.events.items())),
                        tuple(sorted(r.stat.items())),
                    )
                else:
                    same_psi = (prev.psi_some_us, prev.psi_full_us) == (psi if psi else (None, None))
                    if same_psi and pids is prev.pids and not walk_tick:
                        now[path] = prev  # nothing moved: the common case, kept cheap
                        continue
                    fig = _figures(prev)
            else:
                if psi is None and udir is not None and not os.path.isdir(udir):
                    self._drop_under(udir)
                    continue  # removed since the last walk
                version, pids = 0, ()
                fig = (None, None, None, None, None, None, None, None, (), ())
            upids, cid = self._unified(path, mdir, udir, walk_tick, prev)
            if prev is not None and _same(prev, version, fig, psi, pids, upids, cid, self._container(path)):
                # a walk's or a full read's figures as they were: the same sample object, which
                # the state and the exporter take as nothing to redo (no record made and checked)
                now[path] = prev
                continue
            sample = CgroupSample(
                path=path,
                version=version,
                usage_bytes=fig[0],
                limit_bytes=fig[1],
                high_bytes=fig[2],
                low_bytes=fig[3],
                min_bytes=fig[4],
                soft_limit_bytes=fig[5],
                swap_bytes=fig[6],
                swap_limit_bytes=fig[7],
                events=fig[8],
                stat=fig[9],
                psi_some_us=psi[0] if psi else None,
                psi_full_us=psi[1] if psi else None,
                pids=pids,
                unified_pids=upids,
                cgroup_id=cid,
                container=self._container(path)[0],
                image=self._container(path)[1],
            )
            now[path] = sample
            if sample != prev:
                out.append(sample)
        out.extend(self._gone(last, now, mem, uni))
        self._finish(now, raw_now, walk_tick, out)
        return out

    def _finish(
        self,
        now: dict[str, CgroupSample],
        raw_now: dict[str, tuple[str | None, str | None]],
        walk_tick: bool,
        out: list[Record],
    ) -> None:
        """A poll's end: what it read kept for the next, what went forgotten, and the poll's
        own records (MGLRU's ages, the count, the cgroups left out) added to ``out``."""
        self._last = now
        self._raw = raw_now
        self._psi_after_parent.intersection_update(now)
        if walk_tick:
            self._psi_totals = {p: t for p, t in self._psi_totals.items() if p in self._parents}
        files = self._files
        for path in [p for p in files if p not in now]:
            del files[path]
        self._release_quiet(now)
        lru = self._lru_gen(now)
        if lru is not None:
            out.append(lru)
        count = (len(now), len(self._left_out), self.max_cgroups)
        poll = self._poll_rec
        if poll is None or (poll.cgroups, poll.over_limit, poll.max_cgroups) != count:
            # made again only when a figure of it moved (most ticks send the same one)
            poll = self._poll_rec = CgroupPoll(count[0], over_limit=count[1], max_cgroups=count[2])
        out.append(poll)
        if self._left_out_total:
            out.append(Lost(self.name, OVER_LIMIT, self._left_out_total))

    def _held_for(self, path: str, moving: bool) -> cgroupfs.HeldFiles | None:
        """Where a full read of ``path`` finds its files: held open when its usage or pressure
        moved this poll and at another within the last ``full_every`` (it is read in full at
        each tick it moves: a cgroup that moves at every tick, or every other, is read as often
        as a held file pays), opened for the read otherwise (a first move, a spread full read
        of a quiet cgroup)."""
        before = self._moved_at.get(path)
        if moving:
            self._moved_at[path] = self._tick
        return self._full_held if before is not None else None

    def _release_quiet(self, now: dict[str, CgroupSample]) -> None:
        """Close the full read's files of the cgroups that stopped moving ``full_every`` ticks
        ago (or went): their next full read is the spread one, once in ``full_every`` ticks."""
        if not self._moved_at:
            return
        since = self._tick - self.full_every
        for path in [p for p, t in self._moved_at.items() if t <= since or p not in now]:
            del self._moved_at[path]
            mdir = self._mem_dirs.get(path)
            if mdir is not None:
                self._full_held.drop_under(mdir)

    def _pressure(
        self, path: str, up: str, file: str | None, full: bool, last: str | None, moved: dict[str, bool]
    ) -> str | None:
        """The cgroup's memory.pressure text: read, or the last poll's when its parent's PSI
        totals did not move since the last poll (``moved``: this poll's answer of each parent
        had before its children, as the walk lists parents first).

        The kernel charges a stall to the task's cgroup and to every ancestor up to the root
        (kernel/sched/psi.c: psi_task_change() and psi_task_switch() call psi_group_change()
        for ``group`` and each ``group->parent``), and a reading (psi_show() ->
        collect_percpu_times()) counts up to the moment it is made: a parent whose totals did
        not move between two polls had no stall anywhere below it in between, so a child read
        after its parent in the last poll still reads what it read then. The parent's totals are
        shown in µs and weighted over its CPUs: a stall of less than a microsecond below it may
        not move them, so every cgroup's file is still read at its full read (``full_every``).
        A parent whose file cannot be read (PSI switched off there, cgroup.pressure 0: the
        kernel hides the files and stops counting for it) moves nothing: its children are read.
        With 500 idle cgroups this is 500 reads (and the kernel's text of each) less a tick."""
        if file is None:
            return None
        after = self._psi_after_parent
        if not full and last is not None and up != path and moved.get(up) is False and path in after:
            text: str | None = last
        else:
            text = self._held.read(file)
            if up != path and up in moved:
                after.add(path)
            else:
                after.discard(path)
        if path in self._parents:
            if text is not None and text == last:
                moved[path] = False
            else:
                totals = cgroupfs.parse_pressure(text) if text is not None else None
                moved[path] = totals is None or totals != self._psi_totals.get(path)
                self._psi_totals[path] = totals
        return text

    def _gone(
        self,
        last: dict[str, CgroupSample],
        now: dict[str, CgroupSample],
        mem: cgroupfs.Hierarchy | None,
        uni: cgroupfs.Hierarchy | None,
    ) -> list[CgroupGone]:
        """The cgroups read last poll and not this one, forgotten."""
        out: list[CgroupGone] = []
        for path in last:
            if path not in now:
                out.append(CgroupGone(path))
                self._mem_dirs.pop(path, None)
                self._uni_dirs.pop(path, None)
                for h in (mem, uni):
                    if h is not None:
                        self._drop_under(h.dir(path))
                self._ids.pop(path, None)
                self._containers.pop(path, None)
        return out

    def _lru_gen(self, now: dict[str, CgroupSample]) -> CgroupLruGen | None:
        """MGLRU's ages of the memory cgroups read this poll, every LRU_GEN_EVERY_NS at most, where
        ``lru_gen/enabled`` says MGLRU is on and debugfs (mounted by someone else: memtop never
        mounts it) has the ``lru_gen`` file. A record saying why not when the ages it sent before
        can no longer be read, so none outlives its reading."""
        if self._no_lru_gen:
            return None
        t = time.monotonic_ns()
        if self._lru_gen_ns is not None and t - self._lru_gen_ns < LRU_GEN_EVERY_NS:
            return None
        self._lru_gen_ns = t
        _text, on = kernelfs.lru_gen_enabled(self.sys_root)
        if not on:
            why = "MGLRU is off (lru_gen/enabled)"
            ages = None
        else:
            mountinfo = cgroupfs.read_text(
                os.path.join(self.proc_root, "self", "mountinfo"), errors="surrogateescape"
            )
            debugfs = kernelfs.debugfs_mount(mountinfo)
            if debugfs is None:
                ages, why = None, "debugfs is not mounted"
            else:
                ages, why = kernelfs.read_lru_gen(debugfs)
        if ages is None:
            if not self._lru_gen_sent and not on:
                return None  # no MGLRU here: nothing to say per tick
            self._lru_gen_sent = False
            return CgroupLruGen((), why)
        self._lru_gen_sent = True
        memcgs = tuple(
            (path, tuple((age_ms * 1_000_000, anon * PAGE, file * PAGE) for age_ms, anon, file in gens))
            for path, gens in sorted(ages.items())
            if path in now and now[path].version  # cgroups it reads: the record stays bounded
        )
        return CgroupLruGen(memcgs)

    def _within_limit(
        self, mem_all: dict[str, str], uni_all: dict[str, str]
    ) -> tuple[dict[str, str], dict[str, str]]:
        """The walks' cgroups cut to ``max_cgroups``: the root, then the largest memory usage,
        then the shallowest (a cgroup2-only directory of a hybrid machine, with no usage, last).
        Ranking reads each one's usage once a walk, and only when there are too many."""
        paths = set(mem_all) | set(uni_all)
        if len(paths) <= self.max_cgroups:
            self._left_out = set()
            return mem_all, uni_all
        mem = self.layout.memory if self.layout is not None else None
        usage_file = "memory.current" if mem is not None and mem.version == 2 else "memory.usage_in_bytes"

        def rank(path: str) -> tuple[int, int, int, str]:
            if path == "/":
                return (0, 0, 0, path)
            d = mem_all.get(path)
            usage = cgroupfs.parse_int(cgroupfs.read_text(os.path.join(d, usage_file))) if d else None
            return (1 if usage is not None else 2, -(usage or 0), path.count("/"), path)

        kept = set(sorted(paths, key=rank)[: self.max_cgroups])
        left_out = paths - kept
        self._left_out_total += len(left_out - self._left_out)
        self._left_out = left_out
        return (
            {p: d for p, d in mem_all.items() if p in kept},
            {p: d for p, d in uni_all.items() if p in kept},
        )


def layout_record(lay: cgroupfs.Layout) -> CgroupLayout:
    """What the machine's cgroup layout is, as a record (sent once)."""
    return CgroupLayout(
        mode=lay.mode,
        memory_mount=lay.memory.mountpoint if lay.memory else "",
        memory_version=lay.memory.version if lay.memory else 0,
        unified_mount=lay.unified.mountpoint if lay.unified else "",
        psi=lay.psi,
        hierarchies=tuple((h.mountpoint, h.version, h.controllers) for h in lay.hierarchies),
    )


def cgroup_files(
    path: str, mdir: str | None, udir: str | None, mem: cgroupfs.Hierarchy | None, psi: bool
) -> tuple[str | None, str | None, str | None, str | None, int, str]:
    """A cgroup's directories, the files read every tick (usage, pressure), its place in the
    spread of full reads and its parent."""
    usage_file = (
        os.path.join(mdir, "memory.current" if mem.version == 2 else "memory.usage_in_bytes")
        if mdir is not None and mem is not None
        else None
    )
    psi_file = os.path.join(udir, "memory.pressure") if udir and psi else None
    # the path as the directory's name: a cgroup may be named with bytes that are not UTF-8 (os
    # gives them surrogate-escaped; a record shows them as \xff)
    spread = zlib.crc32(os.fsencode(path))
    return (mdir, udir, usage_file, psi_file, spread, cgroupfs.parent(path))


def unchanged(before: tuple[str | None, str | None] | None, now: tuple[str | None, str | None]) -> bool:
    """The usage and pressure files read the same as last tick (and the usage was readable)."""
    return before == now and now[0] is not None
