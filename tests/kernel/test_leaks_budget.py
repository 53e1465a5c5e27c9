"""Leak hunting on a CPU budget (issue 40, item 1), real: `memtop snapshot --leaks PID --budget 5%`
on a target doing 200,000 malloc+free/s across ten churning stacks (tests/workloads/budgetchurn.c)
with a leak from one more stack (faster than the issue's 1 MiB/min, so that it is found within a
minute), and the same churn without the leak. 5 %: the windows are planned on their measured
cost and memtop's own work is at most a tenth of a window's, so on 1 % a window comes every ~8 s,
too few for a test under a minute. The cost against the budget is measured by
bench/leaks_budget.py (from /proc), not asserted here."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from support import Leaker, Leakers, compile_c, memtop_cmd, run_snapshot, wait_until
from test_leaks_kernel import our_links, our_uprobes

from memtop.probes.leaks import LeaksProbe

RATE = 200_000
LEAK_BPS = 64 * 4096  # 256 KiB/s in 4 KiB blocks


def churn(leakers: Leakers, leak_bps: int) -> Leaker:
    """tests/workloads/budgetchurn.c at RATE pairs/s for 3 minutes, leaking ``leak_bps`` in 4 KiB
    blocks (none: 0)."""
    size = 4096 if leak_bps else 0
    return leakers.start([str(compile_c("budgetchurn")), str(RATE), str(leak_bps), str(size), "180"])


@pytest.mark.bpf
def test_budget_reports_the_leaking_stack_first(leakers: Leakers) -> None:
    target = churn(leakers, LEAK_BPS)
    doc = run_snapshot("leaks", 45, "--leaks", str(target.pid), "--budget", "5%", timeout=180)
    b = doc["budget"]
    assert b is not None and b["budget_pct"] == 5.0
    assert b["windows"] >= 2 and b["duty_pct"] is not None and b["duty_pct"] < 100
    assert b["resolve_rate"] is not None and b["resolve_rate"] > 0.5  # the churn's candidates resolve
    leaks = b["leaks"]
    assert leaks, b
    assert leaks[0]["frames"][0].startswith("leak_here+"), leaks[0]["frames"]
    assert leaks[0]["confidence"] >= 0.999 and leaks[0]["resolved"] == 0
    # every reported stack is the leak's (no churn called a leak)
    assert all(f["frames"][0].startswith("leak_here+") for f in leaks), [f["frames"][0] for f in leaks]
    # the candidates are blocks the target leaked: never more than it says it did
    leaked_bytes, leaked_count = target.leaked()
    assert (
        leaks[0]["unresolved"] <= leaked_count
        and leaks[0]["unresolved_bytes"] <= leaked_bytes + 16 * leaked_count
    )


@pytest.mark.bpf
def test_budget_no_leak_reports_none(leakers: Leakers) -> None:
    target = churn(leakers, 0)
    doc = run_snapshot("leaks", 45, "--leaks", str(target.pid), "--budget", "5%", timeout=180)
    b = doc["budget"]
    assert b is not None and b["windows"] >= 2, b
    assert b["resolve_rate"] is not None  # judged, not merely too early to tell
    assert b["leaks"] == [], [(f["frames"][0], f["confidence"]) for f in b["leaks"]]


@pytest.mark.bpf
def test_a_recording_keeps_the_windows_and_when_the_leak_began(leakers: Leakers, tmp_path: Path) -> None:
    """`memtop record --leaks PID --budget 5%` keeps the leak tables: replayed, the leak is there
    at the end with how long it had been growing, and was not yet at the start."""
    target = churn(leakers, LEAK_BPS)
    rec = tmp_path / "budget.jsonl.gz"
    cmd = memtop_cmd() + ["record", "--leaks", str(target.pid), "--budget", "5%", "--output", str(rec)]
    proc = subprocess.run(cmd + ["--duration", "45", "--quiet"], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    end = run_snapshot("leaks", 0, "--replay", str(rec))
    leaks = end["budget"]["leaks"]
    assert leaks and leaks[0]["frames"][0].startswith("leak_here+"), end["budget"]
    assert leaks[0]["growing_since_s"] is not None and leaks[0]["growing_since_s"] > 0
    start = run_snapshot("leaks", 0, "--replay", str(rec), "--at", "1")
    assert not (start["budget"] or {}).get("leaks"), start["budget"]


@pytest.mark.bpf
def test_closing_mid_window_leaves_no_uprobe(leakers: Leakers) -> None:
    """Closed while its window thread traces or waits, the budgeted probe leaves no uprobe and
    no thread behind (every exit path detaches every probe). A window's probes are uprobe_multi
    links (one for malloc and calloc's return probes), placed in the target alone, as the kernel
    shows them in /proc/self/fdinfo, and no perf-event uprobe."""
    target = churn(leakers, LEAK_BPS)
    # a large budget: each window waits until the budget has paid for it, and at 1 % the second
    # would come a minute or more after the first
    probe = LeaksProbe([target.pid], budget=0.2, calls_per_s=RATE)
    try:
        probe.load()
        wait_until(lambda: probe.candidates.window >= 1, "a first window")
        wait_until(lambda: bool(our_links()), "the probes attached again")  # mid-window
        links = our_links()
        assert our_uprobes() == []
        assert probe.multi_error == ""
    finally:
        probe.close()
    assert [(k["link_type"], k["pid"], k["uprobe_cnt"]) for k in links] == [
        ("uretprobe_multi", str(target.pid), "2")
    ], links
    assert "libc.so" in links[0]["path"]
    assert our_uprobes() == [] and our_links() == []
    assert not any(t.name == "memtop-leak-windows" for t in threading.enumerate())


#: the rate-jump test's first rate (pairs/s): at 5 % its windows trace most of every period, so
#: after the jump a slice planned for it would trace several times what it affords
JUMP_RATE = 2_000


@pytest.mark.bpf
def test_a_tenfold_rate_jump_ends_the_slice_on_the_budget(leakers: Leakers) -> None:
    """A real target whose allocation rate jumps tenfold (SIGUSR1) between two windows: the
    window planned at the old rate ends its slice once it has counted the calls the budget
    affords (not ten times as many), the next ones are planned at the new rate, and what the
    tracer counted as spent (the targets' added CPU from /proc and memtop's) is within the budget
    at the end. The cost against the budget from /proc, beside an untraced twin, is
    bench/leaks_budget.py's and bench/leaks_windows.py --jump-at's."""
    budget = 0.05
    target = leakers.start([str(compile_c("budgetchurn")), str(JUMP_RATE), "0", "0", "180"])
    probe = LeaksProbe([target.pid], budget=budget, calls_per_s=JUMP_RATE)

    def windows(n: int) -> Callable[[], bool]:
        def done() -> bool:
            probe.poll()  # as the live source does every tick: its CPU is counted too
            return len(probe.meter.log) >= n

        return done

    try:
        probe.load()
        wait_until(windows(3), "three windows at the first rate", timeout_s=120)
        before = list(probe.meter.log)
        target.proc.send_signal(signal.SIGUSR1)
        wait_until(windows(len(before) + 4), "four windows after the rate jump", timeout_s=120)
        after = list(probe.meter.log)[len(before) :]
    finally:
        probe.close()
    rate_before = sorted(w.calls / w.on_s for w in before)[1]
    rate_after = max(w.calls / w.on_s for w in after)
    assert rate_after >= 5 * rate_before, (rate_before, rate_after)  # the jump reached the windows
    for w in after:
        # a slice is checked SLICE_CHECKS times: it ends within a check of its cap
        assert w.slice_calls <= 3 * w.cap_calls, (w.slice_calls, w.cap_calls, after)
    jumped = [w for w in after if w.calls / w.on_s >= 5 * rate_before]
    assert len(jumped) >= 3, after  # and the windows after it were planned at the new rate
    last = after[-1]
    assert last.spent_s <= budget * last.elapsed_s, (last.spent_s, last.elapsed_s, after)
