"""The Shared pane as a user drives it, on the shared recording (tests/data/shared.jsonl.gz: a
segment attached, one orphaned, memfds, a /dev/shm file, hugetlb and THP pages, a compaction):
the orphan marked, Enter lists a segment's mappers, `v`/`V` step through the sections; on a
recording without its probes the pane says so instead of showing zeros; traced-system text is
never markup."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from support.ui import settle
from textual.widgets import DataTable, Static

from memtop.records import Batch
from memtop.records.shared import SharedCall, ShmSegment, ShmTable
from memtop.state.shared import SharedState
from memtop.stream.replay import Recording, ReplaySource
from memtop.ui.app import MemtopApp

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDING = DATA / "shared.jsonl.gz"


def rows(app: MemtopApp) -> list[list[str]]:
    table = app.query_one("#shared-table", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def labels(app: MemtopApp) -> list[str]:
    return [str(c.label) for c in app.query_one("#shared-table", DataTable).ordered_columns]


def shown(app: MemtopApp, widget_id: str) -> str:
    r = app.query_one(widget_id, Static).render()
    return r.plain if isinstance(r, Text) else str(r)


async def test_orphan_mappers_and_sections() -> None:
    rec = Recording.load(RECORDING)
    app = MemtopApp(ReplaySource(rec, at_s=rec.duration_s), interval_s=1.0, initial_pane="shared")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.redraw()
        await settle(pilot)
        table = rows(app)
        col = labels(app)
        orphan = [r for r in table if "ORPHAN" in r]
        attached = [r for r in table if "ORPHAN" not in r]
        assert len(orphan) == 1 and len(attached) == 1
        assert orphan[0][col.index("ATT")] == "0" and attached[0][col.index("ATT")] == "1"
        assert "1 orphan 4.0M" in shown(app, "#shared-summary")
        assert "shmget(key 0x6d656d0" in shown(app, "#shared-detail")
        # Enter on the attached segment: who maps it; Enter again: the calls
        t = app.query_one("#shared-table", DataTable)
        t.move_cursor(row=table.index(attached[0]))
        t.focus()
        await pilot.press("enter")
        await settle(pilot)
        assert "mapped by: " in shown(app, "#shared-detail") and "shmwork" in shown(app, "#shared-detail")
        await pilot.press("enter")
        await settle(pilot)
        assert "shm calls" in shown(app, "#shared-detail")
        # the sections in turn, and back
        await pilot.press("v")
        await settle(pilot)
        assert labels(app)[:2] == ["KIND", "PID"]
        names = {r[labels(app).index("NAME")] for r in rows(app)}
        assert {"memfd:wayland-buffer", "memfd:jit-code", "/dev/shm/memtop-recording"} <= names
        await pilot.press("v")
        await settle(pilot)
        assert "HUGETLB" in labels(app)
        huge = rows(app)[0]
        assert (
            huge[labels(app).index("COMMAND")] == "shmwork" and huge[labels(app).index("HUGETLB")] == "4.0M"
        )
        assert "2.0M: 2/4 used" in shown(app, "#shared-summary")
        assert "hugepage ok" in shown(app, "#shared-detail")
        await pilot.press("v")
        await settle(pilot)
        assert labels(app)[0] == "REASON" and rows(app)[0][0] == "compaction"
        await pilot.press("V")
        await settle(pilot)
        assert "HUGETLB" in labels(app)
        await pilot.press("v", "v")
        await settle(pilot)
        assert labels(app)[0] == "SHMID"


async def test_blind_without_its_probes() -> None:
    """The pressure recording was made before this pane: its probes did not run; the pane says
    so and the logs say "not traced", never an empty log as if nothing happened."""
    rec = Recording.load(DATA / "pressure.jsonl.gz")
    app = MemtopApp(ReplaySource(rec, at_s=rec.duration_s), interval_s=1.0, initial_pane="shared")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.redraw()
        await settle(pilot)
        status = shown(app, "#shared-status")
        assert "sharedinfo: not running in this recording" in status
        assert "shared: not running in this recording" in status
        assert "not traced" in shown(app, "#shared-detail")
        await pilot.press("v", "v", "v")
        await settle(pilot)
        assert "not traced" in shown(app, "#shared-detail")


async def test_traced_text_is_not_markup() -> None:
    rec = Recording.load(RECORDING)
    app = MemtopApp(ReplaySource(rec, at_s=rec.duration_s), interval_s=1.0, initial_pane="shared")
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        st = app.state.get(SharedState)
        seg = ShmSegment(
            shmid=999,
            key=0,
            perms=0o600,
            size_bytes=1 << 20,
            cpid=4242,
            lpid=4242,
            nattch=1,
            uid=0,
            gid=0,
            cuid=0,
            cgid=0,
            atime_s=0,
            dtime_s=0,
            ctime_s=0,
            rss_bytes=1 << 30,
            swap_bytes=0,
            creator_comm="[red]x[/red]",
            last_comm="[bold]y",
            mapped_by=(4242,),
        )
        call = SharedCall(
            ts_ns=app.state.ts_ns,
            pid=4242,
            tid=4242,
            comm="[blink]z",
            call="shmat",
            result=-22,
            error="EINVAL",
            shmid=999,
            flags=0,
        )
        table = ShmTable((*st.segments, 999))
        app.state.apply(Batch(app.state.ts_ns, (seg, table, call)))
        app.redraw()
        await settle(pilot)
        first = rows(app)[0]  # the largest resident first
        assert first[labels(app).index("CREATOR")] == "4242 [red]x[/red]"
        assert first[labels(app).index("LAST")] == "4242 [bold]y"
        t = app.query_one("#shared-table", DataTable)
        t.move_cursor(row=0)
        t.focus()
        await settle(pilot)
        assert "4242 [blink]z" in shown(app, "#shared-detail")
        await pilot.press("enter")
        await settle(pilot)
        assert "created by 4242 [red]x[/red], last used by 4242 [bold]y" in shown(app, "#shared-detail")


async def test_shm_calls_are_traced_only_while_the_pane_is_shown() -> None:
    """Enabling a syscall tracepoint slows every syscall of every task (bench/shared_cost.py): the
    shm/madvise/memfd tracer (shmsnoop) attaches when the pane shows and detaches when it hides;
    nothing the probes attach at start is on a syscall tracepoint."""
    from support import FakeSource

    from memtop.probes.registry import PROBES, on_demand, probe_class
    from memtop.probes.shared import ShmSnoopProbe

    at_start = [probe_class(n) for n in PROBES if not on_demand(n)]
    hooks = [tp for cls in at_start for tp in (*cls.tracepoints, *getattr(cls, "optional_tracepoints", ()))]
    assert hooks and not [tp for tp in hooks if tp.startswith("syscalls:")]
    assert on_demand("shmsnoop") and any(
        tp.startswith("syscalls:sys_enter_shm") for tp in ShmSnoopProbe.tracepoints
    )

    src = FakeSource()
    app = MemtopApp(src, interval_s=1.0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert src.kernel_traced == []
        await pilot.press("9")
        await settle(pilot)
        assert src.kernel_traced == [("shmsnoop", True)]
        await pilot.press("1")
        await settle(pilot)
        assert src.kernel_traced == [("shmsnoop", True), ("shmsnoop", False)]
