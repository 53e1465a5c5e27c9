"""The leaks preflight in the TUI (issue 25, item 3): once the calls are counted the Leaks pane shows
the rate and what tracing would cost, marks the proposal (byte sampling past a tenth of a core,
exact below), and `e`, `S`, `B`, `n` answer it through the source; the keys do nothing before the
count is in or once it is answered. Tracing on a budget, the status line shows the duty cycle, the
cost and the leak found."""

from __future__ import annotations

from typing import Any

import pytest
from support import FakeSource
from support.ui import drive, settle
from textual.pilot import Pilot
from textual.widgets import Static

from memtop.records import Batch
from memtop.records.leaks import LeakBudget, LeakPreflight, LeakStack, LeakTarget, LeakVerdict
from memtop.ui.app import MemtopApp
from memtop.ui.lines import shown_text


def counted(allocs_per_s: int, decision: str = "", state: str = "measured") -> LeakPreflight:
    return LeakPreflight(
        pids=(4242,),
        state=state,
        message="11 entry probes counted calls for 1.00 s, then detached",
        allocator="glibc",
        window_ns=10**9,
        functions=("free", "malloc"),
        calls=(allocs_per_s, allocs_per_s),
        alloc_calls=allocs_per_s,
        free_calls=allocs_per_s,
        sample_bytes=524288,
        decision=decision,
        decided_by="user" if decision else "",
    )


async def shown(app: MemtopApp, pilot: Pilot[Any], source: FakeSource, rec: LeakPreflight) -> str:
    """What the prompt says once ``rec`` is the source's next batch and the app has ticked."""
    source.batches.append(Batch(ts_ns=10**9, records=(rec,)))
    await drive(app, pilot)
    text = shown_text(app.query_one("#leaks-preflight", Static))
    return text.plain if text is not None else ""


@pytest.mark.parametrize(
    ("rate", "key", "choice"),
    [(1_000_000, "S", 524288), (1_000_000, "e", 0), (2_000, "e", 0), (2_000, "S", 524288)],
)
async def test_the_pane_shows_the_cost_and_the_keys_answer(rate: int, key: str, choice: int) -> None:
    source = FakeSource()
    app = MemtopApp(source, leak_pids=[4242])
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        text = await shown(app, pilot, source, counted(rate))
        assert "Exact tracing would cost" in text and "byte sampling (--sample-bytes 524288)" in text
        if rate > 100_000:  # 1M/s: seconds of CPU per second exact, byte sampling proposed
            assert "Proposed: byte sampling" in text and "byte sampling (proposed)" in text
        else:  # 2k/s: a fraction of a percent of a core, exact proposed
            assert "Proposed: exact." in text and "trace every allocation (proposed)" in text
        await pilot.press(key)
        await settle(pilot)
        assert source.traced == [[4242]] and source.trace_choices == [choice]
        assert source.declined == []


async def test_n_declines_and_the_keys_wait_for_the_count() -> None:
    source = FakeSource()
    app = MemtopApp(source, leak_pids=[4242])
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        text = await shown(app, pilot, source, counted(0, state="measuring"))
        assert "preflight" in text and "Exact tracing" not in text
        await pilot.press("e", "S", "n")  # still counting: nothing to answer yet
        await settle(pilot)
        assert source.traced == [] and source.declined == []
        await shown(app, pilot, source, counted(5_000))
        await pilot.press("n")
        await settle(pilot)
        assert source.declined == [[4242]] and source.traced == []
        # answered (the source records the decision): the keys are spent
        text = await shown(app, pilot, source, counted(5_000, decision="cancelled"))
        assert "Decided: cancelled (user)." in text
        await pilot.press("e")
        await settle(pilot)
        assert source.traced == []


async def test_b_traces_on_a_budget() -> None:
    source = FakeSource()
    app = MemtopApp(source, leak_pids=[4242])
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        text = await shown(app, pilot, source, counted(1_000_000))
        assert " B  on a 1% CPU budget" in text
        await pilot.press("B")
        await settle(pilot)
        assert source.traced == [[4242]] and source.trace_choices == [0] and source.trace_budgets == [0.01]


async def test_the_status_line_shows_the_budget_and_the_leak() -> None:
    source = FakeSource()
    app = MemtopApp(source, leak_pids=[4242])
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        recs = (
            LeakTarget(4242, "leaker", "tracing", "glibc"),
            LeakStack(4242, 7, ("leak_here+0x1 [leaker]", "main+0x2 [leaker]"), 409600, 100, 0, 0),
            LeakBudget(
                0.01, 5, 300_000_000, 15_000_000_000, 199_000.0, 150_000_000, 600_000_000, 85 * 10**9, 0.97
            ),
            LeakVerdict(4242, 7, 100, 0, 100, 409600, 1.0, growing_since_ns=10**9),
        )
        source.batches.append(Batch(ts_ns=30 * 10**9, records=recs))
        await drive(app, pilot)
        status = shown_text(app.query_one("#leaks-status", Static))
        assert status is not None
        assert "budget 1 %: duty 2.0 %, cost 0.88 % of a core" in status.plain, status.plain
        assert "leak 100.0 % confident: leak_here+0x1 [leaker]" in status.plain
