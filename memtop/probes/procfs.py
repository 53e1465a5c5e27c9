"""The kernel's own per-task accounting, read from /proc once per tick.

RSS split and fault counts are exact here and cost the traced system nothing, so no BPF program
runs on the fault path for them. To keep memtop cheap with thousands of processes, the short
``/proc/PID/stat`` line is read every tick and ``status`` only for processes whose stat moved.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from memtop.probes.base import Probe
from memtop.records import Record
from memtop.records.system import MemInfo, Pressure, ProcSample, VmStat
from memtop.text import clean

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
CLK_TCK = os.sysconf("SC_CLK_TCK")

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
)


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


def parse_stat(text: str) -> tuple[str, list[str]]:
    """(comm, fields after comm) of a /proc/PID/stat line; comm may hold spaces and parens."""
    lpar = text.index("(")
    rpar = text.rindex(")")
    return text[lpar + 1 : rpar], text[rpar + 2 :].split()


class ProcfsProbe(Probe):
    name = "procfs"
    needs_bpf = False
    panes = ("processes",)

    def __init__(self, proc_root: str | Path = "/proc") -> None:
        self.root = Path(proc_root)
        self._root_s = str(self.root)
        #: pid -> (raw stat line, parsed key, sample): an unchanged stat line is not even parsed
        self._cache: dict[int, tuple[bytes, tuple[str, ...], ProcSample]] = {}
        self._cmdline: dict[int, str] = {}
        self._users: dict[int, str] = {}

    def load(self) -> None:
        if not (self.root / "meminfo").is_file():
            raise FileNotFoundError(f"{self.root} does not look like procfs")

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

    def _read(self, path: Path) -> str | None:
        raw = read_bytes(str(path))
        return None if raw is None else raw.decode("utf-8", errors="replace")

    def read_pid(self, pid: int) -> ProcSample | None:
        """One process (None if it is gone or is a kernel thread)."""
        raw = read_bytes(f"{self._root_s}/{pid}/stat")
        if not raw:
            return None
        cached = self._cache.get(pid)
        if cached is not None and cached[0] == raw:
            return cached[2]
        base = self.root / str(pid)
        stat = raw.decode("utf-8", errors="replace")
        try:
            comm, f = parse_stat(stat)
        except ValueError:
            return None
        # f[0] is state; minflt=f[7], majflt=f[9], starttime=f[19], vsize=f[20], rss=f[21]
        key = (comm, f[7], f[9], f[20], f[21], f[1])
        if cached is not None and cached[1] == key:
            self._cache[pid] = (raw, key, cached[2])
            return cached[2]
        status = self._read(base / "status")
        if status is None:
            return None
        vals: dict[str, str] = {}
        for line in status.splitlines():
            k, _, v = line.partition(":")
            vals[k] = v.strip()
        if "RssAnon" not in vals:  # kernel thread (no mm)
            return None

        def kb(name: str) -> int:
            v = vals.get(name, "0 kB").split()
            return int(v[0]) * 1024 if v else 0

        uid = int(vals.get("Uid", "0").split()[0])
        cmdline = self._cmdline.get(pid)
        if cmdline is None:
            argv = self._read(base / "cmdline") or ""
            cmdline = clean(argv.replace("\x00", " ").strip(), limit=512)
            self._cmdline[pid] = cmdline
        sample = ProcSample(
            pid=pid,
            comm=clean(comm),
            user=self._user(uid),
            uid=uid,
            rss_anon_bytes=kb("RssAnon"),
            rss_file_bytes=kb("RssFile"),
            rss_shmem_bytes=kb("RssShmem"),
            swap_bytes=kb("VmSwap"),
            minor_faults=int(f[7]),
            major_faults=int(f[9]),
            ppid=int(f[1]),
            vsize_bytes=int(f[20]),
            threads=int(vals.get("Threads", "1") or 1),
            start_time_ns=int(f[19]) * 1_000_000_000 // CLK_TCK,
            cmdline=cmdline,
        )
        self._cache[pid] = (raw, key, sample)
        return sample

    def poll(self) -> list[Record]:
        out: list[Record] = []
        seen: set[int] = set()
        try:
            names = os.listdir(self.root)
        except OSError:
            names = []
        for name in names:
            if not name.isdigit():
                continue
            pid = int(name)
            sample = self.read_pid(pid)
            if sample is not None:
                seen.add(pid)
                out.append(sample)
        for gone in set(self._cache) - seen:
            del self._cache[gone]
            self._cmdline.pop(gone, None)
        for rec in (self.meminfo(), self.pressure(), self.vmstat()):
            if rec is not None:
                out.append(rec)
        return out

    def meminfo(self) -> MemInfo | None:
        text = self._read(self.root / "meminfo")
        if text is None:
            return None
        vals: dict[str, int] = {}
        for line in text.splitlines():
            k, _, v = line.partition(":")
            parts = v.split()
            if parts:
                vals[k] = int(parts[0]) * (1024 if len(parts) > 1 else 1)
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
        )

    def pressure(self) -> Pressure | None:
        text = self._read(self.root / "pressure" / "memory")
        if text is None:
            return None
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
        text = self._read(self.root / "vmstat")
        if text is None:
            return None
        pairs = []
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name.startswith(VMSTAT_PREFIXES):
                pairs.append((name, int(value)))
        return VmStat(counters=tuple(pairs))
