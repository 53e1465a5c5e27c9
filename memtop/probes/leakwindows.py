"""Leak hunting on a CPU budget (``memtop --leaks PID --budget 1%``): the leaks probe traces in
windows (its uprobes attached for a slice, then detached) and tells leaks from churn by what
becomes of the blocks still live when a window ends.

Those blocks are the *candidates*. They stay in the kernel's address table while the probes are
off, so a later window sees each one that is freed while it traces, and one that was freed while
nothing traced as soon as the allocator hands its address out again (the program's allocation
path counts a recorded address coming back as freed): either way it is *resolved*. Churn's
candidates are blocks in flight when the window closed; their addresses are recycled at once
(glibc's tcache is last-in first-out), so nearly all are resolved by the next window. A leak's
are never freed, never handed out again, and pile up.

The test, per stack, at each window's end: of the ``n`` candidates born at least ``AGE_WINDOWS``
windows ago, ``u`` are unresolved. A stack that is not leaking resolves a candidate in a window
with the probability the target's stacks show (``p``: the median stack's share of candidates
resolved by the next window, by Laplace's rule), so each of its old candidates is still unresolved with probability
``s = (1-p)^AGE_WINDOWS``; the confidence that the stack leaks is the probability of seeing fewer
than ``u`` survivors out of ``n`` were it not (one minus the binomial tail). A target whose
stacks resolve nothing gives no ``p``: no stack is called a leak.

Pure Python (the probe feeds it the address table's live blocks): bench/leaks_budget.py and the
unit tests drive it directly.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from memtop.core import leakcost
from memtop.records.leaks import LEAK_CONFIDENCE

#: a candidate is judged once it has lived this many windows
AGE_WINDOWS = 1
#: a leak is told by survivors born in at least this many windows: one window's blocks may be
#: one long-lived structure built then, and a single survivor's confidence would otherwise
#: rise with wall time alone (the other stacks' resolve rate sharpening), not with evidence
MIN_SURVIVOR_WINDOWS = 2
#: the confidence shown at most while survivors come from fewer windows (below LEAK_CONFIDENCE)
SINGLE_WINDOW_CONFIDENCE = 0.99
#: candidates followed at most; past it the oldest are summarised per stack (counted unresolved
#: for good) and forgotten, here and in the kernel's address table (end_window returns them): the
#: table never fills with a leak's blocks, however long it runs. A candidate is ~250 bytes of
#: Python (its dict entry and tuples): 16384 keep them within 4 MiB, and a leak's verdict needs
#: its old candidates counted, not each one kept
MAX_CANDIDATES = 1 << 14
#: stacks followed at most: past it those with nothing unresolved, the longest without a
#: candidate first, are forgotten (counted in ``stacks_dropped``); a target whose allocation
#: stacks keep changing (JIT code, a stack per request) would otherwise grow the verdicts,
#: rates and caches kept per stack for as long as it runs
MAX_STACKS = 4096
#: windows: at least this long a slice (shorter ones catch too few allocations to judge), and
#: between their starts at least MIN_PERIOD_S and at most MAX_PERIOD_S: a window costs at least
#: the probes' time on while the kernel attaches and removes them (~0.1 s each, the hot ones
#: last on and first off), which at 1M malloc+free/s is ~0.3 CPU s: 60 s of a 0.5 % budget,
#: more where the measured cost is above the estimate
MIN_ON_S = 0.02
MIN_PERIOD_S = 2.0
#: memtop's own work per window (attach, detach, the table's scan: ~6 ms with uprobe_multi
#: links) at most this share of what the window may spend: the period is stretched until it is,
#: so that at high rates the budget goes to traced calls (a few ms of slice each) rather than to
#: attaching and detaching every 2 s
MAX_OWN_SHARE = 0.1
#: a window that costs more than this long a period of the budget's headroom waits that long:
#: the budget is a ceiling, so at a tiny budget windows come rarely rather than over it
MAX_PERIOD_S = 3600.0
#: the share of the budget the windows aim at: a window's cost is known only once it has ended,
#: and measured costs scatter (the target's own variance, a shared machine's load); aimed at the
#: budget itself, half the windows would exceed it
HEADROOM = 0.8
#: a window's slice ends early once it has counted this many times the calls it was planned for
#: (a rate jump while it traces): its cost stays the planned one at any rate
SLICE_CALLS = 1.0
#: the slice is checked for its calls this many times (it ends within 1/SLICE_CHECKS of it)
SLICE_CHECKS = 16
#: the last windows whose measured cost corrects the estimate (the ratio of their sums)
FEEDBACK_WINDOWS = 4
#: the untraced spans whose median CPU rate is the targets' baseline
BASELINE_SPANS = 8
#: an untraced span shorter than this says too little about the baseline to be kept
MIN_BASELINE_S = 0.2
#: the correction moves the estimate by at most this factor either way
MAX_SCALE = 20.0

Key = tuple[int, int]  # (pid, stack id)
#: windows kept in CostMeter.log (bench/leaks_windows.py and the tests read them)
LOG_WINDOWS = 256


@dataclass(frozen=True, slots=True)
class WindowLog:
    """One window as planned and as it went (seconds; CPU seconds for costs): the slice and
    period planned, how long the hot probes were actually on (``on_s``: first hot attach to last
    hot detach), the period it actually took (attach to the next attach), the calls counted, the
    targets' added CPU as estimated from them and as counted (measured from /proc when
    ``measured``), memtop's own CPU on it (attach, detach, the table's scan) and the wall time
    its attach and detach took."""

    index: int
    planned_on_s: float
    planned_period_s: float
    on_s: float
    calls: int
    estimated_s: float
    target_s: float
    measured: bool
    own_s: float
    attach_s: float
    detach_s: float
    #: calls counted when the slice ended, and what the budget afforded it (slice_calls)
    slice_calls: int = 0
    cap_calls: float = 0.0
    #: tracing's cost counted so far and the time since tracing began, when this was logged
    spent_s: float = 0.0
    elapsed_s: float = 0.0


def plan_window(
    budget: float, calls_per_s: float, overhead_s: float, latency_s: float, scale: float = 1.0
) -> tuple[float, float]:
    """(slice, period) in seconds for a budget (a share of one core) at an allocation rate
    (calls/s, each with its free): ``overhead_s`` is memtop's CPU per window (attach, detach,
    the table's scan), ``latency_s`` how long the probes stay on beyond the slice (attaching and
    detaching take time). Per window the cost is ``overhead_s`` plus the traced calls of
    ``slice + latency_s`` at memtop.core.leakcost's exact cost; the period is the shortest that keeps
    it within the budget with at least MIN_ON_S of slice and ``overhead_s`` at most MAX_OWN_SHARE
    of it (at most MAX_PERIOD_S: past that the cost shown says by how much the budget is
    exceeded), and the slice spends what is left. A
    slice that would fill the period means tracing all the time. ``scale``: what the targets'
    added CPU measured per traced call against that cost (CostMeter.scale)."""
    budget = max(1e-4, budget)
    per_s = leakcost.estimate(calls_per_s, calls_per_s).exact_cpu if calls_per_s > 0 else 0.0
    per_s *= max(1.0 / MAX_SCALE, min(MAX_SCALE, scale))
    need = (overhead_s + per_s * (latency_s + MIN_ON_S)) / budget
    period = min(MAX_PERIOD_S, max(MIN_PERIOD_S, need, overhead_s / (MAX_OWN_SHARE * budget)))
    spend = budget * period - overhead_s
    on = period if per_s <= 0 else spend / per_s - latency_s
    return max(MIN_ON_S, min(period, on)), period


def window_cost(
    calls_per_s: float, on_s: float, overhead_s: float, latency_s: float, scale: float = 1.0
) -> float:
    """A window's expected cost (CPU s): memtop's ``overhead_s`` and the traced calls of the
    slice ``on_s`` and the probes' ``latency_s`` beyond it, at leakcost's exact cost per call
    corrected by ``scale`` (plan_window's model)."""
    per_s = leakcost.estimate(calls_per_s, calls_per_s).exact_cpu if calls_per_s > 0 else 0.0
    return overhead_s + per_s * max(1.0 / MAX_SCALE, min(MAX_SCALE, scale)) * (on_s + latency_s)


def slice_calls(budget: float, period_s: float, overhead_s: float, scale: float = 1.0) -> float:
    """The calls a window planned on ``budget`` over ``period_s`` can afford (memtop's
    ``overhead_s`` apart), at leakcost's cost per call corrected by ``scale``: its slice ends
    early once it has counted SLICE_CALLS times as many (the rate jumped while it traced)."""
    per_call = leakcost.estimate(1.0, 1.0).exact_cpu * max(1.0 / MAX_SCALE, min(MAX_SCALE, scale))
    return SLICE_CALLS * max(0.0, budget * period_s - overhead_s) / per_call


class CostMeter:
    """What tracing costs, measured, for the windows to be planned from it: the targets' added
    CPU (their CPU time from a window's attach to the middle of the untraced span after it, less
    their untraced rate over that time: the first half of that span holds the calls tracing
    delayed, caught up; the second half gives the untraced rate) and memtop's own CPU (windows
    and polls). The estimate per traced call (leakcost) is corrected by the ratio of measured to
    estimated over the last windows, and what was spent beyond HEADROOM x budget since tracing
    began is paid back in the next period (a longer one). Pure: the probe feeds it readings."""

    def __init__(self) -> None:
        self._rates: deque[float] = deque(maxlen=BASELINE_SPANS)
        #: the allocation rates (calls/s) the last windows counted
        self._call_rates: deque[float] = deque(maxlen=FEEDBACK_WINDOWS)
        #: what the last windows cost in all (CPU s: the targets' added, memtop's)
        self._window_costs: deque[float] = deque(maxlen=FEEDBACK_WINDOWS)
        #: (estimated, measured) targets' added CPU s of the last windows
        self._windows: deque[tuple[float, float]] = deque(maxlen=FEEDBACK_WINDOWS)
        #: everything measured since tracing began (CPU s): the targets' added, memtop's
        self.spent_s = 0.0
        self.target_s = 0.0
        self.own_s = 0.0
        #: windows whose targets' cost was measured (else estimated: no baseline yet)
        self.measured = 0
        #: the last windows, as planned and as they went
        self.log: deque[WindowLog] = deque(maxlen=LOG_WINDOWS)

    def untraced(self, cpu_s: float, span_s: float) -> None:
        """The targets' CPU over an untraced span (its second half)."""
        if span_s >= MIN_BASELINE_S and cpu_s >= 0:
            self._rates.append(cpu_s / span_s)

    def base_rate(self) -> float | None:
        return sorted(self._rates)[len(self._rates) // 2] if self._rates else None

    def window(self, estimated_s: float, cpu_s: float | None, span_s: float) -> float:
        """A window's targets' added CPU: their CPU over ``span_s`` (attach to the middle of the
        untraced span) less their baseline over it; the estimate while there is no baseline or
        no reading (a target gone). Returns what is counted."""
        rate = self.base_rate()
        if rate is None or cpu_s is None:
            cost = estimated_s
        else:
            cost = max(0.0, cpu_s - rate * span_s)
            self._windows.append((estimated_s, cost))
            self.measured += 1
        self.target_s += cost
        self.spent_s += cost
        return cost

    def prior(self, cpu_s: float) -> None:
        """The targets' added CPU before the windows: the preflight's count (its traps)."""
        self.target_s += max(0.0, cpu_s)
        self.spent_s += max(0.0, cpu_s)

    def own(self, cpu_s: float) -> None:
        """memtop's own CPU on tracing (a window's attach and detach, polls)."""
        self.own_s += cpu_s
        self.spent_s += cpu_s

    def scale(self) -> float:
        """Measured over estimated targets' cost of the last windows (1 before any)."""
        est = sum(e for e, _m in self._windows)
        got = sum(m for _e, m in self._windows)
        if not self._windows or est <= 0:
            return 1.0
        return max(1.0 / MAX_SCALE, min(MAX_SCALE, got / est))

    def calls(self, calls_per_s: float) -> None:
        """The allocation rate a window counted."""
        if calls_per_s >= 0:
            self._call_rates.append(calls_per_s)

    def window_spent(self, cpu_s: float) -> None:
        """What a window cost in all, measured (its targets' added CPU and memtop's)."""
        self._window_costs.append(max(0.0, cpu_s))

    def expected_s(self, model_s: float) -> float:
        """The next window's expected cost: the model's (window_cost), or more where one of the
        last windows cost more (what the model misses: a target kept off CPU, the kernel's work
        on the target's side as the probes come off, a loaded machine): a ceiling is planned on
        the worst that was seen lately, not on the mean."""
        return max([model_s, *self._window_costs])

    def planning_rate(self, first: float) -> float:
        """The rate the next window is planned for: the highest of the last windows' (a window
        whose target was off CPU, on a loaded machine, counts few calls; planned on that, the
        next one would trace for too long), ``first`` (the preflight's) before any."""
        return max(self._call_rates) if self._call_rates else first

    def start_after_s(self, budget: float, expected_s: float) -> float:
        """When the next window may start (s since tracing began): once HEADROOM x budget over
        the time since then covers what was spent and ``expected_s``, that window's expected
        cost. Paid before it is spent, so at no time has tracing cost more than its headroom of
        the budget and one window's misestimate (the budget is a ceiling, over any span from the
        start, not only over a long run)."""
        return (self.spent_s + max(0.0, expected_s)) / (HEADROOM * max(1e-4, budget))

    def debt_s(self, budget: float, elapsed_s: float) -> float:
        """CPU s spent beyond HEADROOM x budget since tracing began (memtop's polls included):
        the next window's period is lengthened to pay it back (plan_window's overhead), and the
        window is planned on HEADROOM x budget."""
        return max(0.0, self.spent_s - HEADROOM * budget * elapsed_s)


@dataclass(slots=True)
class StackVerdict:
    """One stack's candidates: born in all, resolved, unresolved now, the ``n``/``u`` of the test
    and the confidence that it leaks (0 when it cannot be told)."""

    born: int = 0
    resolved: int = 0
    unresolved: int = 0
    unresolved_bytes: int = 0
    judged: int = 0
    survivors: int = 0
    confidence: float = 0.0
    #: its candidates summarised away (MAX_CANDIDATES): unresolved for good
    aged_out: int = 0
    #: the window its unresolved candidates began to pile up in (-1: they do not)
    growing_since: int = -1
    #: candidates born in each of the last AGE_WINDOWS windows (not judged yet)
    recent: deque[int] = field(default_factory=lambda: deque(maxlen=AGE_WINDOWS))
    #: the last window a candidate of it was born in
    last_born: int = 0


def binomial_tail(n: int, s: float, u: int) -> float:
    """P(X >= u) for X ~ Binomial(n, s), summed in logs (n is up to a few hundred thousand)."""
    if u <= 0:
        return 1.0
    if u > n or s <= 0.0:
        return 0.0
    if s >= 1.0:
        return 1.0
    ls, lq = math.log(s), math.log1p(-s)
    lgn = math.lgamma(n + 1)
    total = 0.0
    term_max = None
    # the terms fall fast past the mean: sum from u up while they matter
    for k in range(u, n + 1):
        lt = lgn - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * ls + (n - k) * lq
        if term_max is None:
            term_max = lt
        elif lt < term_max - 40:
            break
        total += math.exp(lt)
    return min(1.0, total)


class Candidates:
    """The candidates of every traced stack across windows, and each stack's verdict."""

    def __init__(self, max_candidates: int = MAX_CANDIDATES, max_stacks: int = MAX_STACKS) -> None:
        self.max_candidates = max_candidates
        self.max_stacks = max_stacks
        #: stacks forgotten to stay within ``max_stacks`` (none had anything unresolved)
        self.stacks_dropped = 0
        #: the stacks forgotten by the last end_window (the probe drops what it keeps for them)
        self.dropped: list[Key] = []
        self.window = 0
        #: (pid, address) -> (stack, window born, bytes, birth ns) for each unresolved candidate
        self.live: dict[tuple[int, int], tuple[Key, int, int, int]] = {}
        self.stacks: dict[Key, StackVerdict] = {}
        #: candidates resolved by the next window / followed into it, per stack (the rate p)
        self._exposed: dict[Key, int] = {}
        self._resolved_next: dict[Key, int] = {}
        #: candidates summarised away (MAX_CANDIDATES): counted unresolved, never resolved
        self.aged_out = 0
        self.p_resolve: float | None = None

    def end_window(self, blocks: dict[tuple[int, int], tuple[Key, int, int]]) -> list[tuple[int, int]]:
        """The address table's live blocks at a window's end: (pid, address) -> (stack, bytes,
        birth ns). Those not seen before are born in this window; those followed and gone (or
        whose address holds a block born since) are resolved. Returns the (pid, address) of the
        candidates forgotten to keep within ``max_candidates``: the caller drops them from the
        address table (else they would come back as new)."""
        self.window += 1
        w = self.window
        born: dict[Key, int] = {}
        for addr, (key, size, ts) in blocks.items():
            have = self.live.get(addr)
            if have is not None and have[3] == ts:
                continue  # the same block: still unresolved
            if have is not None:  # its address was handed out again: the old block was freed
                self._resolve(have, w)
            self.live[addr] = (key, w, size, ts)
            born[key] = born.get(key, 0) + 1
        for addr in [a for a in self.live if a not in blocks]:
            self._resolve(self.live.pop(addr), w)
        for key, v in self.stacks.items():
            v.recent.append(born.pop(key, 0))
        for key, n in born.items():
            self.stacks[key] = StackVerdict()
            self.stacks[key].recent.append(n)
        for v in self.stacks.values():
            v.born += v.recent[-1]
            if v.recent[-1]:
                v.last_born = w
        # exposure: candidates of the previous window followed into this one
        for key, wb, _size, _ts in self.live.values():
            if wb == w - 1:
                self._exposed[key] = self._exposed.get(key, 0) + 1
        evicted = self._age_out()
        self._judge()
        self._drop_stacks()
        return evicted

    def _drop_stacks(self) -> None:
        """Past ``max_stacks``, forget the stacks with nothing unresolved (no live candidate, none
        aged out: nothing a verdict could still call a leak), the longest without a candidate
        first. What they fed to the resolve rate goes too: the median stays the live stacks'."""
        self.dropped = []
        extra = len(self.stacks) - self.max_stacks
        if extra <= 0:
            return
        idle = sorted(
            (v.last_born, k) for k, v in self.stacks.items() if v.unresolved == 0 and v.aged_out == 0
        )[:extra]
        for _w, key in idle:
            del self.stacks[key]
            self._exposed.pop(key, None)
            self._resolved_next.pop(key, None)
            self.dropped.append(key)
        self.stacks_dropped += len(idle)

    def _resolve(self, have: tuple[Key, int, int, int], w: int) -> None:
        key, wb, _size, _ts = have
        v = self.stacks.get(key)
        if v is not None:
            v.resolved += 1
        if wb == w - 1:  # resolved by the very next window
            self._resolved_next[key] = self._resolved_next.get(key, 0) + 1
            self._exposed[key] = self._exposed.get(key, 0) + 1

    def _age_out(self) -> list[tuple[int, int]]:
        """Past ``max_candidates`` the oldest candidates are forgotten (their stacks keep them
        as unresolved in ``aged_out``): memory stays bounded however long it runs."""
        extra = len(self.live) - self.max_candidates
        if extra <= 0:
            return []
        oldest = sorted(self.live.items(), key=lambda kv: (kv[1][1], kv[1][3]))[:extra]
        for addr, (key, _wb, _size, _ts) in oldest:
            del self.live[addr]
            v = self.stacks.get(key)
            if v is not None:
                v.aged_out += 1
        self.aged_out += extra
        return [addr for addr, _ in oldest]

    def _judge(self) -> None:
        # each stack's share by Laplace's rule ((r+1)/(n+2)): never a certainty from a few
        rates = sorted(
            (self._resolved_next.get(k, 0) + 1) / (n + 2) for k, n in self._exposed.items() if n >= 5
        )
        self.p_resolve = rates[len(rates) // 2] if rates else None
        unresolved: dict[Key, tuple[int, int, int]] = {}
        born_in: dict[Key, set[int]] = {}
        cutoff = self.window - AGE_WINDOWS
        for key, wb, size, _ts in self.live.values():
            n, b, old = unresolved.get(key, (0, 0, 0))
            unresolved[key] = (n + 1, b + size, old + (wb <= cutoff))
            if wb <= cutoff:
                born_in.setdefault(key, set()).add(wb)
        for key, v in self.stacks.items():
            n, b, old = unresolved.get(key, (0, 0, 0))
            n += v.aged_out  # forgotten, never resolved: old and unresolved for good
            old += v.aged_out
            grew = n > v.unresolved
            v.unresolved, v.unresolved_bytes = n, b
            v.judged = v.born - sum(v.recent)
            v.survivors = old
            if v.survivors and grew and v.growing_since < 0:
                v.growing_since = self.window
            elif not v.survivors:
                v.growing_since = -1
            if self.p_resolve is None or v.judged <= 0 or old <= 0:
                v.confidence = 0.0
                continue
            s = (1.0 - self.p_resolve) ** AGE_WINDOWS
            v.confidence = max(0.0, 1.0 - binomial_tail(v.judged, s, old))
            # summarised candidates were born in earlier windows than any followed
            if len(born_in.get(key, ())) + min(v.aged_out, MIN_SURVIVOR_WINDOWS) < MIN_SURVIVOR_WINDOWS:
                v.confidence = min(v.confidence, SINGLE_WINDOW_CONFIDENCE)

    def leaks(self) -> list[tuple[Key, StackVerdict]]:
        """Stacks reported as leaks, the most confident (then the most bytes) first."""
        found = [(k, v) for k, v in self.stacks.items() if v.confidence >= LEAK_CONFIDENCE]
        return sorted(found, key=lambda kv: (-kv[1].confidence, -kv[1].unresolved_bytes, kv[0]))

    def forget_pid(self, pid: int) -> None:
        for addr in [a for a in self.live if a[0] == pid]:
            del self.live[addr]
        for d in (self.stacks, self._exposed, self._resolved_next):
            for key in [k for k in d if k[0] == pid]:
                del d[key]
