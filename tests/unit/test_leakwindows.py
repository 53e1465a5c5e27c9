"""Leak hunting on a CPU budget (issue 40, item 1), the pure parts: windows sized to the budget,
candidates followed across windows, the verdict's statistics and its memory bound. The real
tracer on a real target is tests/kernel/test_leaks_budget.py."""

from __future__ import annotations

import math
import random

import pytest

from memtop.core import leakcost
from memtop.probes import leakwindows
from memtop.probes.leakwindows import Candidates, binomial_tail, plan_window
from memtop.records.leaks import LEAK_CONFIDENCE

Blocks = dict[tuple[int, int], tuple[tuple[int, int], int, int]]


@pytest.mark.parametrize("rate", [0.0, 1e3, 1e5, 2e5, 1e6])
@pytest.mark.parametrize("budget", [0.005, 0.01, 0.05])
def test_a_window_costs_no_more_than_the_budget(rate: float, budget: float) -> None:
    overhead, latency = 0.03, 0.1
    on, period = plan_window(budget, rate, overhead, latency)
    assert leakwindows.MIN_ON_S <= on <= period
    per_s = leakcost.estimate(rate, rate).exact_cpu
    cost = (overhead + per_s * (on + latency)) / period
    feasible = (overhead + per_s * (latency + leakwindows.MIN_ON_S)) / budget <= leakwindows.MAX_PERIOD_S
    if feasible:
        assert cost <= budget * 1.0001, (on, period, cost)
    else:  # the longest period and the shortest slice: over budget, as the cost shown says
        assert period == leakwindows.MAX_PERIOD_S and on == leakwindows.MIN_ON_S
    if rate == 0:
        assert on == period  # nothing to pay for: trace all the time


def test_memtops_own_work_is_a_tenth_of_a_window_at_most() -> None:
    """At 200k calls/s on 1 % a window's own work (6 ms: attach, detach, the table's scan) would
    take most of the shortest period's budget (2 s, 16 ms): the period stretches until it is a
    tenth, and the slice spends the rest."""
    budget, overhead, latency = 0.008, 0.006, 0.005
    on, period = plan_window(budget, 2e5, overhead, latency)
    assert period > leakwindows.MIN_PERIOD_S and on > leakwindows.MIN_ON_S
    assert overhead == pytest.approx(leakwindows.MAX_OWN_SHARE * budget * period)
    per_s = leakcost.estimate(2e5, 2e5).exact_cpu
    assert overhead + per_s * (on + latency) == pytest.approx(budget * period)


def test_binomial_tail() -> None:
    def exact(n: int, s: float, u: int) -> float:
        return sum(math.comb(n, k) * s**k * (1 - s) ** (n - k) for k in range(u, n + 1))

    for n, s, u in [(10, 0.1, 0), (10, 0.1, 1), (10, 0.1, 3), (40, 0.03, 2), (5, 0.5, 5), (200, 0.01, 9)]:
        assert binomial_tail(n, s, u) == pytest.approx(exact(n, s, u), rel=1e-9, abs=1e-300)
    assert binomial_tail(3, 0.2, 4) == 0.0


class Target:
    """A simulated target as the address table shows it at each window's end: ten churning
    stacks whose 16 blocks in flight sit at addresses the allocator hands out again (new blocks,
    new birth times), and a leaking stack whose blocks stay."""

    def __init__(self, leak_per_window: int, seed: int = 1) -> None:
        self.rng = random.Random(seed)
        self.leak_per_window = leak_per_window
        self.leaked: Blocks = {}
        self.ts = 0
        self.next_leak = 0x7000_0000

    def window(self) -> Blocks:
        blocks: Blocks = {}
        for stack in range(10):
            pool = [0x1000_0000 + stack * 0x10000 + 64 * i for i in range(24)]
            for addr in self.rng.sample(pool, 16):  # 16 in flight out of a recycled pool
                self.ts += 1
                blocks[(1, addr)] = ((1, stack), 64, self.ts)
        for _ in range(self.leak_per_window):
            self.ts += 1
            self.leaked[(1, self.next_leak)] = ((1, 99), 4096, self.ts)
            self.next_leak += 4096
        blocks.update(self.leaked)
        return blocks


