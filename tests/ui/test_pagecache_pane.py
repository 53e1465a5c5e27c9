"""The Page cache pane as a user drives it, on batches a live session could give: most cached
first, `D`/`E` sort by dirty and recently evicted, `/` filters by path, the scope sentence and
the listed total beside Cached, a thrashing file marked, Enter drills into the file's holder; a
path with control characters is shown escaped, never as markup; key 0 shows the pane."""

from __future__ import annotations

from rich.text import Text
from support import FakeSource
from support.ui import drive, settle
from textual.widgets import DataTable, Static

from memtop.headless.snapshots import render
from memtop.records import Batch, ProbeStatus
from memtop.records.host import MemInfo
from memtop.records.pagecache import CachedFile, CachedFiles, PagecacheActivity
from memtop.ui.app import MemtopApp
from memtop.ui.screens import DrillScreen
from memtop.views.pagecache import PagecacheView, summary_segments
from memtop.views.segments import plain

S = 10**9
MiB = 1 << 20
STATUS = (ProbeStatus("pagecacheinfo", "attached"), ProbeStatus("pagecache", "attached"))
MEM = MemInfo(
    total_bytes=24 << 30,
    free_bytes=20 << 30,
    available_bytes=22 << 30,
    buffers_bytes=0,
    cached_bytes=1 << 30,
    swap_total_bytes=0,
    swap_free_bytes=0,
)


def f(
    ino: int, path: str, cached_mib: int, dirty_mib: int = 0, recent_mib: int = 0, evicted_mib: int = 0
) -> CachedFile:
    return CachedFile(
        dev=8,
        ino=ino,
        path=path,
        size_bytes=64 * MiB,
        cached_bytes=cached_mib * MiB,
        dirty_bytes=dirty_mib * MiB,
        writeback_bytes=0,
        evicted_bytes=evicted_mib * MiB,
        recently_evicted_bytes=recent_mib * MiB,
        holders=((4242, "postgres"),) if ino == 1 else (),
    )


FILES = (
    f(1, "/var/lib/db/base.dat", 60, evicted_mib=30, recent_mib=1),
    f(2, "/var/log/app.log", 5, dirty_mib=4),
    f(3, "/srv/media/\x1b[31mred[/b].mp4", 20, recent_mib=12),
)
BATCHES = [
    Batch(
        1 * S,
        (
            *STATUS,
            MEM,
            *FILES,
            CachedFiles(files_known=120, cached_bytes=85 * MiB, paths=("/srv",)),
            PagecacheActivity(added=0, deleted=0, files=((8, 1, 0, 0),)),
        ),
    ),
    Batch(
        2 * S,
        (*STATUS, PagecacheActivity(added=8192, deleted=8192, files=((8, 1, 8192, 8192),))),
    ),
]


def table_paths(app: MemtopApp) -> list[str]:
    t = app.query_one("#pagecache-table", DataTable)
    col = [str(c.label).rstrip(" ▼▲") for c in t.ordered_columns].index("PATH")
    return [str(t.get_row_at(i)[col]) for i in range(t.row_count)]


def shown(app: MemtopApp, widget_id: str) -> str:
    r = app.query_one(widget_id, Static).render()
    return r.plain if isinstance(r, Text) else str(r)


async def test_sorts_filter_scope_thrash_and_drill_in() -> None:
    source = FakeSource(list(BATCHES))
    app = MemtopApp(source, interval_s=1.0, initial_pane="processes")
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("0")  # the tenth pane
        await settle(pilot)
        assert app.active_name == "pagecache"
        await drive(app, pilot, ticks=2)
        paths = table_paths(app)
        assert paths[0] == "/var/lib/db/base.dat" and paths[1].startswith("/srv/media/\\x1b[31mred")
        summary = shown(app, "#pagecache-summary")
        assert "listed files 85.0M (8%) of Cached 1.0G" in summary
        assert "files nobody has open are not listed" in summary
        t = app.query_one("#pagecache-table", DataTable)
        row0 = [str(c) for c in t.get_row_at(0)]
        assert "THRASH" in row0 and "postgres[4242]" in row0  # evicted 8192 pages, read back as many
        await pilot.press("D")
        await settle(pilot)
        assert table_paths(app)[0] == "/var/log/app.log"
        await pilot.press("E")
        await settle(pilot)
        assert table_paths(app)[0].startswith("/srv/media/")
        await pilot.press("slash")
        await settle(pilot)
        for ch in "log":
            await pilot.press(ch)
        await pilot.press("enter")
        await settle(pilot)
        assert table_paths(app) == ["/var/log/app.log"]
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("C")
        await settle(pilot)
        t.move_cursor(row=0)
        t.focus()
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DrillScreen) and 4242 in source.focused


async def test_the_summary_is_one_set_of_segments_for_the_pane_and_the_text() -> None:
    """The lines above the table are built once, as the view's segments: the pane draws them and
    the text snapshot writes their text, so the two say the same thing (issue 36: one presenter)."""
    app = MemtopApp(FakeSource(list(BATCHES)), interval_s=1.0, initial_pane="pagecache")
    async with app.run_test(size=(200, 40)) as pilot:
        await drive(app, pilot, ticks=2)
        view = PagecacheView()
        doc = view.document(app.state, view.default_options())
        lines = plain(summary_segments(doc))
        assert "listed files 85.0M (8%) of Cached 1.0G" in lines
        assert shown(app, "#pagecache-summary") == lines
        assert f"\n{lines}\n" in render(view, app.state, view.default_options(), "txt")
