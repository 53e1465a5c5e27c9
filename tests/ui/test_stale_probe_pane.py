"""A pane whose probe stopped reading (issue 35, item 2): once the probe has missed two ticks its
figures grey and the status line says since when and why ("cgroups: no reading for 12 s (poll
failed 3×: …)"); when the probe reads again the pane is as before, by itself. The header counts
the probe as erroring meanwhile."""

from __future__ import annotations

from support import FakeSource
from textual.widgets import DataTable, Static

from memtop.records import Batch, ProbeStatus
from memtop.records.cgroups import CgroupSample
from memtop.ui.app import MemtopApp
from memtop.ui.lines import shown_text
from memtop.ui.panes.base import Pane, StatusLine

S = 10**9
MiB = 1 << 20
REASON = "input nested too deeply to parse (RecursionError: maximum recursion depth exceeded)"


def sample(usage_mib: int) -> CgroupSample:
    return CgroupSample(path="/app", version=1, usage_bytes=usage_mib * MiB, limit_bytes=512 * MiB)


def erroring(failures: int, since_s: int) -> ProbeStatus:
    return ProbeStatus(
        "cgroups",
        "erroring",
        REASON,
        "retried with backoff",
        failures=failures,
        since_ns=since_s * S,
        last_ok_ns=1 * S,
    )


BATCHES = [
    Batch(1 * S, (ProbeStatus("cgroups", "attached"), sample(100))),
    Batch(2 * S, (erroring(1, 2),)),  # one missed reading: not grey yet
    Batch(3 * S, ()),  # two: grey
    Batch(13 * S, (erroring(3, 2),)),
    Batch(
        14 * S, (ProbeStatus("cgroups", "attached", "recovered after 3 failed polls over 12 s"), sample(180))
    ),
]


async def test_the_pane_greys_says_since_when_and_comes_back() -> None:
    app = MemtopApp(FakeSource(list(BATCHES)), interval_s=1.0, initial_pane="cgroups")
    async with app.run_test(size=(160, 30)) as pilot:
        pane = app.query_one("#cgroups-status", StatusLine).parent
        assert isinstance(pane, Pane)
        table = app.query_one("#cgroups-table", DataTable)

        async def step() -> str:
            await app.runner.tick()
            app.redraw()
            await pilot.pause()
            return str(shown_text(app.query_one("#cgroups-status", StatusLine)))

        line = await step()
        assert "cgroups: attached" in line and not pane.has_class("stale")
        line = await step()
        assert "cgroups: no reading for 1 s (poll failed 1×: input nested too deeply" in line
        assert not pane.has_class("stale") and table.styles.text_opacity == 1.0
        line = await step()
        assert pane.has_class("stale") and table.styles.text_opacity < 1.0  # the figures grey
        line = await step()
        assert "cgroups: no reading for 12 s (poll failed 3×: input nested too deeply" in line
        assert pane.has_class("stale")
        assert "1 erroring" in str(shown_text(app.query_one("#header", Static)))
        line = await step()
        assert "cgroups: attached" in line and "no reading" not in line
        assert not pane.has_class("stale") and table.styles.text_opacity == 1.0
        assert "180" in " ".join(str(c) for c in table.get_row("/app"))


def test_a_tracer_detached_on_purpose_does_not_grey_its_pane() -> None:
    from memtop.state import State
    from memtop.views import stale_probes

    state = State(mode="replay")
    state.apply(Batch(1 * S, (ProbeStatus("slabtrace", "attached"), ProbeStatus("kernel", "attached"))))
    for t in range(2, 6):
        state.apply(Batch(t * S, (ProbeStatus("slabtrace", "detached", "detached"),)))
    assert stale_probes(state, ("kernel", "slabtrace")) == []
    for t in range(6, 9):
        state.apply(
            Batch(t * S, (ProbeStatus("kernel", "erroring", REASON, failures=t - 5, last_ok_ns=5 * S),))
        )
    assert stale_probes(state, ("kernel", "slabtrace")) == ["kernel"]
