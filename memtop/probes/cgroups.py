"""The cgroups probe: every cgroup's memory figures from cgroupfs (no BPF), over v1, v2 and hybrid
layouts (memtop.cgroupfs).

Each tick reads, per cgroup, what moves: its usage, its processes and, where PSI is on, its
memory.pressure. The rest (limits, events, memory.stat) is read when the usage or the pressure
moved (a cgroup pinned at its limit stalls: its PSI moves while its usage may not), when the
cgroup is new, and every ``full_every`` ticks otherwise (a limit can change with no usage change):
an idle cgroup costs three small reads. A sample is sent only when something in it changed.
"""

from __future__ import annotations

import os

from memtop import cgroupfs
from memtop.errors import ProbeError
from memtop.probes.base import Probe
from memtop.records import Record
from memtop.records.cgroups import CgroupGone, CgroupLayout, CgroupPoll, CgroupSample


class CgroupsProbe(Probe):
    name = "cgroups"
    needs_bpf = False

    def __init__(
        self,
        proc_root: str = "/proc",
        max_cgroups: int = 5000,
        full_every: int = 10,
        runtime_root: str = "/",
    ) -> None:
        self.proc_root = proc_root
        self.max_cgroups = max_cgroups
        self.full_every = full_every
        self.layout: cgroupfs.Layout | None = None
        self._last: dict[str, CgroupSample] = {}
        self._ids: dict[str, int] = {}
        self._containers: dict[str, tuple[str, str, str, str, str] | None] = {}
        self._names = cgroupfs.RuntimeNames(runtime_root)
        self._tick = 0
        self._sent_layout = False

    @classmethod
    def at_start(cls, proc_root: str | os.PathLike[str]) -> CgroupsProbe:
        return cls(str(proc_root))

    def load(self) -> None:
        self.layout = cgroupfs.layout(self.proc_root)
        if self.layout.mode == "none":
            raise ProbeError(
                "no cgroup hierarchy is mounted (/proc/self/mountinfo lists none)",
                "mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup) or the v1 memory controller",
            )

    def note(self) -> str:
        return self.layout.mode if self.layout is not None else ""

    def _container(self, path: str) -> tuple[str, str, str, str, str] | None:
        if path not in self._containers:
            c = cgroupfs.container_of(path)
            if c is not None:
                c = self._names.name(c)
            self._containers[path] = (c.runtime, c.id, c.pod_uid, c.name, c.pod) if c else None
        return self._containers[path]

    def poll(self) -> list[Record]:
        lay = self.layout
        if lay is None:
            return []
        out: list[Record] = []
        if not self._sent_layout:
            out.append(
                CgroupLayout(
                    mode=lay.mode,
                    memory_mount=lay.memory.mountpoint if lay.memory else "",
                    memory_version=lay.memory.version if lay.memory else 0,
                    unified_mount=lay.unified.mountpoint if lay.unified else "",
                    psi=lay.psi,
                    hierarchies=tuple((h.mountpoint, h.version, h.controllers) for h in lay.hierarchies),
                )
            )
            self._sent_layout = True
        self._tick += 1
        full_tick = self._tick % self.full_every == 0
        mem, uni = lay.memory, lay.unified
        mem_dirs = dict(cgroupfs.walk(mem.mountpoint, self.max_cgroups)) if mem else {}
        # the cgroup2 tree, when it is another tree than the memory controller's (hybrid): PSI
        uni_dirs = dict(cgroupfs.walk(uni.mountpoint, self.max_cgroups)) if uni and uni is not mem else {}
        if uni is not None and uni is mem:
            uni_dirs = mem_dirs
        paths = list(mem_dirs) + [p for p in uni_dirs if p not in mem_dirs]
        last = self._last
        now: dict[str, CgroupSample] = {}
        for path in paths[: self.max_cgroups]:
            mdir, udir = mem_dirs.get(path), uni_dirs.get(path)
            prev = last.get(path)
            psi = (
                cgroupfs.parse_pressure(cgroupfs.read_text(os.path.join(udir, "memory.pressure")))
                if udir and lay.psi
                else None
            )
            if mdir is not None and mem is not None:
                version = mem.version
                usage = cgroupfs.read_usage(version, mdir)
                pids = cgroupfs.read_procs(mdir)
                stalled = psi is not None and prev is not None and psi[0] != prev.psi_some_us
                if (
                    prev is None
                    or usage != prev.usage_bytes
                    or stalled
                    or full_tick
                    or prev.version != version
                ):
                    r = cgroupfs.read_memory(version, mdir)
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
                    fig = (
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
            else:
                version, pids = 0, ()
                fig = (None, None, None, None, None, None, None, None, (), ())
            upids = cgroupfs.read_procs(udir) if udir and udir != mdir else ()
            cid = 0
            if udir is not None:
                cid = self._ids.get(path) or cgroupfs.cgroup_id(udir) or 0
                self._ids[path] = cid
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
                container=self._container(path),
            )
            now[path] = sample
            if sample != prev:
                out.append(sample)
        for path in last:
            if path not in now:
                out.append(CgroupGone(path))
                self._ids.pop(path, None)
                self._containers.pop(path, None)
        self._last = now
        out.append(CgroupPoll(len(now)))
        return out
