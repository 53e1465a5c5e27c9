"""leakrate: the leaks preflight. Counts, for about a second, the calls to the allocator functions
the leaks probe would trace in the target, then detaches: the allocation rate the expected cost of
tracing is computed from (memtop.core.leakcost), shown before the leaks probe attaches.

The cheapest way to count (``bpf/leakrate.bpf.c``): one entry uprobe per function of the target's
allocator lane, placed where the leaks probe would place it (memtop.probes.leaks.probe_offset),
each bumping a per-CPU counter of its own; no return probes, no stacks, no map keyed by pointer.
All of it happens in :meth:`load` (compile, attach, count, detach), so nothing is left attached
once it returns; ``poll`` hands out the one result. Its own cost is bounded: ``window_s`` of one
trap per call.

On the spot it also measures what one trap costs this target: the time the target spends while
counted beyond what it spent just before (while the program compiled), divided by the calls
counted: its time on CPU (schedstat, ns) when that grew, as it does for a target with idle time;
else its system time (ticks), where a busy target spends the traps instead of its own work. Where
that is too little to tell, the bench's figure is used and the record says 0. BPF run-time stats,
held during the count only, give the count program's own ns per call as the kernel measured it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from memtop.core.errors import PidNotFound, ProbeError
from memtop.core.text import clean
from memtop.linux import bcc_compat
from memtop.probes import allocators, bpfstats, symbols
from memtop.probes.base import BpfProbe
from memtop.probes.leaks import REQUIRED, _start_time, probe_offset, probe_plan
from memtop.records import Record
from memtop.records.leaks import LeakPreflight

#: slots in the program's counter array, one program count_<i> each (bpf/leakrate.bpf.c)
N_FNS = 40
#: fewer extra system-time ticks than this over the window: the trap is not measured (each tick
#: is 1/CLK_TCK s of the target's time, sampled)
MIN_TICKS = 10
#: less extra time on CPU than this share of the window: not measured from CPU time
MIN_CPU_SHARE = 0.02
MAX_TASKS = 1024
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stime_ticks(pid: int, proc_root: str) -> int | None:
    """The process's system time so far (all its threads), in clock ticks."""
    try:
        text = Path(proc_root, str(pid), "stat").read_text("utf-8", "surrogateescape")
    except OSError:
        return None
    try:
        return int(text[text.rindex(")") + 2 :].split()[12])
    except (ValueError, IndexError):
        return None


def _cpu_ns(pid: int, proc_root: str) -> int | None:
    """The process's time on CPU so far, in ns (its threads' schedstat; the first MAX_TASKS)."""
    total = 0
    try:
        tasks = sorted(os.listdir(Path(proc_root, str(pid), "task")))[:MAX_TASKS]
    except OSError:
        return None
    for tid in tasks:
        try:
            total += int(
                Path(proc_root, str(pid), "task", tid, "schedstat")
                .read_text("utf-8", "surrogateescape")
                .split()[0]
            )
        except (OSError, ValueError, IndexError):
            continue
    return total


#: (CLOCK_MONOTONIC ns, {pid: (ns on CPU, system time in ticks)})
Times = tuple[int, dict[int, tuple[int | None, int | None]]]


def _gone(pid: int, start: int | None, proc_root: str) -> bool:
    """Whether ``pid`` (started at ``start``) has exited: gone, replaced, or a zombie its parent
    has not reaped yet."""
    if start is None:
        return False
    try:
        text = Path(proc_root, str(pid), "stat").read_text("utf-8", "surrogateescape")
        state = text[text.rindex(")") + 2 :].split()[0]
    except (OSError, ValueError, IndexError):
        return True
    return state in ("Z", "X") or _start_time(pid, proc_root) != start


def _close_fd(fd: int) -> None:
    """A link's fd closed (in a thread of its own: never an exception to print)."""
    with contextlib.suppress(OSError):
        os.close(fd)