def test_a_leak_is_found_and_churn_is_not() -> None:
    c, t = Candidates(), Target(leak_per_window=3)
    for _ in range(3):
        c.end_window(t.window())
    found = c.leaks()
    assert [k for k, _v in found] == [(1, 99)]
    v = found[0][1]
    assert v.confidence >= LEAK_CONFIDENCE and v.unresolved == 9 and v.resolved == 0
    assert v.unresolved_bytes == 9 * 4096
    assert c.p_resolve is not None and c.p_resolve > 0.9
    assert all(c.stacks[(1, s)].confidence < LEAK_CONFIDENCE for s in range(10))


def test_no_leak_no_report_over_many_windows() -> None:
    c, t = Candidates(), Target(leak_per_window=0, seed=7)
    for _ in range(300):
        c.end_window(t.window())
        assert c.leaks() == []
    # and the candidates followed stay what is live, not everything ever seen
    assert len(c.live) == 160


def test_survivors_of_one_window_are_no_leak_however_long_it_runs() -> None:
    """Blocks from one window that never go (a structure built once) give a confidence that
    stays below reporting while the other stacks' resolve rate sharpens over hundreds of
    windows; a second window's survivor from the same stack makes it a leak."""
    c, t = Candidates(), Target(leak_per_window=0, seed=5)
    built = {(1, 0x8000_0000 + 4096 * i): ((1, 77), 4096, 10**9 + i) for i in range(2)}
    c.end_window(t.window() | built)
    for _ in range(300):
        c.end_window(t.window() | built)
        assert c.leaks() == []
    assert 0 < c.stacks[(1, 77)].confidence <= leakwindows.SINGLE_WINDOW_CONFIDENCE
    later = {(1, 0x8100_0000): ((1, 77), 4096, 10**9 + 99)}
    c.end_window(t.window() | built | later)
    c.end_window(t.window() | built | later)
    assert [k for k, _v in c.leaks()] == [(1, 77)]


def test_a_stack_that_frees_late_is_no_leak() -> None:
    """A cache: its blocks outlive a window, then are freed; a few stragglers are no leak."""
    c, t = Candidates(), Target(leak_per_window=0, seed=3)
    cache: Blocks = {}
    for w in range(60):
        blocks = t.window()
        t.ts += 1
        cache[(1, 0x9000_0000 + 64 * w)] = ((1, 50), 64, t.ts)
        for addr in sorted(cache)[:-2]:  # each block lives two windows, then is freed
            del cache[addr]
        c.end_window(blocks | cache)
        assert (1, 50) not in [k for k, _v in c.leaks()]


def test_memory_is_bounded_and_what_is_forgotten_is_counted() -> None:
    c, t = Candidates(max_candidates=400), Target(leak_per_window=50)
    for _ in range(20):
        for addr in c.end_window(t.window()):  # dropped from the address table as the probe does
            del t.leaked[addr]
    assert len(c.live) == 400
    assert c.aged_out == 20 * 50 + 160 - 400  # every leaked block seen, each counted once
    assert [k for k, _v in c.leaks()] == [(1, 99)]
    leak = c.stacks[(1, 99)]
    assert leak.unresolved == 20 * 50 and leak.resolved == 0  # the forgotten still count


def test_an_exec_forgets_the_pid() -> None:
    c, t = Candidates(), Target(leak_per_window=3)
    for _ in range(3):
        c.end_window(t.window())
    c.forget_pid(1)
    assert not c.live and not c.stacks and c.leaks() == []


def test_the_budget_argument() -> None:
    import argparse

    from memtop.commands.args import budget_arg

    assert budget_arg("1%") == pytest.approx(0.01)
    assert budget_arg(" 0.5% ") == pytest.approx(0.005)
    assert budget_arg("0.05") == pytest.approx(0.05)
    for bad in ("0", "0%", "150%", "-1%", "x", "%"):
        with pytest.raises(argparse.ArgumentTypeError):
            budget_arg(bad)


