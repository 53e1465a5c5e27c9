"""Case: what "needed, not just used" costs (issue 38).

* A working-set window of a 1 GiB process (the drill-in's ``w``: clear_refs, then smaps
  Referenced 10 s later): memtop's CPU per window (the clear and the read, as the probe measures
  them: its thread's CPU time, kernel time included), and the slowdown of the target, a workload
  looping over its 128 MiB hot set flat out (tests/workloads/hotset.c), as its passes per second
  over a bare 10 s against a measured window, alternated over rounds, medians quoted. Target:
  ≤ 0.5 s of CPU a window, ≤ 1.05× slowdown.
* The Cgroups pane's NEEDED column for 500 cgroups (each a v1 memcg of its own with a sleeping
  process, as bench/cgroups_cost.py makes them): what computing it adds to a tick of the pane, in
  ms, and so in % of a core at 1 s refresh. Target: ≤ 2 % of a core.

usage: sudo .venv/bin/python bench/needed_cost.py [ROUNDS]"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from harness import QUIET_S, machine, save

from memtop.linux import cgroupfs
from memtop.probes.cgroups import CgroupsProbe
from memtop.probes.wss import WssProbe
from memtop.records import Batch
from memtop.records.process import WorkingSetStart, WorkingSetWindow
from memtop.state import State
from memtop.state.cgroups import CgroupsState
from memtop.stream.bridge import now_ns
from memtop.views import get_view

ROOT = Path(__file__).resolve().parent.parent
WINDOW_S = 10.0


def cpu_s(pid: int) -> float:
    """utime + stime of ``pid``, seconds."""
    text = Path(f"/proc/{pid}/stat").read_text()
    f = text[text.rindex(")") + 2 :].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


class Passes:
    """The workload's "passes N" lines with the time each was read and its CPU time then."""

    def __init__(self, stream: IO[str], pid: int) -> None:
        self.pid = pid
        self.points: list[tuple[float, int, float]] = []
        self.ready = threading.Event()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            if line.startswith("ready"):
                self.ready.set()
            elif line.startswith("passes"):
                self.points.append((time.monotonic(), int(line.split()[1]), cpu_s(self.pid)))

    def rate(self, t0: float, t1: float) -> tuple[float, float]:
        """Passes per second, and per CPU second of the workload, between the first line after
        ``t0`` and the last before ``t1``. The second is what clearing its bits costs the
        workload itself; the first adds whatever else the shared machine ran meanwhile."""
        inside = [p for p in self.points if t0 <= p[0] <= t1]
        (a_t, a_n, a_c), (b_t, b_n, b_c) = inside[0], inside[-1]
        return (b_n - a_n) / (b_t - a_t), (b_n - a_n) / max(b_c - a_c, 1e-9)


def hotset_exe() -> Path:
    out = Path("/tmp/memtop-bench-hotset")
    src = ROOT / "tests" / "workloads" / "hotset.c"
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["gcc", "-O1", "-o", str(out), str(src)], check=True)
    return out


