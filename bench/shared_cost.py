"""Case: the Shared pane's cost (issue 27: with the pane shown, memtop <= 2 % of a core; the
madvise filter's cost on a madvise-heavy loop; nothing on a fault-heavy workload).

Three measures, alternated over rounds, medians quoted:

* in process, one tick of the pane on a machine with 300 extra processes, 20 System V segments
  and a process holding memfds: the sharedinfo probe's poll (a scan of every process's status,
  fds and maps every 5th tick: the mean over 30 ticks is quoted, and a scan tick alone), the shared
  probe's poll, the state's apply and the view's document (what the TUI draws from, once a
  second); ms per second of ticks is % of a core;
* a madvise loop on one page (bench/workloads/madvise_loop.c), ns per call, bare and with the
  shared probe attached: MADV_NORMAL (what the in-kernel filter drops: the cost every ordinary
  madvise pays) and MADV_HUGEPAGE (traced: an event each);
* getppid in a loop, bare and with the probe: what every other syscall of the machine pays while
  syscall tracepoints are enabled (the kernel then takes its syscall-tracing path for every task);
* the fault-heavy workload (bench/workloads/refault.c, 64 MiB re-faulted 32x), ns per fault,
  bare and with the shared probe attached: no program runs on a fault.

usage: sudo .venv/bin/python bench/shared_cost.py [ROUNDS]"""

from __future__ import annotations

import ctypes
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from harness import alternate, build, machine, nothing, parse_kv, save, summary

from memtop.probes.shared import SharedinfoProbe, SharedProbe, ShmSnoopProbe
from memtop.records import Batch
from memtop.records.shared import SharedScan
from memtop.state import State
from memtop.views import get_view

ROOT = Path(__file__).resolve().parent.parent
SLEEPERS = 300
SEGMENTS = 20
MADV_HUGEPAGE = 14


@contextmanager
def shared_probe(cls: type[SharedProbe] = SharedProbe) -> Iterator[SharedProbe]:
    """The shared BPF program (at start: migrations, khugepaged) attached (and drained) for the
    duration; ``cls`` ShmSnoopProbe: the syscall tracepoints, attached while the pane is shown."""
    probe = cls()
    probe.load()
    try:
        yield probe
    finally:
        probe.poll()
        probe.close()


@contextmanager
def snoop_probe() -> Iterator[SharedProbe]:
    with shared_probe(ShmSnoopProbe) as probe:
        yield probe


@contextmanager
def busy_machine() -> Iterator[None]:
    """SLEEPERS processes, SEGMENTS attached 1 MiB segments and a process with memfds."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support import compile_c

    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(SLEEPERS)]
    work = subprocess.Popen(
        [str(compile_c("shmwork"))], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert work.stdin is not None and work.stdout is not None
    work.stdout.readline()
    ids: list[int] = []

    def do(cmd: str) -> str:
        assert work.stdin is not None and work.stdout is not None
        work.stdin.write(cmd + "\n")
        work.stdin.flush()
        return work.stdout.readline().split()[1]

    try:
        for i in range(SEGMENTS):
            ids.append(int(do(f"get {0x6D656E00 + i} 1048576")))
            do(f"at {ids[-1]}")
        for i in range(4):
            do(f"memfd bench-{i} 1048576 1")
        yield
    finally:
        work.kill()
        work.wait()
        for p in sleepers:
            p.kill()
            p.wait()
        libc = ctypes.CDLL(None, use_errno=True)
        for s in ids:
            libc.shmctl(s, 0, None)  # IPC_RMID


def tick_ms(ticks: int = 30) -> dict[str, float]:
    info = SharedinfoProbe()
    info.load()
    state = State(mode="bpf")
    view = get_view("shared")
    opts = view.default_options()
    with shared_probe() as trace, snoop_probe() as snoop:
        per: dict[str, list[float]] = {"info": [], "trace": [], "apply": [], "document": [], "scan": []}
        ts = time.monotonic_ns()
        for i in range(ticks):
            t0 = time.perf_counter()
            recs = info.poll()
            t1 = time.perf_counter()
            recs += trace.poll() + snoop.poll()
            t2 = time.perf_counter()
            state.apply(Batch(ts + i * 1_000_000_000, tuple(recs)))
            t3 = time.perf_counter()
            view.document(state, opts)
            t4 = time.perf_counter()
            if i:  # the first tick reads everything for the first time
                per["info"].append((t1 - t0) * 1e3)
                per["trace"].append((t2 - t1) * 1e3)
                per["apply"].append((t3 - t2) * 1e3)
                per["document"].append((t4 - t3) * 1e3)
                if any(isinstance(r, SharedScan) for r in recs):
                    per["scan"].append((t1 - t0) * 1e3)
            time.sleep(0.05)
    mean = {k: statistics.fmean(v) for k, v in per.items()}
    return {
        "info_ms_mean": mean["info"],
        "scan_tick_ms": statistics.median(per["scan"]),
        "trace_ms_mean": mean["trace"],
        "apply_ms_mean": mean["apply"],
        "document_ms_mean": mean["document"],
        "tick_ms_mean": mean["info"] + mean["trace"] + mean["apply"] + mean["document"],
    }


def main(rounds: int = 5) -> dict[str, Any]:
    loop, refault = build("madvise_loop"), build("refault")

    def madvise_normal() -> dict[str, float]:
        out = subprocess.run([str(loop), "200000", "0"], capture_output=True, text=True, check=True).stdout
        return parse_kv(out)

    def madvise_huge() -> dict[str, float]:
        out = subprocess.run(
            [str(loop), "20000", str(MADV_HUGEPAGE)], capture_output=True, text=True, check=True
        ).stdout
        return parse_kv(out)

    def getppid() -> dict[str, float]:
        out = subprocess.run([str(loop), "500000", "-1"], capture_output=True, text=True, check=True).stdout
        return parse_kv(out)

    def faults() -> dict[str, float]:
        out = subprocess.run([str(refault), "64", "32"], capture_output=True, text=True, check=True).stdout
        return parse_kv(out)

    # at start: the shared probe; while the pane is shown: shmsnoop's syscall tracepoints too
    variants: dict[str, Callable[[], AbstractContextManager[object]]] = {
        "bare": nothing,
        "shared probe": shared_probe,
        "shmsnoop": snoop_probe,
    }
    normal = alternate(variants, madvise_normal, "ns_per_call", rounds=rounds)
    huge = alternate(variants, madvise_huge, "ns_per_call", rounds=rounds)
    other = alternate(variants, getppid, "ns_per_call", rounds=rounds)
    fault = alternate({"bare": nothing, "shared probe": shared_probe}, faults, "ns_per_fault", rounds=rounds)
    ticks = []
    with busy_machine():
        for _ in range(max(1, rounds // 2)):
            ticks.append(tick_ms())
    tick = {k: statistics.median(t[k] for t in ticks) for k in ticks[0]}
    result: dict[str, Any] = {
        "machine": machine(),
        "rounds": rounds,
        "processes_added": SLEEPERS,
        "segments_added": SEGMENTS,
        "pane_tick": tick,
        # the pane's share of a core at 1 s refresh: its probes' polls, the state and the view
        "pane_cpu_pct": tick["tick_ms_mean"] / 10,
        "madvise_normal": summary(normal, "bare"),
        "madvise_hugepage": summary(huge, "bare"),
        # any syscall: enabled syscall tracepoints send every task's syscalls through the slow path
        "other_syscall": summary(other, "bare"),
        "fault_heavy": summary(fault, "bare"),
    }
    save("shared_cost", result)
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5), indent=1))