class LeakRateProbe(BpfProbe):
    name = "leakrate"
    program = "leakrate"
    features = ("uprobes",)

    def __init__(
        self,
        pids: Sequence[int],
        *,
        window_s: float = 1.0,
        sample_bytes: int = 0,
        proc_root: str = "/proc",
        links: bool = False,
    ) -> None:
        super().__init__()
        self.pids = list(dict.fromkeys(int(p) for p in pids))
        self.window_s = window_s
        #: count through uprobe_multi links (on a budget, where the count is part of the cost):
        #: a perf-event uprobe's close waits for grace periods under the kernel's event_mutex,
        #: 0.1-0.4 s each, and the probes still attached count (and cost) through the waits
        self.links = links
        self._link_fds: list[int] = []
        #: what byte sampling would use (recorded with the result)
        self.sample_bytes = sample_bytes
        self.proc_root = proc_root
        #: function name -> (slot, allocating?)
        self._slots: dict[str, tuple[int, bool]] = {}
        self._events: list[str] = []
        self._failed: list[str] = []
        self._lanes: list[str] = []
        self._start: dict[int, int | None] = {}
        self._stop = threading.Event()
        #: set while load() runs / once it has returned (everything detached)
        self._loading = threading.Event()
        self._idle = threading.Event()
        self._lock = threading.Lock()
        self.result: LeakPreflight | None = None
        #: CLOCK_MONOTONIC ns the count began and ended at
        self.window = (0, 0)
        self._handed = False

    # -- the run ----------------------------------------------------------------------------------
    def load(self) -> None:
        self._start = {p: _start_time(p, self.proc_root) for p in self.pids}
        if not any(v is not None for v in self._start.values()):
            raise PidNotFound(
                f"no such process: {', '.join(map(str, self.pids))}",
                "pick running pids (see the processes pane)",
            )
        base = self._stimes()
        self._loading.set()
        try:
            super().load()  # compiles; after_load attaches the counting probes
            self._count(base)
        finally:
            self._detach()  # nothing counts past the window, whatever happened
            self._idle.set()

    def after_load(self) -> None:
        for pid in self.pids:
            if self._stop.is_set():
                break
            self._attach_pid(pid)
        if not self._events and not self._link_fds:
            why = "; ".join(self._failed) or "no allocator function found"
            raise ProbeError(
                f"the leaks preflight could not attach ({why})",
                "the leaks pane's target line says why once tracing is asked for",
            )

    def _attach_pid(self, pid: int) -> None:
        if self._start.get(pid) is None:
            self._failed.append(f"pid {pid}: process not found")
            return
        alloc = allocators.find_allocator(pid, self.proc_root)
        if not alloc.traceable:
            self._failed.append(f"pid {pid}: {alloc.lane}: {alloc.why}")
            return
        self._lanes.append(alloc.lane)
        attached: set[str] = set()
        seen: set[tuple[str, int]] = set()
        for path, specs in probe_plan(pid, alloc, not alloc.header_sizes, self.proc_root):
            try:
                found = symbols.resolve_functions(pid, path, [sym for sym, _e, _r in specs])
            except symbols.SymbolError as exc:
                self._failed.append(f"pid {pid}: {clean(os.path.basename(path), 80)}: {exc}")
                continue
            for sym, _enter, ret in specs:
                where = found.get(sym)
                if not isinstance(where, tuple):
                    continue
                mod_path, off, code, fn_base = where
                if (mod_path, off) in seen:  # an alias: one probe, one trap, as the leaks probe does
                    continue
                seen.add((mod_path, off))
                name = sym.removeprefix(alloc.prefix)
                with self._lock:
                    slot = self._slots.get(name)
                    if slot is None:
                        if len(self._slots) >= N_FNS:
                            continue
                        slot = self._slots[name] = (len(self._slots), ret is not None)
                delta, _how = probe_offset(code, fn_base)
                if self.links:
                    try:
                        prog = bcc_compat.load_uprobe_multi(self.bpf, f"count_{slot[0]}")
                        fd = bcc_compat.attach_uprobe_multi(prog, mod_path, [off + delta], pid, False)
                    except Exception:  # noqa: BLE001 - refused (before Linux 6.6): perf events
                        self.links = False
                    else:
                        self._link_fds.append(fd)
                        attached.add(name)
                        continue
                try:
                    ev = bcc_compat.attach_uprobe_at(
                        self.bpf, f"count_{slot[0]}", mod_path, off + delta, pid, False
                    )
                except Exception as exc:  # noqa: BLE001 - one function failing is reported
                    self._failed.append(f"pid {pid}: {sym}: {clean(str(exc), 200)}")
                    continue
                self._events.append(ev)
                attached.add(name)
        missing = [s for s in REQUIRED if s not in attached]
        if missing:
            self._failed.append(f"pid {pid}: {alloc.describe()}: could not attach {', '.join(missing)}")

    def _stimes(self) -> Times:
        return time.monotonic_ns(), {
            p: (_cpu_ns(p, self.proc_root), _stime_ticks(p, self.proc_root)) for p in self.pids
        }

    def defines(self) -> dict[str, int]:
        return {"N_FNS": N_FNS, "UPROBE_MULTI": int(self.links)}

    def _counts(self) -> list[int]:
        t = self.bpf["calls"]
        return [int(t.sum(t.Key(i)).value) for i in range(N_FNS)]

    def _program_stats(self) -> tuple[int, int]:
        ns = runs = 0
        funcs = getattr(self.bpf, "funcs", None) or {}
        for key, fn in list(funcs.items()):
            name = key.decode() if isinstance(key, bytes) else str(key)
            if name.startswith("count_"):
                st = bpfstats.run_stats(int(fn.fd))
                if st is not None:
                    ns, runs = ns + st[0], runs + st[1]
        return ns, runs

    def _count(self, base: Times) -> None:
        stats_fd = bpfstats.enable()
        try:
            c0, p0, s0 = self._counts(), self._program_stats(), self._stimes()
            self._stop.wait(self.window_s)
            c1, p1, s1 = self._counts(), self._program_stats(), self._stimes()
        finally:
            bpfstats.disable(stats_fd)
        window_ns = s1[0] - s0[0]
        self.window = (s0[0], s1[0])
        names = sorted(self._slots, key=lambda n: self._slots[n][0])
        calls = [c1[self._slots[n][0]] - c0[self._slots[n][0]] for n in names]
        alloc_calls = sum(c for n, c in zip(names, calls, strict=True) if self._slots[n][1])
        free_calls = sum(c for n, c in zip(names, calls, strict=True) if not self._slots[n][1])
        runs = p1[1] - p0[1]
        program_ns = (p1[0] - p0[0]) / runs if stats_fd is not None and runs > 0 else 0.0
        exited = [p for p in self.pids if _gone(p, self._start.get(p), self.proc_root)]
        trap_ns = 0.0 if exited else self._trap_ns(base, s0, s1, alloc_calls + free_calls)
        lane = ", ".join(dict.fromkeys(self._lanes))
        took = window_ns / 1e9
        if exited:
            state = "exited"
            message = f"pid {', '.join(map(str, exited))} exited during the preflight"
        elif self._stop.is_set() and took < self.window_s * 0.9:
            state, message = "failed", "cut short: memtop is exiting"
        else:
            state = "measured"
            message = f"{len(self._events) + len(self._link_fds)} entry probes counted calls for {took:.2f} s, then detached"
        if self._failed:
            message += "; not attached: " + "; ".join(self._failed)
        self.result = LeakPreflight(
            pids=tuple(self.pids),
            state=state,
            message=message,
            allocator=lane,
            window_ns=window_ns,
            functions=tuple(names),
            calls=tuple(calls),
            alloc_calls=alloc_calls,
            free_calls=free_calls,
            trap_ns=round(trap_ns, 1),
            program_ns=round(program_ns, 1),
            sample_bytes=self.sample_bytes,
        )

    def _trap_ns(self, base: Times, s0: Times, s1: Times, calls: int) -> float:
        """One trap's cost (with the count program) from what the targets spent while counted
        beyond what they spent just before, per call; 0 when too little to tell.

        A target with idle time spends the traps as extra time on CPU (schedstat, in ns); a busy
        one cannot, and spends them instead of its own work, as system time (in ticks, sampled).
        The CPU time is taken when it grew by a measurable share of the window, else the system
        time."""
        if calls <= 0:
            return 0.0
        before_s, window_s = (s0[0] - base[0]) / 1e9, (s1[0] - s0[0]) / 1e9
        if before_s < 0.2 or window_s <= 0:
            return 0.0
        extra_cpu_ns = extra_ticks = 0.0
        for p in self.pids:
            (a_cpu, a_sys), (b_cpu, b_sys), (c_cpu, c_sys) = base[1][p], s0[1][p], s1[1][p]
            if None in (a_cpu, a_sys, b_cpu, b_sys, c_cpu, c_sys):
                return 0.0
            assert a_cpu is not None and b_cpu is not None and c_cpu is not None
            assert a_sys is not None and b_sys is not None and c_sys is not None
            extra_cpu_ns += (c_cpu - b_cpu) - (b_cpu - a_cpu) / before_s * window_s
            extra_ticks += (c_sys - b_sys) - (b_sys - a_sys) / before_s * window_s
        if extra_cpu_ns >= MIN_CPU_SHARE * window_s * 1e9:
            return extra_cpu_ns / calls
        if extra_ticks >= MIN_TICKS:
            return extra_ticks / CLK_TCK * 1e9 / calls
        return 0.0

    # -- the rest ---------------------------------------------------------------------------------
    def cancel(self, wait_s: float = 0.0) -> None:
        """End the count now (memtop is exiting): ``load`` detaches and returns at once; waits
        up to ``wait_s`` for that when a load is under way."""
        self._stop.set()
        if self._loading.is_set():
            self._idle.wait(wait_s)

    def _detach(self) -> None:
        fds, self._link_fds = self._link_fds, []
        # all at once: each close takes its breakpoint out, then waits for a grace period
        threads = [threading.Thread(target=_close_fd, args=(fd,), daemon=True) for fd in fds]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        if self.bpf is None:
            return
        for ev in self._events:
            bcc_compat.detach_uprobe_event(self.bpf, ev)
        self._events.clear()

    def poll(self) -> list[Record]:
        if self.result is None or self._handed:
            return []
        self._handed = True
        return [self.result]

    def close(self) -> None:
        self._stop.set()
        self._detach()
        super().close()

    def note(self) -> str:
        r = self.result
        return "" if r is None else f"counted for {r.window_ns / 1e9:.2f} s, detached"