def test_stacks_that_keep_changing_stay_bounded_and_a_leak_among_them_is_kept() -> None:
    """A target whose allocation stacks keep changing (a new stack every window, as JIT code or a
    stack per request gives): after many windows the stacks followed stay within the cap, those
    forgotten are counted and had nothing unresolved, and the leaking stack is still reported."""
    c = Candidates(max_stacks=64)
    t = Target(leak_per_window=3)
    for w in range(500):
        blocks = t.window()
        # a fresh churning stack each window: one block now, freed (gone) by the next window
        blocks[(1, 0x5000_0000 + 64 * (w % 7))] = ((1, 1000 + w), 64, 10**9 + w)
        c.end_window(blocks)
        assert len(c.stacks) <= 64
        assert len(c._exposed) <= 64 and len(c._resolved_next) <= 64
        assert not any(k in c.stacks for k in c.dropped)
    assert c.stacks_dropped >= 500 - 64
    assert [k for k, _v in c.leaks()] == [(1, 99)]
    assert c.stacks[(1, 99)].unresolved == 500 * 3


def test_the_candidates_followed_stay_within_a_few_mebibytes() -> None:
    """At the cap, the candidates' table is the bound on the tracer's memory: what Candidates
    itself holds (tracemalloc, its own allocations) stays within 4 MiB."""
    import tracemalloc

    c = Candidates()
    tracemalloc.start()
    try:
        t = Target(leak_per_window=4096)
        for _ in range(8):
            for addr in c.end_window(t.window()):
                del t.leaked[addr]
        mine = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, leakwindows.__file__)])
    finally:
        tracemalloc.stop()
    assert len(c.live) == leakwindows.MAX_CANDIDATES
    held = sum(s.size for s in mine.statistics("filename"))
    assert held < 4 << 20, held


def simulate(
    budget: float, rate: float, true_scale: float, windows: int, jump_at: int = -1
) -> tuple[float, list[float], float]:
    """Windows planned with CostMeter's feedback on a simulated target whose traced calls really
    cost ``true_scale`` times leakcost's estimate, each window costing memtop 30 ms and the probes
    staying on 0.1 s beyond the slice, each started once the headroom paid for it (and its slice
    ended at its calls' cap); the rate x10 from window ``jump_at`` on: (the cost over the whole
    run as a share of a core, the cost since tracing began at each window's end, the last
    windows' scale)."""
    meter = leakwindows.CostMeter()
    per_call = leakcost.estimate(1.0, 1.0).exact_cpu
    overhead, latency = 0.03, 0.1
    start = 0.0
    at_ends: list[float] = []
    on, period = plan_window(leakwindows.HEADROOM * budget, rate, 0.0, latency)
    cap = leakwindows.slice_calls(leakwindows.HEADROOM * budget, period, 0.0)
    for i in range(windows):
        if i == jump_at:
            rate *= 10
        slice_s = min(on, cap / rate)  # the slice ends on its cap
        calls = rate * (slice_s + latency)
        base = 0.04  # the target's untraced CPU rate
        span = slice_s + latency + max(0.0, period - slice_s - latency) / 2
        meter.untraced(base * span, span)
        cost = meter.window(calls * per_call, base * span + true_scale * calls * per_call, span)
        meter.own(overhead)
        meter.window_spent(cost + overhead)
        meter.calls(calls / (slice_s + latency))
        at_ends.append(meter.spent_s / (start + slice_s + latency))
        r, scale = meter.planning_rate(rate), meter.scale()
        on, period = plan_window(leakwindows.HEADROOM * budget, r, overhead, latency, scale)
        cap = leakwindows.slice_calls(leakwindows.HEADROOM * budget, period, overhead, scale)
        expected = meter.expected_s(leakwindows.window_cost(r, on, overhead, latency, scale))
        start = max(start + period, meter.start_after_s(budget, expected))
    return meter.spent_s / start, at_ends, meter.scale()


