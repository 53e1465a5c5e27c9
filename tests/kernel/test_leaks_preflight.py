"""The leaks preflight (issue 25, item 3) on real processes: a program doing malloc+free pairs at a
steady rate (tests/workloads/paced.c), counted for a second by entry probes alone. The counted
rate is within 10 % of what the program says it did in that same window; byte sampling is
proposed above the threshold and not below; once the count is over the target's malloc is its
own again and nothing of the preflight stays in the kernel; a target that exits during the count
ends it without harm; without a terminal memtop follows --sample-bytes, else the proposal."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from support import bpf_left_behind, compile_c, function_address, prog_ids_of, run_snapshot, wait_until
from test_leaks_kernel import our_links

from memtop.linux import bcc_compat
from memtop.probes.leakrate import LeakRateProbe
from memtop.records.leaks import LeakPreflight
from memtop.views.leaks import preflight_doc

LOW, HIGH = 5_000, 200_000  # pairs/s: ~0.01 CPU s/s traced exactly, and ~0.5


class Paced:
    """A running tests/workloads/paced.c and the (CLOCK_MONOTONIC ns, pairs) lines it printed."""

    def __init__(self, per_s: int, seconds: float) -> None:
        self.proc = subprocess.Popen(
            [str(compile_c("paced")), str(per_s), str(seconds)], stdout=subprocess.PIPE, text=True
        )
        self.points: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        wait_until(lambda: len(self.points) >= 3, "paced's first figures")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if len(parts) == 2:
                with self._lock:
                    self.points.append((int(parts[0]), int(parts[1])))

    def pairs_at(self, t_ns: int) -> float:
        """Pairs done by ``t_ns``, interpolated between the lines around it (waits for the next)."""
        wait_until(lambda: self.points[-1][0] >= t_ns, f"paced's figures past {t_ns}")
        with self._lock:
            pts = list(self.points)
        for (t0, n0), (t1, n1) in zip(pts, pts[1:], strict=False):
            if t0 <= t_ns <= t1:
                return n0 + (n1 - n0) * (t_ns - t0) / max(1, t1 - t0)
        raise AssertionError(f"{t_ns} is not within what paced printed ({pts[0][0]}..{pts[-1][0]})")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture(autouse=True)
def _headers() -> None:
    bcc_compat.ensure_headers()


@pytest.fixture
def paced() -> Iterator[list[Paced]]:
    made: list[Paced] = []
    yield made
    for p in made:
        p.kill()


def code(pid: int, addr: int, n: int = 16) -> bytes:
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(addr)
        return f.read(n)


@pytest.mark.bpf
@pytest.mark.parametrize(
    ("rate", "proposal", "links"), [(LOW, "exact", False), (HIGH, "sampled", False), (HIGH, "sampled", True)]
)
def test_the_count_matches_the_program_and_leaves_nothing(
    paced: list[Paced], rate: int, proposal: str, links: bool
) -> None:
    """The count (perf-event uprobes; with ``links``, uprobe_multi links, as on a budget) is
    the target's own count of its calls, and leaves no breakpoint, program or link behind."""
    p = Paced(rate, 60)
    paced.append(p)
    malloc = function_address(p.pid, "libc.so", "malloc")
    before = code(p.pid, malloc)
    probe = LeakRateProbe([p.pid], links=links)
    changed = threading.Event()
    done = threading.Event()

    def watch() -> None:  # the count's breakpoint, seen in the target's malloc while it runs
        while not done.is_set():
            if code(p.pid, malloc) != before:
                changed.set()
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    held_before = prog_ids_of(os.getpid())  # this process's other programs are not the count's
    try:
        probe.load()
        done.set()
        watcher.join()
        # detached as load() returns: the target's malloc is its own again
        assert code(p.pid, malloc) == before, "a breakpoint is still in the target's malloc"
        mine = prog_ids_of(os.getpid()) - held_before
        assert mine, "the count's programs are not loaded"
    finally:
        done.set()
        probe.close()
    assert changed.is_set(), "the count never put its breakpoint in malloc"
    assert bpf_left_behind(os.getpid(), mine) == {}
    assert probe.links == links and our_links() == []
    (rec,) = probe.poll()
    assert isinstance(rec, LeakPreflight) and rec.state == "measured", rec
    assert rec.allocator == "glibc" and 0.9e9 < rec.window_ns < 1.2e9
    t0, t1 = probe.window
    did = p.pairs_at(t1) - p.pairs_at(t0)
    assert did > 0.5 * rate * rec.window_ns / 1e9, f"paced fell behind its rate: {did} pairs"
    assert abs(rec.alloc_calls - did) <= 0.10 * did, (rec.alloc_calls, did)
    assert abs(rec.free_calls - did) <= 0.10 * did, (rec.free_calls, did)
    calls = dict(zip(rec.functions, rec.calls, strict=True))
    assert calls["malloc"] >= 0.9 * did and calls["free"] >= 0.9 * did, calls
    assert rec.program_ns > 0, "BPF stats gave no run time for the count programs"
    doc = preflight_doc(rec)
    assert doc is not None and doc["proposal"] == proposal, doc
    exact, sampled = doc["exact_cost_cpu"], doc["sampled_cost_cpu"]
    assert exact is not None and sampled is not None and exact > sampled > 0
    assert doc["own_cost_cpu_s"] is not None and doc["own_cost_cpu_s"] < 1.0


@pytest.mark.bpf
def test_a_target_exiting_during_the_count(paced: list[Paced]) -> None:
    p = Paced(LOW, 60)
    paced.append(p)
    malloc = function_address(p.pid, "libc.so", "malloc")
    before = code(p.pid, malloc)
    probe = LeakRateProbe([p.pid], window_s=3.0)

    def kill_once_counted() -> None:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                if code(p.pid, malloc) != before:
                    time.sleep(0.3)
                    p.proc.kill()
                    return
            except OSError:
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_once_counted, daemon=True)
    killer.start()
    held_before = prog_ids_of(os.getpid())  # this process's other programs are not the count's
    try:
        probe.load()
        mine = prog_ids_of(os.getpid()) - held_before
    finally:
        probe.close()
    killer.join()
    p.proc.wait()
    assert bpf_left_behind(os.getpid(), mine) == {}
    (rec,) = probe.poll()
    assert isinstance(rec, LeakPreflight) and rec.state == "exited" and str(p.pid) in rec.message, rec
    doc = preflight_doc(rec)
    assert doc is not None and doc["state"] == "exited"


@pytest.mark.bpf
@pytest.mark.parametrize(
    ("rate", "extra", "decision", "by", "sample"),
    [
        (HIGH, (), "sampled", "proposal", 524288),
        (LOW, (), "exact", "proposal", None),
        (HIGH, ("--sample-bytes", "0"), "exact", "--sample-bytes", None),
    ],
)
def test_without_a_terminal_the_flag_else_the_proposal(
    paced: list[Paced], rate: int, extra: tuple[str, ...], decision: str, by: str, sample: int | None
) -> None:
    p = Paced(rate, 60)
    paced.append(p)
    doc = run_snapshot("leaks", 1.5, "--leaks", str(p.pid), *extra)
    pf = doc["preflight"]
    assert pf["state"] == "measured" and pf["decision"] == decision and pf["decided_by"] == by, pf
    assert pf["allocation_calls_per_s"] > 0.5 * rate
    assert doc["probes"]["leaks"]["state"] == "attached", doc["probes"]
    assert doc["probes"]["leakrate"]["state"] == "detached", doc["probes"]
    assert doc["sample_bytes"] == sample
