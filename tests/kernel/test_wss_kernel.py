"""A process's working set (the drill-in's ``w``) against known answers: a workload that maps
1 GiB, touches it all once, then loops over 128 MiB reads 128 MiB over a 10 s window; one that
touches nothing reads near 0; both run on afterwards, their memory whole (/proc/PID/status)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from support import LineReader, compile_c, run_snapshot

from memtop.probes.wss import WssProbe
from memtop.records import Record
from memtop.records.process import WorkingSetStart, WorkingSetWindow

MiB = 1 << 20


@contextmanager
def hotset(total_mib: int, hot_mib: int) -> Iterator[tuple[subprocess.Popen[str], LineReader]]:
    proc = subprocess.Popen(
        [str(compile_c("hotset")), str(total_mib), str(hot_mib), "100000"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    lines = LineReader(proc.stdout, "hotset")
    try:
        lines.wait_for("ready", timeout_s=60)
        yield proc, lines
    finally:
        proc.kill()
        proc.wait()


def vm_rss(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.bpf
def test_working_set_of_a_hot_subset_and_of_an_idle_process() -> None:
    with hotset(1024, 128) as (busy, busy_lines), hotset(256, 0) as (idle, _):
        probes = [WssProbe(busy.pid, 10.0), WssProbe(idle.pid, 10.0)]
        got: dict[int, list[Record]] = {busy.pid: [], idle.pid: []}
        try:
            for p in probes:
                p.load()
            passes = len(busy_lines.lines_with("passes", 1))
            # the busy workload's "passes" lines (about one a second) pace the polls: a window
            # ends 10 s after the clear
            while not all(any(isinstance(r, WorkingSetWindow) for r in recs) for recs in got.values()):
                passes += 1
                busy_lines.lines_with("passes", passes)
                for p in probes:
                    got[p.pid] += p.poll()
                assert passes < 60, "no window in 60 s"
        finally:
            for p in probes:
                p.close()
        rss_before = vm_rss(busy.pid)
        after = len(busy_lines.lines_with("passes", 1))
        busy_lines.lines_with("passes", after + 2)  # it runs on, touching its hot set
        assert busy.poll() is None and idle.poll() is None
        assert vm_rss(busy.pid) >= rss_before - 4 * MiB  # nothing of it was taken away
    start = next(r for r in got[busy.pid] if isinstance(r, WorkingSetStart))
    assert start.window_ns == 10 * 10**9 and start.source == "referenced bits"
    w = next(r for r in got[busy.pid] if isinstance(r, WorkingSetWindow))
    assert abs(w.referenced_bytes - 128 * MiB) <= 0.10 * 128 * MiB, (w.referenced_bytes / MiB, w.mappings[:3])
    assert w.rss_bytes >= 1024 * MiB  # the whole map is resident: 7/8 of it is cold
    assert w.anon_referenced_bytes >= 128 * MiB - MiB
    top = w.mappings[0]
    assert top[0] == "[anon]" and top[1] >= 1024 * MiB and abs(top[3] - 128 * MiB) <= 2 * MiB
    assert w.end_ns - w.start_ns >= 10 * 10**9 - 10**6
    i = next(r for r in got[idle.pid] if isinstance(r, WorkingSetWindow))
    assert i.referenced_bytes <= 4 * MiB, i.mappings[:5]
    assert i.rss_bytes >= 256 * MiB


@pytest.mark.bpf
def test_snapshot_measures_only_with_its_flag() -> None:
    """`memtop snapshot --pane process --pid P --working-set 3`: one window of the hot set in the
    JSON; without the flag the section says nothing was measured (its bits were never cleared)."""
    with hotset(512, 64) as (busy, lines):
        plain = run_snapshot("process", 0, "--pid", str(busy.pid), "--section", "working_set")
        assert plain["working_set"] is None and plain["measured"] is False
        doc = run_snapshot("process", 0, "--pid", str(busy.pid), "--working-set", "3")
        after = len(lines.lines_with("passes", 1))
        lines.lines_with("passes", after + 1)  # it runs on
    assert doc["section"] == "working_set" and doc["measured"] is True
    wss = doc["working_set"]
    assert wss["source"] == "referenced bits" and wss["window_s"] == 3.0
    last = wss["latest"]
    assert abs(last["referenced_bytes"] - 64 * MiB) <= 0.10 * 64 * MiB, last
    assert last["rss_bytes"] >= 512 * MiB and doc["rows"][0]["name"] == "[anon]"
