"""The kernel's own per-task accounting, read from /proc once per tick.

RSS split and fault counts are exact here and cost the traced system nothing, so no BPF program
runs on the fault path for them. To keep memtop cheap with thousands of processes:

- the short ``/proc/PID/stat`` line is read, and ``status`` only for processes whose stat moved;
- each stat file stays open and is re-read with ``pread`` (the kernel regenerates it at offset 0),
  which halves the kernel's cost of a read (no path walk, no open/close); a file of a process that
  exited fails with ESRCH, so a reused pid is never read through the old process's file;
- a *quiet* process (stat line unchanged for ``QUIET_AFTER`` reads: it has not run, faulted or
  changed RSS) with one thread is checked every tick by its ``/proc/PID/schedstat`` (held open,
  pread: a fifth of the kernel's cost of a stat read), and its stat is read only when that moved.
  Why that is exact: schedstat's first two fields are the task's ``se.sum_exec_runtime`` and
  ``sched_info.run_delay`` and the third ``sched_info.pcount``, the times it was put on a CPU
  (kernel/sched/stats.h sched_info_arrive(), fs/proc/base.c proc_pid_schedstat()); a task that
  has not been on a CPU has not faulted, exec'd, renamed itself (/proc/PID/comm is writable only
  by its own thread group: fs/proc/base.c comm_write()), mapped memory or made a thread, so of
  its stat line only the RSS can move (the kernel reclaims or swaps its pages: then
  ``/proc/vmstat`` shows it and every process is read) and the parent (its parent exited: the
  parent's pid leaves the listing, and its children are read on that tick). What is left (another
  process writing into it through ptrace or process_vm_writev, or paging it out with
  process_madvise) is caught by a read every ``BACKSTOP_TICKS`` ticks, staggered by pid. A process
  with several threads is read every tick (schedstat is its main thread's only). Where schedstat
  cannot tell (a fake /proc in tests, a kernel without CONFIG_SCHED_INFO: it reads "0 0 0"), a
  quiet process is read every ``quiet_every``-th tick, staggered by pid, and every process on a
  tick where ``/proc/vmstat`` shows reclaim; a long-idle process that wakes up then shows its
  first change up to ``quiet_every - 1`` ticks late. Exits are seen at once (the pid leaves the
  /proc listing);
- /proc is listed only when a task was created since the last poll (/proc/stat's ``processes``,
  the count of tasks the kernel created, read first: ``ProcfsProbe._forks``); otherwise the last
  listing's pids are read again, and one that exited since is found by its read failing and its
  directory gone (no pid can have come or been reused without a task created). Where schedstat
  cannot tell (the fallback above) every poll lists;
- a pid whose /proc/PID directory has another inode than when it was read is another process (the
  pid was reused between two listings: the kernel gives each process's directory an inode of its
  own), read at once however quiet; so a kernel thread, whose figures never change, is read once
  and not again while its directory stays (before, one in ``quiet_every`` ticks, only to notice a
  reused pid).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import re
import resource
import sys
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from pathlib import Path
from typing import Self, TypeVar, cast

from memtop.core.text import clean
from memtop.linux.cgroupfs import keyed_layout
from memtop.linux.kernelfs import parse_meminfo
from memtop.probes.base import Probe
from memtop.records import Record
from memtop.records.host import MemInfo, Pressure, VmStat
from memtop.records.processes import ProcSample

CLK_TCK = os.sysconf("SC_CLK_TCK")
R = TypeVar("R", bound=Record)

VMSTAT_PREFIXES = (
    "pgscan",
    "pgsteal",
    "pswp",
    "pgfault",
    "pgmajfault",
    "workingset_",
    "allocstall",
    "compact_",
    "kswapd_",
    "pageoutrun",
    "oom_kill",
    "pgrefill",
    "pgactivate",
    "pgdeactivate",
    "slabs_scanned",
    "pginodesteal",
    "zswp",
    "pgpgin",
    "pgpgout",
    "pgfree",
    "drop_",
    "thp_",
    "pgmigrate_",
    "numa_",
)

#: the lines of /proc/vmstat with one of those prefixes: (name, value), anchored on the newline
VMSTAT_LINES = re.compile(
    rb"\n((?:" + b"|".join(re.escape(p.encode()) for p in VMSTAT_PREFIXES) + rb")[^ \n]*) (\d+)"
)
#: the prefixes as bytes (``bytes.startswith``)
VMSTAT_PREFIXES_B = tuple(p.encode() for p in VMSTAT_PREFIXES)


def vmstat_layout(
    raw: bytes, found: list[tuple[bytes, bytes]]
) -> tuple[re.Pattern[bytes], list[bytes]] | None:
    """A pattern of this /proc/vmstat text's lines (the kernel prints the same names in the same
    order for its whole life: mm/vmstat.c vmstat_text) that a later text matches whole only when
    :data:`VMSTAT_LINES` would find in it the same names, in the same order, as ``found`` (its
    findall in ``raw``): each line of theirs ``name digits`` (its digits the group), each other
    line its name, a space and anything but a newline; the names captured. A later text it does
    not match is parsed by VMSTAT_LINES. None when ``raw`` is not such a text (a line of a
    prefix's name that VMSTAT_LINES did not take, a line without a space, no newline at the
    end): then every text is."""
    lines = raw.split(b"\n")
    if not lines or lines.pop() != b"":
        return None
    wanted = iter(found)
    nxt = next(wanted, None)
    parts: list[bytes] = []
    names: list[bytes] = []
    for line in lines:
        name, sep, _ = line.partition(b" ")
        if nxt is not None and name == nxt[0] and line == name + b" " + nxt[1]:
            parts.append(re.escape(name) + rb" ([0-9]+)\n")
            names.append(name)
            nxt = next(wanted, None)
        elif not sep or name.startswith(VMSTAT_PREFIXES_B):
            return None
        else:
            parts.append(re.escape(name) + rb" [^\n]*\n")
    if nxt is not None:
        return None
    return re.compile(b"".join(parts)), names


#: the /proc/meminfo figures a MemInfo is made of
MEMINFO_NAMES = (
    "MemTotal",
    "MemFree",
    "MemAvailable",
    "Buffers",
    "Cached",
    "SReclaimable",
    "SwapTotal",
    "SwapFree",
    "Shmem",
    "Slab",
    "Zswap",
    "Zswapped",
)
#: a meminfo line's name as the kernel prints them (fs/proc/meminfo.c: "Active(anon)", "DirectMap4k")
MEMINFO_NAME = re.compile(rb"[A-Za-z0-9_()]+")


def meminfo_layout(raw: bytes, wanted: tuple[str, ...]) -> tuple[re.Pattern[bytes], tuple[str, ...]] | None:
    """A pattern of this /proc/meminfo text's lines (cgroupfs.keyed_layout: the kernel prints
    the same lines in the same order for its life) that a later text matches whole only when
    parse_meminfo would give of it, for each name of ``wanted``, the figure its groups give: the
    last line of a wanted name its name, a colon, spaces, digits (a group) and " kB" or not (a
    group); every other line its name, a colon and printable ASCII or tabs to its newline. The
    wanted names it captures, in order; None when ``raw`` is not such a text."""
    return keyed_layout(raw, b":", MEMINFO_NAME, wanted, rb":[ ]*([0-9]+)( kB)?\n", rb":[\t\x20-\x7e]*\n")


#: vmstat counters whose movement means the kernel took pages from processes this tick
RECLAIM_COUNTERS = ("pgsteal", "pgscan", "pswpout", "zswpout")
#: the /proc/PID/status fields a sample needs (Uid: the real uid, the first of four)
STATUS_FIELDS = re.compile(rb"\n(Uid|Threads|RssAnon|RssFile|RssShmem|VmSwap):[ \t]*(\d+)")
#: consecutive identical stat reads after which a process counts as quiet
QUIET_AFTER = 3
#: a quiet process whose schedstat did not move is still read once in this many ticks, staggered
#: by pid: what moves a process's RSS without it running and without reclaim (ptrace,
#: process_vm_writev, process_madvise from another process) shows within them
BACKSTOP_TICKS = 16


def read_bytes(path: str, chunk: int = 4096) -> bytes | None:
    """A whole /proc file (None if it cannot be read: the process is gone, no permission). One
    read(2) for files shorter than ``chunk`` (stat, status): no Python file object per call."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        parts = [os.read(fd, chunk)]
        while len(parts[-1]) == chunk:
            parts.append(os.read(fd, chunk))
        return b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_to_end(path: str) -> bytes | None:
    """A /proc file read until read(2) returns nothing: a seq_file hands out at most a page a
    read, less when the next record would not fit (/proc/vmstat: 4,094 bytes, then the rest), so
    a short read is not the end."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        parts = []
        while chunk := os.read(fd, 8192):
            parts.append(chunk)
        return b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


def parse_stat(text: str) -> tuple[str, list[str]]:
    """(comm, fields after comm) of a /proc/PID/stat line; comm may hold spaces and parens."""
    lpar = text.index("(")
    rpar = text.rindex(")")
    return text[lpar + 1 : rpar], text[rpar + 2 :].split()


class ProcfsProbe(Probe):
    name = "procfs"
    needs_bpf = False
    #: each new process's command line (the Processes pane's and the drill-in's): the exporter
    #: labels processes by comm
    optional_parts = ("cmdline",)

    @classmethod
    def at_start(cls, proc_root: str | Path) -> Self:
        return cls(proc_root)

    def __init__(
        self, proc_root: str | Path = "/proc", quiet_every: int | None = None, keep_open: bool | None = None
    ) -> None:
        self.root = Path(proc_root)
        self._root_s = str(self.root)
        real = self._root_s == "/proc"
        #: read a quiet process every this many ticks (1: every tick); fake roots in tests change
        #: files between ticks without vmstat, so only the real /proc skips by default
        self.quiet_every = max(1, quiet_every if quiet_every is not None else (4 if real else 1))
        #: keep stat files open and pread them (only on procfs: a regular file replaced by rename
        #: would keep showing its old content)
        self.keep_open = real if keep_open is None else keep_open
        #: pid -> (raw stat line, parsed key, sample): an unchanged stat line is not even parsed
        self._cache: dict[int, tuple[bytes, str, ProcSample]] = {}
        self._cmdline: dict[int, str] = {}
        self._users: dict[int, str] = {}
        self._fds: dict[int, int] = {}
        self._max_fds = 0
        #: pid -> consecutive reads that returned the same stat line
        self._same: dict[int, int] = {}
        self._tick = 0
        self._last_reclaim: tuple[tuple[str, int], ...] | None = None
        #: where vmstat's record has the reclaim counters, and the names of all it had then
        self._reclaim_at: tuple[tuple[int, ...], tuple[str, ...]] | None = None
        #: stat files read on the last tick (for tests and the bench)
        self.last_reads = 0
        #: pids read every tick however quiet (the process in focus); replaced whole, never
        #: changed in place, so the polling thread reads one consistent set
        self.followed: frozenset[int] = frozenset()
        #: kernel threads (no mm): not read again while their directory's inode stays
        self._kthreads: set[int] = set()
        #: pid -> the inode of its /proc/PID directory when it was last read: another inode is
        #: another process with the same pid
        self._inodes: dict[int, int] = {}
        #: whether /proc/PID/schedstat tells when a task ran (the real /proc, CONFIG_SCHED_INFO);
        #: found at load
        self.schedstat = False
        #: pid -> its schedstat file, held open like the stat files
        self._sfds: dict[int, int] = {}
        #: pid -> its schedstat text read before its last stat read (or since, unchanged)
        self._sched: dict[int, bytes] = {}
        #: /proc/meminfo, vmstat and pressure/memory, held open like the stat files and pread
        #: from offset 0 every tick (the kernel prints them anew there): three opens and closes
        #: a tick less
        self._host_fds: dict[str, int] = {}
        #: per host file, the text last read and the record built of it: the same text again
        #: (pressure/memory on a machine that never stalled, every file while nothing moves) is
        #: the same record, neither parsed nor cleaned at the record boundary again
        self._host_last: dict[str, tuple[bytes, Record]] = {}
        #: /proc/vmstat's names as read, decoded (the same ~95 every tick)
        self._vm_names: dict[bytes, str] = {}
        #: /proc/stat's count of tasks created at the last poll, and the pids as that poll's
        #: listing had them (less those found gone since): while the count holds, the next poll
        #: reads those and does not list /proc (an idle tick's listing was ~0.16 ms of CPU with
        #: 60 processes, the largest part of its reads). Where schedstat tells (the real /proc)
        self._last_forks: int | None = None
        self._order: list[int] | None = None
        #: whether the last poll listed /proc (for tests and the bench)
        self.last_listed = True
        #: the pattern of meminfo's lines (:func:`meminfo_layout`) and the figures it captures
        self._mi_layout: tuple[re.Pattern[bytes], tuple[str, ...]] | None = None
        #: the pattern of vmstat's lines (:func:`vmstat_layout`) and its counters' names: a text
        #: it matches is parsed by that one match (its values the groups), none else made
        self._vm_layout: tuple[re.Pattern[bytes], tuple[str, ...]] | None = None

    def follow(self, pid: int) -> None:
        """Read ``pid``'s stat every tick, however quiet it is (the source's focus intent)."""
        self.followed = self.followed | {pid}

    def unfollow(self, pid: int) -> None:
        self.followed = self.followed - {pid}

    def load(self) -> None:
        if not (self.root / "meminfo").is_file():
            raise FileNotFoundError(f"{self.root} does not look like procfs")
        if self.keep_open:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            want = 1 << 16 if hard == resource.RLIM_INFINITY else min(hard, 1 << 16)
            if soft != resource.RLIM_INFINITY and soft < want:
                try:
                    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
                    soft = want
                except (ValueError, OSError):
                    pass
            # leave room for BPF maps, perf buffers, the terminal and snapshot files
            self._max_fds = max(0, min(soft, 1 << 16) - 1024)
        # "0 0 0" where the kernel keeps no sched_info (fs/proc/base.c proc_pid_schedstat()):
        # then it cannot say whether a task ran, and the quiet rule falls back to every n-th tick
        own = read_bytes(f"{self._root_s}/self/schedstat") or b""
        self.schedstat = self.keep_open and len(own.split()) == 3 and own.split()[2] != b"0"

    def close(self) -> None:
        for pid in list(self._fds) + list(self._sfds):
            self._forget_fd(pid)
        for fd in self._host_fds.values():
            os.close(fd)
        self._host_fds.clear()

    def __del__(self) -> None:
        # its fds are raw: a probe dropped unclosed (a test's, say) would keep hundreds of them
        # (a held schedstat a process) for the life of the process
        with contextlib.suppress(Exception):
            self.close()

    def read_host(self, name: str) -> bytes | None:
        """A whole machine-wide file below the proc root (``meminfo``, ``vmstat``,
        ``pressure/memory``): held open and pread to its end from offset 0 on the real /proc
        (each is a seq_file, printed anew by a read at offset 0, then continued at the offset
        reached: fs/seq_file.c seq_read_iter()), opened and read anew elsewhere (a fixture file
        replaced by another would keep its old text)."""
        path = f"{self._root_s}/{name}"
        if not self.keep_open:
            return read_to_end(path)
        fd = self._host_fds.get(name)
        if fd is None:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
            self._host_fds[name] = fd
        parts: list[bytes] = []
        at = 0
        try:
            while chunk := os.pread(fd, 8192, at):
                parts.append(chunk)
                at += len(chunk)
        except OSError:  # unreadable (PSI switched off: EOPNOTSUPP), opened again next time
            del self._host_fds[name]
            os.close(fd)
            return None
        return b"".join(parts)

    def _forget_fd(self, pid: int) -> None:
        self._sched.pop(pid, None)
        for fds in (self._fds, self._sfds):
            fd = fds.pop(pid, None)
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def ran(self, pid: int) -> bool:
        """Whether ``pid``'s main thread was on a CPU since its schedstat was last read (True when
        that cannot be told: never read, or the file cannot be). The text read now is kept: read
        before the stat read that follows, a run after it shows next time."""
        fd = self._sfds.get(pid)
        raw = b""
        if fd is None and len(self._fds) + len(self._sfds) < self._max_fds:
            try:
                fd = os.open(f"{self._root_s}/{pid}/schedstat", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                fd = None
            if fd is not None:
                self._sfds[pid] = fd
        try:
            if fd is not None:
                raw = os.pread(fd, 128, 0)
            else:
                raw = read_bytes(f"{self._root_s}/{pid}/schedstat") or b""
        except OSError:  # gone (ESRCH): its stat read says so
            raw = b""
        if not raw:
            self._sched.pop(pid, None)
            return True
        before = self._sched.get(pid)
        self._sched[pid] = raw
        return before != raw

    def read_stat(self, pid: int) -> bytes | None:
        """The raw stat line: pread on the kept file, or open/read/close (and keep it open)."""
        fd = self._fds.get(pid)
        if fd is not None:
            try:
                raw = os.pread(fd, 4096, 0)
                if raw:
                    return raw
            except OSError as exc:
                if exc.errno != errno.ESRCH:
                    self._forget_fd(pid)
                    return read_bytes(f"{self._root_s}/{pid}/stat")
            # the process this file belonged to is gone; the pid may now be someone else's
            self._forget_fd(pid)
        if not self.keep_open or len(self._fds) + len(self._sfds) >= self._max_fds:
            return read_bytes(f"{self._root_s}/{pid}/stat")
        try:
            fd = os.open(f"{self._root_s}/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            raw = os.pread(fd, 4096, 0)
        except OSError:
            os.close(fd)
            return None
        self._fds[pid] = fd
        return raw

    # -- helpers -------------------------------------------------------------------------------
    def _user(self, uid: int) -> str:
        name = self._users.get(uid)
        if name is None:
            try:
                name = pwd.getpwuid(uid).pw_name
            except KeyError:
                name = str(uid)
            self._users[uid] = name
        return name

    def read_pid(self, pid: int) -> ProcSample | None:
        """One process (None if it is gone or is a kernel thread)."""
        raw = self.read_stat(pid)
        self.last_reads += 1
        if not raw:
            return None
        cached = self._cache.get(pid)
        if cached is not None and cached[0] == raw:
            self._same[pid] = self._same.get(pid, 0) + 1
            return cached[2]
        self._same[pid] = 0
        # a comm that is not UTF-8 keeps its bytes (surrogate-escaped), shown as \xff by the record
        stat = raw.decode("utf-8", errors="surrogateescape")
        try:
            comm, f = parse_stat(stat)
        except ValueError:
            return None
        # f[0] is state; minflt=f[7], majflt=f[9], num_threads=f[17], starttime=f[19], vsize=f[20],
        # rss=f[21]: what status adds (the RSS split, swap, threads, uid) moves with these: RSS
        # and swap by reclaim with rss, a thread come or gone with num_threads
        # kept as one string (the fields are digits, comm is what precedes the last six): a
        # tuple of seven strings was ~0.4 KiB a process, ~0.3 MiB more with 1,000 processes
        key = " ".join((comm, f[7], f[9], f[20], f[21], f[1], f[17]))
        if cached is not None and cached[1] == key:
            self._cache[pid] = (raw, key, cached[2])
            return cached[2]
        status = read_bytes(f"{self._root_s}/{pid}/status")
        if status is None:
            return None
        # the six fields used, found by one regex pass in C (splitting all ~55 lines of every
        # process into a dict was most of the first poll with 1,000 processes); anchored on the
        # newline, not on ``^`` with MULTILINE, which tries the pattern at every position
        # (bench/test_micro.py times both)
        vals = dict(STATUS_FIELDS.findall(status))
        if b"RssAnon" not in vals:  # kernel thread (no mm): quiet from the start, never listed
            self._kthreads.add(pid)
            self._same[pid] = QUIET_AFTER
            return None
        self._kthreads.discard(pid)
        uid = int(vals.get(b"Uid", 0))
        cmdline = self._cmdline.get(pid)
        if cmdline is None and not self.reads("cmdline"):
            cmdline = ""  # not kept: a front end that uses it reads it at the process's next change
        elif cmdline is None:
            raw_argv = read_bytes(f"{self._root_s}/{pid}/cmdline") or b""
            argv = raw_argv.decode("utf-8", errors="surrogateescape")
            # interned, as comm below: many processes run the same command (1,000 sleepers, a
            # pool of workers) and each sample held a copy of its own
            cmdline = sys.intern(clean(argv.replace("\x00", " ").strip(), limit=512))
            self._cmdline[pid] = cmdline
        sample = ProcSample(
            pid=pid,
            comm=sys.intern(clean(comm)),
            user=self._user(uid),
            uid=uid,
            rss_anon_bytes=int(vals.get(b"RssAnon", 0)) * 1024,
            rss_file_bytes=int(vals.get(b"RssFile", 0)) * 1024,
            rss_shmem_bytes=int(vals.get(b"RssShmem", 0)) * 1024,
            swap_bytes=int(vals.get(b"VmSwap", 0)) * 1024,
            minor_faults=int(f[7]),
            major_faults=int(f[9]),
            ppid=int(f[1]),
            vsize_bytes=int(f[20]),
            threads=int(vals.get(b"Threads", 1)) or 1,
            start_time_ns=int(f[19]) * 1_000_000_000 // CLK_TCK,
            cmdline=cmdline,
        )
        self._cache[pid] = (raw, key, sample)
        return sample

    def poll(self) -> list[Record]:
        out: list[Record] = []
        listed: set[int] = set()
        vmstat = self.vmstat()
        read_all = self._reclaimed(vmstat) or self.quiet_every == 1
        self._tick += 1
        phase = self._tick % self.quiet_every
        cache, same = self._cache, self._same
        self.last_reads = 0
        # the pids as the last listing had them, when no task was created since (read before
        # the listing it stands for: a task made after this read moves the count at the next)
        forks = self._forks() if self.schedstat else None
        order = self._order if forks is not None and forks == self._last_forks else None
        self._last_forks = forks
        entries, listing, order_now = self._pid_source(order)
        self.last_listed = order is None
        kthreads, inodes, followed, every = self._kthreads, self._inodes, self.followed, self.quiet_every
        exact = self.schedstat
        backstop = self._tick % BACKSTOP_TICKS
        #: pid -> where its unread (kept) sample is in ``out``: read after all if its parent exited
        kept: dict[int, int] = {}
        # bound once: with 1,000 sleepers this loop runs 1,000 times a tick, most of them for a
        # quiet process whose last sample is handed on as it was
        listed_add, inodes_get, same_get, cache_get, out_append, ran = (
            listed.add,
            inodes.get,
            same.get,
            cache.get,
            out.append,
            self.ran,
        )
        read_pid = self.read_pid
        sched = self._sched
        sfds_get, sched_get, pread = self._sfds.get, sched.get, os.pread
        #: pids not read (None) while the listing was skipped: gone if their directory is
        unread: list[int] = []
        with entries if entries is not None else contextlib.nullcontext(()):
            for pid, ino in listing:
                listed_add(pid)
                known = inodes_get(pid)
                if known == ino:
                    if pid in kthreads:
                        continue  # a kernel thread's figures never change
                    if (
                        not read_all
                        and same_get(pid, 0) >= QUIET_AFTER
                        and pid not in followed
                        and (hit := cache_get(pid)) is not None
                    ):
                        if exact:
                            # one thread that did not run: its stat line is as last read (the
                            # module's docstring says why); several threads: read every tick.
                            # The common case inline (its file held, read before): a pread and
                            # a comparison of bytes
                            skip = hit[2].threads == 1 and pid % BACKSTOP_TICKS != backstop
                            if skip and (sfd := sfds_get(pid)) is not None and (was := sched_get(pid)):
                                try:
                                    now_s = pread(sfd, 128, 0)
                                except OSError:
                                    now_s = b""  # gone: its stat read says so
                                skip = now_s == was
                                if not skip and now_s:
                                    sched[pid] = now_s  # read before the stat read below
                            elif skip:
                                skip = not ran(pid)
                        else:
                            skip = pid % every != phase
                        if skip:
                            kept[pid] = len(out)
                            out_append(hit[2])  # quiet: as last read
                            continue
                    elif exact and not read_all and same_get(pid, 0) == QUIET_AFTER - 1:
                        ran(pid)  # about to be quiet: its schedstat before this stat read
                elif known is not None:  # the pid is another process's now: nothing carries over
                    cache.pop(pid, None)
                    self._cmdline.pop(pid, None)
                    same.pop(pid, None)
                    kthreads.discard(pid)
                    self._sched.pop(pid, None)
                inodes[pid] = ino
                sample = read_pid(pid)
                if sample is not None:
                    out_append(sample)
                elif order is not None:
                    unread.append(pid)
        self._next_order(order_now, unread, listed)
        # every pid read has its inode noted first: those gone from the listing are all there
        gone_pids = inodes.keys() - listed
        for gone in gone_pids:
            del inodes[gone]
            cache.pop(gone, None)
            self._cmdline.pop(gone, None)
            same.pop(gone, None)
            kthreads.discard(gone)
            self._forget_fd(gone)
        if gone_pids and kept:
            self._reparented(out, kept, gone_pids)
        for rec in (self.meminfo(), self.pressure(), vmstat):
            if rec is not None:
                out.append(rec)
        return out

    def _pid_source(
        self, order: list[int] | None
    ) -> tuple[contextlib.AbstractContextManager[object] | None, Iterable[tuple[int, int]], list[int] | None]:
        """(the listing to close, the (pid, inode) pairs to go through, the pids in their order):
        ``order``'s pids with their known inodes when the listing is skipped, else /proc's
        listing (the order filled as it goes; None when /proc cannot be listed)."""
        if order is not None:
            inodes = self._inodes
            return None, ((pid, inodes[pid]) for pid in order), order
        try:
            entries = os.scandir(self.root)
        except OSError:
            return None, (), None
        order_now: list[int] = []
        return entries, self._listing(entries, order_now), order_now

    def _next_order(self, order: list[int] | None, unread: list[int], listed: set[int]) -> None:
        """The pids the next poll goes through if no task is created by then: this poll's, less
        those found gone. With the listing skipped, a process that exited since is found by its
        read failing (its held files say ESRCH) and its directory gone; no other pid can have
        come (no task was created), nor its pid been given to another process."""
        if unread and order is not None:
            exited = {pid for pid in unread if not os.path.isdir(f"{self._root_s}/{pid}")}
            listed -= exited
            order = [pid for pid in order if pid not in exited]
        self._order = order if self.schedstat else None

    @staticmethod
    def _listing(entries: Iterable[os.DirEntry[str]] | None, order: list[int]) -> Iterator[tuple[int, int]]:
        """(pid, inode of its directory) of each process the /proc listing has, in its order
        (noted in ``order``)."""
        for entry in entries or ():
            name = entry.name
            if name.isdigit():
                pid = int(name)
                order.append(pid)
                yield pid, entry.inode()

    def _forks(self) -> int | None:
        """How many tasks the kernel has created since boot (/proc/stat's ``processes``: the
        count kernel/fork.c copy_process() moves on, in the same tasklist_lock section where it
        makes the task seen by pid, so by /proc's listing); None when it cannot be read. The
        same count at two reads: no task was created in between, so no process appeared and
        no pid was given to another."""
        raw = self.read_host("stat")
        if raw is None:
            return None
        at = raw.find(b"\nprocesses ")
        if at < 0:
            return None
        end = raw.find(b"\n", at + 11)
        value = raw[at + 11 : end if end >= 0 else len(raw)]
        return int(value) if value.isdigit() else None

    def _reparented(self, out: list[Record], kept: dict[int, int], gone: set[int]) -> None:
        """The kept samples of processes whose parent exited this tick, read: the kernel gave
        them another parent (kernel/exit.c forget_original_parent()) while they slept. A pid
        reused within one tick is not seen here; its children are read within BACKSTOP_TICKS."""
        for pid, at in kept.items():
            rec = out[at]
            if isinstance(rec, ProcSample) and rec.ppid in gone:
                sample = self.read_pid(pid)
                if sample is not None:
                    out[at] = sample

    def _reclaimed(self, vmstat: VmStat | None) -> bool:
        """Whether the kernel reclaimed, swapped out or moved pages since the last tick (then an
        idle process's RSS may have changed without it running). True when it cannot tell."""
        if vmstat is None:
            return True
        counters = vmstat.counters
        names = tuple(map(itemgetter(0), counters))
        known = self._reclaim_at
        if known is not None and known[1] == names:
            at = known[0]
        else:
            # where the reclaim counters are, found again only for another list of names (the
            # same ~95 in the same order every tick: then the pairs are picked in C)
            at = tuple(i for i, k in enumerate(names) if k.startswith(RECLAIM_COUNTERS))
            self._reclaim_at = (at, names)
        now = tuple(map(counters.__getitem__, at))
        before, self._last_reclaim = self._last_reclaim, now
        return before is None or before != now

    def _host_record(self, name: str, build: Callable[[bytes], R]) -> R | None:
        """The record of host file ``name`` (None when it cannot be read): the one last built
        when the text is the one it was built of (bytes compared: cheaper than any parse), else
        ``build`` of the text."""
        raw = self.read_host(name)
        if raw is None:
            self._host_last.pop(name, None)
            return None
        last = self._host_last.get(name)
        if last is not None and last[0] == raw:
            return cast(R, last[1])
        rec = build(raw)
        self._host_last[name] = (raw, rec)
        return rec

    def meminfo(self) -> MemInfo | None:
        return self._host_record("meminfo", self._meminfo)

    def _meminfo(self, raw: bytes) -> MemInfo:
        layout = self._mi_layout
        if layout is not None and (m := layout[0].fullmatch(raw)) is not None:
            # the lines as last time: the dozen figures from the match's groups, the other ~45
            # lines not split
            groups = m.groups()
            vals = {
                name: int(groups[2 * i]) * 1024 if groups[2 * i + 1] else int(groups[2 * i])
                for i, name in enumerate(layout[1])
            }
        else:
            vals = parse_meminfo(raw.decode("utf-8", errors="replace"))
            self._mi_layout = meminfo_layout(raw, MEMINFO_NAMES)
        return MemInfo(
            total_bytes=vals.get("MemTotal", 0),
            free_bytes=vals.get("MemFree", 0),
            available_bytes=vals.get("MemAvailable", 0),
            buffers_bytes=vals.get("Buffers", 0),
            cached_bytes=vals.get("Cached", 0) + vals.get("SReclaimable", 0),
            swap_total_bytes=vals.get("SwapTotal", 0),
            swap_free_bytes=vals.get("SwapFree", 0),
            shmem_bytes=vals.get("Shmem", 0),
            slab_bytes=vals.get("Slab", 0),
            zswap_bytes=vals.get("Zswap", 0),
            zswapped_bytes=vals.get("Zswapped", 0),
            page_cache_bytes=vals.get("Cached", 0),
        )

    def pressure(self) -> Pressure | None:
        return self._host_record("pressure/memory", self._pressure)

    def _pressure(self, raw: bytes) -> Pressure:
        text = raw.decode("utf-8", errors="replace")
        lines: dict[str, dict[str, str]] = {}
        for line in text.splitlines():
            parts = line.split()
            if parts:
                lines[parts[0]] = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        some, full = lines.get("some", {}), lines.get("full", {})
        return Pressure(
            some_avg10=float(some.get("avg10", 0)),
            full_avg10=float(full.get("avg10", 0)),
            some_avg60=float(some.get("avg60", 0)),
            full_avg60=float(full.get("avg60", 0)),
            some_total_us=int(some.get("total", 0)),
            full_total_us=int(full.get("total", 0)),
        )

    def vmstat(self) -> VmStat | None:
        return self._host_record("vmstat", self._vmstat)

    def _vmstat(self, raw: bytes) -> VmStat:
        layout = self._vm_layout
        if layout is not None and (m := layout[0].fullmatch(raw)) is not None:
            # the lines as last time (every tick but the first): the counters are the match's
            # groups, paired with their names in C (half the CPU of the findall below)
            return VmStat(counters=tuple(zip(layout[1], map(int, m.groups()), strict=True)))
        # one regex pass in C over the ~180 lines, the ~90 wanted found by prefix (a Python loop
        # over every line was ~0.1 ms a tick, most of this read); each name decoded once
        names = self._vm_names
        found = VMSTAT_LINES.findall(b"\n" + raw)
        counters = tuple((names.get(k) or names.setdefault(k, k.decode()), int(v)) for k, v in found)
        made = vmstat_layout(raw, found)
        self._vm_layout = None if made is None else (made[0], tuple(names[k] for k in made[1]))
        return VmStat(counters=counters)