@pytest.mark.parametrize("rate", [1e5, 1e6])
@pytest.mark.parametrize("budget", [0.005, 0.01, 0.05])
@pytest.mark.parametrize("true_scale", [0.5, 1.0, 2.0])
def test_windows_planned_on_the_measured_cost_keep_within_the_budget(
    rate: float, budget: float, true_scale: float
) -> None:
    """The estimate per call is off by ``true_scale`` (the machine, the allocator): planned on
    the measured cost, the run's cost ends within the budget and near its headroom, and (the
    first window apart: it is on before anything is measured, paid for after it) within the
    budget at every window's end."""
    cost, at_ends, scale = simulate(budget, rate, true_scale, 60)
    assert scale == pytest.approx(true_scale, rel=1e-6)
    assert cost <= budget, cost
    assert cost >= 0.5 * leakwindows.HEADROOM * budget, cost  # and the budget is used
    assert max(at_ends[1:]) <= budget, at_ends


@pytest.mark.parametrize("rate", [1e4, 1e5])
@pytest.mark.parametrize("budget", [0.01, 0.05])
def test_a_rate_jump_stays_within_the_budget(rate: float, budget: float) -> None:
    """The rate x10 between two windows: the slice planned at the old rate ends on its calls'
    cap, the next ones are planned at the new rate. The run's cost is within the budget, and so
    it is at every window's end but the first's and the jump's (the probes' latency, ten times as
    costly in the window that meets the jump, is the one thing no cap on a slice bounds: paid
    for after it)."""
    jump = 10
    cost, at_ends, _scale = simulate(budget, rate, 1.0, 40, jump_at=jump)
    assert cost <= budget, cost
    assert max(at_ends[1:jump] + at_ends[jump + 1 :]) <= budget, at_ends


def test_the_next_window_waits_until_paid_for() -> None:
    """A first window far over the budget (the probes stayed on for seconds): the next one starts
    only once the headroom since tracing began covers it and what was spent."""
    meter = leakwindows.CostMeter()
    meter.own(2.0)  # 2 CPU s on the first window: 250 s of a 1 % budget's headroom
    assert meter.start_after_s(0.01, 0.4) == pytest.approx(2.4 / (leakwindows.HEADROOM * 0.01))
    meter.prior(0.5)  # the preflight's count
    assert meter.spent_s == pytest.approx(2.5) and meter.target_s == pytest.approx(0.5)


def test_windows_are_planned_on_the_highest_recent_rate() -> None:
    meter = leakwindows.CostMeter()
    assert meter.planning_rate(5e4) == 5e4  # the preflight's before any window
    for r in (1e5, 2e3, 9e4):  # a window whose target was off CPU counts few calls
        meter.calls(r)
    assert meter.planning_rate(5e4) == 1e5
    for r in (1e3,) * leakwindows.FEEDBACK_WINDOWS:
        meter.calls(r)
    assert meter.planning_rate(5e4) == 1e3  # and follows a lasting drop


def test_a_slice_affords_what_its_period_budget_pays_for() -> None:
    per_call = leakcost.estimate(1.0, 1.0).exact_cpu
    assert leakwindows.slice_calls(0.008, 10.0, 0.03) == pytest.approx(
        leakwindows.SLICE_CALLS * (0.08 - 0.03) / per_call
    )
    assert leakwindows.slice_calls(0.008, 10.0, 1.0) == 0.0


def test_without_a_baseline_the_estimate_is_counted() -> None:
    meter = leakwindows.CostMeter()
    assert meter.window(0.5, 3.0, 10.0) == 0.5 and meter.measured == 0 and meter.scale() == 1.0
    meter.untraced(0.4, 10.0)
    assert meter.window(0.5, 1.4, 10.0) == pytest.approx(1.0) and meter.measured == 1
    assert meter.scale() == pytest.approx(2.0)