def wss_rounds(rounds: int) -> dict[str, Any]:
    proc = subprocess.Popen([str(hotset_exe()), "1024", "128", "0"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    passes = Passes(proc.stdout, proc.pid)
    bare: list[tuple[float, float]] = []
    measured: list[tuple[float, float]] = []
    cpu_ms: list[float] = []
    wall_ms: list[float] = []
    start_cpu_ms: list[float] = []
    referenced: list[int] = []
    try:
        assert passes.ready.wait(120), "hotset did not start"
        time.sleep(QUIET_S)
        for i in range(rounds * 2):
            if (i + i // 2) % 2 == 0:  # bare, measured, measured, bare, …: no order favoured
                t0 = time.monotonic()
                time.sleep(WINDOW_S)
                bare.append(passes.rate(t0, time.monotonic()))
                continue
            probe = WssProbe(proc.pid, WINDOW_S)
            t0 = time.monotonic()
            probe.load()
            window: WorkingSetWindow | None = None
            first = probe.poll()  # the start record: the first clear's cost
            start_cpu_ms.append(next(r.cost_cpu_ns for r in first if isinstance(r, WorkingSetStart)) / 1e6)
            while window is None:
                time.sleep(0.5)
                window = next((r for r in probe.poll() if isinstance(r, WorkingSetWindow)), None)
            t1 = time.monotonic()
            probe.close()
            measured.append(passes.rate(t0, t1))
            cpu_ms.append(window.cost_cpu_ns / 1e6)
            wall_ms.append(window.cost_wall_ns / 1e6)
            referenced.append(window.referenced_bytes)
    finally:
        proc.kill()
        proc.wait()
    b_wall, m_wall = statistics.median(b[0] for b in bare), statistics.median(m[0] for m in measured)
    b_cpu, m_cpu = statistics.median(b[1] for b in bare), statistics.median(m[1] for m in measured)
    return {
        "bare_passes_per_s": b_wall,
        "measured_passes_per_s": m_wall,
        "bare_passes_per_cpu_s": b_cpu,
        "measured_passes_per_cpu_s": m_cpu,
        # medians of each: the rounds are alternated, a ratio per pair would pair unlike neighbours
        "slowdown": b_wall / m_wall,
        "slowdown_cpu": b_cpu / m_cpu,
        "rounds_bare": [[round(w, 1), round(c, 1)] for w, c in bare],
        "rounds_measured": [[round(w, 1), round(c, 1)] for w, c in measured],
        "window_cpu_ms": statistics.median(cpu_ms),
        "window_cpu_ms_max": max(cpu_ms),
        "window_wall_ms": statistics.median(wall_ms),
        "start_cpu_ms": statistics.median(start_cpu_ms),
        "referenced_mib": statistics.median(referenced) / (1 << 20),
    }


@contextmanager
def many_cgroups(n: int = 500) -> Iterator[None]:
    """``n`` sleeping processes, each in a v1 memcg of its own (named after this process, so
    benchmarks run side by side do not collide), as bench/cgroups_cost.py makes them."""
    lay = cgroupfs.layout()
    assert lay.memory is not None, "no memory controller"
    top = Path(lay.memory.mountpoint)
    limit = "memory.limit_in_bytes" if lay.memory.version == 1 else "memory.max"
    made: list[Path] = []
    sleepers: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(n):
            p = subprocess.Popen(["sleep", "3600"])
            sleepers.append(p)
            d = top / f"memtop-needed-{os.getpid()}-{i:03d}"
            d.mkdir()
            made.append(d)
            (d / limit).write_text(str(64 << 20))
            (d / "cgroup.procs").write_text(str(p.pid))
        yield
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
        for d in reversed(made):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def needed_tick(ticks: int = 30) -> dict[str, float]:
    """A tick of the Cgroups pane with the cgroups there now: the needed estimate of every row
    (what the column adds), and the view's whole document for scale, in ms of this thread's CPU
    time (medians: wall time on a shared machine is mostly the others' load)."""
    probe = CgroupsProbe()
    probe.load()
    state = State(mode="bpf")
    try:
        for _ in range(3):  # two readings at least: the rates have a window
            state.apply(Batch(now_ns(), tuple(probe.poll())))
            time.sleep(1.0)
    finally:
        probe.close()
    st = state.get(CgroupsState)
    view = get_view("cgroups")
    needed: list[float] = []
    document: list[float] = []
    for _ in range(ticks):
        t0 = time.thread_time()
        for r in st.rows.values():
            r.needed(st.polled_ns)
        needed.append((time.thread_time() - t0) * 1e3)
        t0 = time.thread_time()
        view.document(state, view.default_options())
        document.append((time.thread_time() - t0) * 1e3)
    return {
        "needed_ms": statistics.median(needed),
        "document_ms": statistics.median(document),
        "cgroups": float(len(st.rows)),
    }


def main(rounds: int = 3) -> dict[str, Any]:
    with many_cgroups():
        time.sleep(QUIET_S)
        tick = needed_tick()
    wss = wss_rounds(rounds)
    result: dict[str, Any] = {
        "machine": machine(),
        "rounds": rounds,
        "window_s": WINDOW_S,
        "wss": wss,
        "needed": {**tick, "cpu_pct": tick["needed_ms"] / 10},  # ms per 1 s tick -> % of a core
    }
    save("needed_cost", result)
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3), indent=1))
