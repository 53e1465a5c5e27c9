"""Benchmark harness: build workloads, start/stop observers (memtop headless, bpftrace, bcc tools),
alternate A/B/C runs, report medians and ratios. Public tools only (gcc, bpftrace, bcc tools, the
kernel's rusage and /proc accounting; pytest-benchmark for the micro-cases in test_micro.py); each
figure is the median of >= 5 alternating runs in one session. Whole-command timers (hyperfine,
/usr/bin/time) time the command they run; in cases 1-3 the variant is an observer running beside
an unchanged workload, so the harness alternates the observers itself and reads the workload's
own times."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
VENV_MEMTOP = ROOT / ".venv" / "bin" / "memtop"
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
BUILD = Path(tempfile.gettempdir()) / "memtop-bench-bin"


def build(name: str, *flags: str) -> Path:
    BUILD.mkdir(exist_ok=True)
    src = BENCH / "workloads" / f"{name}.c"
    out = BUILD / name
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(
            ["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", str(out), str(src), *flags], check=True
        )
    return out


def memtop_cmd() -> list[str]:
    return [str(VENV_MEMTOP)] if VENV_MEMTOP.exists() else [sys.executable, "-m", "memtop"]


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Ask an observer to finish (SIGINT: detach and print), kill it if it does not."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def memtop_ready(
    *extra: str, root: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, Any]]]:
    """memtop's full app, headless (a processes snapshot that never comes), from its start until it
    is stopped; yields once every default probe is attached or failed, with what memtop wrote to
    MEMTOP_READY_FILE (first_frame_s, settled_s, the probes' states). ``root``: run that checkout's
    memtop with this venv's Python (bench/startup_ab.py)."""
    tmp = Path(tempfile.mkdtemp(prefix="memtop-bench-"))
    ready = tmp / "ready"
    env = dict(os.environ, MEMTOP_READY_FILE=str(ready))
    cmd, cwd = memtop_cmd(), None
    if root is not None:
        cmd, cwd = [str(VENV_PYTHON), "-m", "memtop"], root
        env["PYTHONPATH"] = str(root)
    proc = subprocess.Popen(
        cmd
        + [
            "snapshot",
            "--pane",
            "processes",
            "--format",
            "json",
            "--output",
            str(tmp / "out.json"),
            "--after",
            "100000",
            *extra,
        ],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        doc: dict[str, Any] | None = None
        while doc is None:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"memtop exited early: {proc.stderr.read().decode() if proc.stderr else ''}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError("memtop did not attach its probes within 120 s")
            time.sleep(0.05)
            try:
                doc = json.loads(ready.read_text())
            except (OSError, ValueError):  # not written yet, or half written
                doc = None
        yield proc, doc
    finally:
        stop(proc)


@contextmanager
def memtop_headless(*extra: str, interval: float = 1.0) -> Iterator[subprocess.Popen[bytes]]:
    """memtop's full app, headless, with every default probe attached (waits until they are)."""
    with memtop_ready("--interval", str(interval), *extra) as (proc, _):
        time.sleep(0.3)
        yield proc


#: the machine as bench/memtop_self.py and bench/startup_ab.py measure memtop on it
CONDITIONS = ("idle", "1000 sleepers", "fault storm")


#: seconds between one condition's end and the next one's start. A fault storm started right after a
#: memtop watching 1,000 processes exited (and the 1,000 were killed) drew memtop's first frame
#: later than one started on a quiet machine, and no longer did with this gap (docs/performance.md).
#: No guest CPU was busy in between (/proc/stat): the freed memory going back to the host is the
#: likely cause (fresh-memory faults are host-bound).
QUIET_S = 5.0


@contextmanager
def load_condition(name: str, settle_s: float = 0.0) -> Iterator[None]:
    """``name`` from CONDITIONS for the duration: nothing, 1,000 spawned ``sleep`` processes, or
    two loops of the re-faulting workload (a fault storm on both vCPUs here)."""
    procs: list[subprocess.Popen[bytes]] = []
    if name == "1000 sleepers":
        procs = [subprocess.Popen(["sleep", "600"]) for _ in range(1000)]
    elif name == "fault storm":
        refault = build("refault")
        procs = [
            subprocess.Popen(
                ["sh", "-c", f"while :; do {refault} 64 32 >/dev/null; done"], start_new_session=True
            )
            for _ in range(2)
        ]
    elif name != "idle":
        raise ValueError(f"unknown condition {name!r}")
    try:
        time.sleep(settle_s)
        yield
    finally:
        for p in procs:
            if name == "fault storm":
                os.killpg(p.pid, signal.SIGKILL)
            else:
                p.kill()
        for p in procs:
            p.wait()


@contextmanager
def background(cmd: list[str], settle_s: float = 3.0) -> Iterator[subprocess.Popen[bytes]]:
    """Another observer (bpftrace, a bcc tool) running for the duration."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(settle_s)
    if proc.poll() is not None:
        raise RuntimeError(f"{cmd[0]} exited early with {proc.returncode}")
    try:
        yield proc
    finally:
        stop(proc)


@contextmanager
def polled(probe: Any) -> Iterator[None]:
    """``probe`` loaded and polled once a second on a thread, as the bridge does; the body runs
    after a second attached. Closed after, and half a second left for the target to settle."""
    import threading

    probe.load()
    stop = threading.Event()

    def poller() -> None:
        while not stop.wait(1.0):
            probe.poll()

    t = threading.Thread(target=poller, daemon=True)
    t.start()
    try:
        time.sleep(1.0)
        yield
    finally:
        stop.set()
        t.join()
        probe.close()
        time.sleep(0.5)


@contextmanager
def nothing() -> Iterator[None]:
    yield None


def process_cpu_s(pid: int) -> float:
    """CPU time of process ``pid`` so far (every thread's, the exited ones' too), in seconds, to the
    nanosecond: its CPU-time clock (clock_getcpuclockid(3), any process on Linux). /proc/PID/stat's
    utime + stime come in clock ticks (10 ms), so a 30 s window of a program using 0.25 s a minute
    read them to +-0.04 s a minute, more than the gap a target is judged by."""
    clock = ctypes.c_int()
    err = _LIBC.clock_getcpuclockid(pid, ctypes.byref(clock))
    if err:
        raise OSError(err, os.strerror(err), f"clock_getcpuclockid({pid})")
    return time.clock_gettime(clock.value)


_LIBC = ctypes.CDLL(None, use_errno=True)


def status_kb(pid: int, *keys: str) -> dict[str, int]:
    """The named /proc/PID/status fields in kB (RssAnon, RssFile, VmRSS, ...); 0 when absent."""
    out = dict.fromkeys(keys, 0)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in out:
            out[name] = int(value.split()[0])
    return out


def parse_kv(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for tok in text.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            try:
                out[k] = float(v)
            except ValueError:
                pass
    return out


def alternate_all(
    variants: Mapping[str, Callable[[], AbstractContextManager[object]]],
    run_once: Callable[[], dict[str, float]],
    rounds: int = 5,
    per_round: int = 3,
) -> dict[str, dict[str, list[float]]]:
    """For each round, for each variant: enter its context, run the workload ``per_round`` times.
    Rounds alternate A B C A B C …; returns every sample of every metric ``run_once`` reports,
    as {metric: {variant: samples}}."""
    samples: dict[str, dict[str, list[float]]] = {}
    for _ in range(rounds):
        for name, ctx in variants.items():
            with ctx():
                for _ in range(per_round):
                    for metric, value in run_once().items():
                        samples.setdefault(metric, {k: [] for k in variants})[name].append(value)
    return samples


def alternate(
    variants: Mapping[str, Callable[[], AbstractContextManager[object]]],
    run_once: Callable[[], dict[str, float]],
    metric: str,
    rounds: int = 5,
    per_round: int = 3,
) -> dict[str, list[float]]:
    """``alternate_all`` for one metric: every sample of ``metric`` per variant."""
    return alternate_all(variants, run_once, rounds, per_round)[metric]


def summary(samples: dict[str, list[float]], base: str) -> dict[str, dict[str, float]]:
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {
        k: {"median": med[k], "min": min(v), "max": max(v), "n": len(v), "ratio": med[k] / med[base]}
        for k, v in samples.items()
    }


def machine() -> str:
    cpu = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return f"{os.uname().release}, {os.cpu_count()} CPUs ({cpu}), {time.strftime('%Y-%m-%d')}"


def save(name: str, result: dict[str, object]) -> None:
    out = BENCH / "results"
    out.mkdir(exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")


def pane_tick_ms(
    probe: Any, view_name: str, ticks: int = 30, pause_s: float = 0.0
) -> tuple[dict[str, float], Any]:
    """One pane's work per tick in this process, ``probe`` already loaded: its poll, the state's
    apply and the view's document, in ms (medians; the first tick, which reads everything for the
    first time, left out), and the state they built."""
    from memtop.records import Batch
    from memtop.state import State
    from memtop.views import get_view

    state = State(mode="bpf")
    view = get_view(view_name)
    opts = view.default_options()
    poll, apply, doc = [], [], []
    ts = time.monotonic_ns()
    for i in range(ticks):
        t0 = time.perf_counter()
        recs = probe.poll()
        t1 = time.perf_counter()
        state.apply(Batch(ts + i * 1_000_000_000, tuple(recs)))
        t2 = time.perf_counter()
        view.document(state, opts)
        t3 = time.perf_counter()
        if i:
            poll.append((t1 - t0) * 1e3)
            apply.append((t2 - t1) * 1e3)
            doc.append((t3 - t2) * 1e3)
        if pause_s:
            time.sleep(pause_s)
    return {
        "poll_ms": statistics.median(poll),
        "apply_ms": statistics.median(apply),
        "document_ms": statistics.median(doc),
        "tick_ms": statistics.median(p + a + d for p, a, d in zip(poll, apply, doc, strict=True)),
    }, state
