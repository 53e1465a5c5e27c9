"""Fault stacks on a target with more threads than memtop's open-file limit allows.

Each traced thread costs two perf event fds. The probe runs in a process of its own with a low
RLIMIT_NOFILE (as a user's shell may set) against tests/workloads/manythreads.c (600 threads that
each take a known number of minor faults on command). Oracles: the threads' own
/proc/PID/task/TID/stat minflt, read before the probe attached, before the faults, after them and
after the probe's poll.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, compile_c

THREADS = 600
PAGES = 16

PROBE = r"""
import json, resource, sys
from memtop.probes.faultstack import FaultStackProbe
from memtop.records.process import FaultCoverage, FaultStack
probe = FaultStackProbe(int(sys.argv[1]))
probe.load()
print(json.dumps({"traced": probe.traced_tids(), "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)}), flush=True)
sys.stdin.readline()
recs = probe.poll()
cov = [r for r in recs if isinstance(r, FaultCoverage)][-1]
print(json.dumps({
    "minor": sum(r.minor_faults for r in recs if isinstance(r, FaultStack)),
    "total": cov.threads_total, "traced": cov.threads_traced, "uncovered": cov.threads_uncovered,
    "reason": cov.reason, "tids": probe.traced_tids(),
}), flush=True)
probe.close()
"""


class Threads:
    def __init__(self) -> None:
        exe = compile_c("manythreads", ["-pthread"])
        self.proc = subprocess.Popen(
            [str(exe), str(THREADS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().startswith("ready")
        self.pid = self.proc.pid

    def touch(self, pages: int) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"touch {pages}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().startswith("ok")

    def minflt(self) -> dict[int, int]:
        out = {}
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            text = (task / "stat").read_text()
            out[int(task.name)] = int(text[text.rindex(")") + 2 :].split()[7])
        return out


@pytest.fixture
def threads() -> Iterator[Threads]:
    t = Threads()
    try:
        yield t
    finally:
        t.proc.kill()
        t.proc.wait()


def run_probe(threads: Threads, soft: int, hard: int) -> tuple[dict[str, Any], dict[str, Any], str, int, int]:
    """The probe on ``threads`` under RLIMIT_NOFILE (soft, hard); its first line, its poll's line
    after PAGES faults per thread, its stderr, and the traced threads' minflt deltas bracketing
    the poll (faults between the brackets' reads: at least, at most)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    before_attach = threads.minflt()
    proc = subprocess.Popen(
        [sys.executable, "-c", PROBE, str(threads.pid)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=limit,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        first = json.loads(proc.stdout.readline() or "{}")
        assert first, proc.stderr.read() if proc.stderr else ""
        before = threads.minflt()
        threads.touch(PAGES)
        after = threads.minflt()
        proc.stdin.write("poll\n")
        proc.stdin.flush()
        polled = json.loads(proc.stdout.readline())
        after_poll = threads.minflt()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    traced = set(polled["tids"])
    assert traced == set(first["traced"])
    least = sum(after[t] - before[t] for t in traced)
    most = sum(after_poll[t] - before_attach[t] for t in traced)
    return first, polled, err, least, most


@pytest.mark.bpf
def test_threads_over_the_fd_limit_are_counted_not_printed(threads: Threads) -> None:
    first, polled, err, least, most = run_probe(threads, 256, 256)
    total = THREADS + 1  # and the main thread
    # how many it traces and how many it could not, and why, in the records the view shows
    assert polled["total"] == total
    assert 0 < polled["traced"] == len(polled["tids"]) < total
    assert polled["uncovered"] == total - polled["traced"]
    assert "RLIMIT_NOFILE is 256" in polled["reason"]
    # nothing printed per failed open (libbcc's "perf_event_open failed" lines, one per thread)
    assert "perf_event_open" not in err and "Too many open files" not in err
    assert len(err.splitlines()) < 10, err[-2000:]
    # the traced threads' faults, exactly as the kernel counted them in their own minflt
    assert least >= (polled["traced"] - 1) * PAGES  # the main thread only waits
    assert least <= polled["minor"] <= most, (least, polled["minor"], most)
    print(
        f"\n{polled['traced']} of {total} threads traced at RLIMIT_NOFILE 256: {polled['minor']} minor faults,"
        f" their minflt moved {least}..{most}"
    )


@pytest.mark.bpf
def test_soft_fd_limit_is_raised_to_trace_every_thread(threads: Threads) -> None:
    first, polled, err, least, most = run_probe(threads, 256, 4096)
    assert first["nofile"][0] == 4096  # soft raised to the hard limit
    assert polled["total"] == polled["traced"] == THREADS + 1 and polled["uncovered"] == 0
    assert polled["reason"] == ""
    assert least >= THREADS * PAGES  # every worker thread faulted its pages
    assert least <= polled["minor"] <= most, (least, polled["minor"], most)
    assert "perf_event_open" not in err
