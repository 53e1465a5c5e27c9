"""The OOM kill notice: announced once per kill, even when a replay's seeks apply the kill again,
and never on the OOM pane, where the detail it would cover says the same thing in full."""

from __future__ import annotations

from pathlib import Path

from support import OOM_KILL, FakeSource

from memtop.records import Batch
from memtop.stream.replay import Recording, ReplaySource
from memtop.stream.runner import Runner

PRESSURE = Path(__file__).parent.parent / "data" / "pressure.jsonl.gz"


async def test_a_kill_is_announced_once_across_seeks() -> None:
    rec = Recording.load(PRESSURE)  # one memcg OOM kill, about 30 s in
    source = ReplaySource(rec, at_s=0)
    runner = Runner(source, interval_s=1.0)
    await source.start()
    await runner.tick()
    assert runner.pop_notices() == []
    source.goto(rec.duration_s)
    await runner.tick()
    first = runner.pop_notices()
    assert len(first) == 1 and first[0].text.startswith("OOM kill (memcg ") and first[0].pane == "oom"
    for _ in range(2):  # back before the kill and across it again: the state is rebuilt each time
        source.goto(0)
        await runner.tick()
        source.goto(rec.duration_s)
        await runner.tick()
        assert runner.pop_notices() == []


def kill_batches() -> list[Batch]:
    return [Batch(1_000_000_000, ()), Batch(2_000_000_000, (OOM_KILL,))]


async def notified_on(pane: str) -> list[str]:
    from memtop.ui.app import MemtopApp

    app = MemtopApp(FakeSource(kill_batches()), interval_s=3600, initial_pane=pane)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.tick()
        await app.tick()
        await pilot.pause()
        return [str(n.message) for n in app._notifications]


async def test_the_notice_shows_on_other_panes_but_not_over_the_oom_pane() -> None:
    elsewhere = await notified_on("processes")
    assert len(elsewhere) == 1 and "4242" in elsewhere[0]
    assert await notified_on("oom") == []
