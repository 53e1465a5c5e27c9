"""Processes pane behaviour (Pilot) on a fake /proc tree: fallback, sort, filter, pause, snapshot."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from fakeproc import add_proc, make_fake_proc
from rich.console import RenderableType
from support import BOUND_S, force_tick
from support.ui import settle, wait_until
from textual.screen import Screen
from textual.widgets import DataTable

from memtop.core import fmt
from memtop.probes.procfs import ProcfsProbe
from memtop.probes.procmem import ProcmemProbe
from memtop.stream.bridge import Bridge
from memtop.ui.app import MemtopApp
from memtop.ui.panes.processes import SPARK_MIN_SPAN, SPARK_WIDTH
from memtop.views import Options, get_view


def table_pids(app: MemtopApp) -> list[int]:
    from textual.widgets import DataTable

    t = app.query_one("#processes-table", DataTable)
    return [int(str(r.key.value)) for r in t.ordered_rows]


@pytest.fixture
def fake_proc(tmp_path: Path) -> Path:
    return make_fake_proc(tmp_path / "proc")


async def test_fallback_runs_from_proc_with_banner(fake_proc: Path, no_bpf: None) -> None:
    app = MemtopApp(Bridge([ProcfsProbe(fake_proc), ProcmemProbe()]))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        force_tick(app)
        await settle(pilot)
        assert sorted(table_pids(app)) == [101, 202, 303]  # kernel thread 2 hidden
        assert app.state.mode == "procfs"
        banner = app.query_one("#banner")
        assert "hidden" not in banner.classes
        text = str(banner.render())
        assert "not running as root" in text and "sudo memtop" in text
        status = str(app.query_one("#processes-status").render())
        assert "procmem: failed" in status
        doc = get_view("processes").document(app.state, Options(sort="rss_bytes"))
        assert doc["source"] == "procfs"
        row = {r["pid"]: r for r in doc["rows"]}[202]
        assert row["rss_bytes"] == (50000 + 2000 + 100) * 1024
        assert row["swap_bytes"] == 2048 * 1024
        assert row["minor_faults"] == 20000 and row["major_faults"] == 5


async def test_sort_filter_pause(fake_proc: Path, no_bpf: None) -> None:
    app = MemtopApp(Bridge([ProcfsProbe(fake_proc)]))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        force_tick(app)
        await settle(pilot)
        assert table_pids(app) == [202, 303, 101]  # RSS descending by default
        await pilot.press("r")
        assert table_pids(app) == [101, 303, 202]
        await pilot.press("P")  # pid
        assert table_pids(app) == [101, 202, 303]
        await pilot.press("P")
        assert table_pids(app) == [303, 202, 101]
        await pilot.press("S")  # swap, largest first
        assert table_pids(app) == [202, 303, 101]
        await pilot.press(">")
        pane = app.active_pane()
        assert pane is not None and pane.opts.sort == "minor_faults_per_s"
        await pilot.press("slash")
        await pilot.press(*"char")
        await pilot.press("enter")
        await settle(pilot)
        assert table_pids(app) == [303]
        await pilot.press("slash", "ctrl+u", *"nobody", "enter")  # by user name (uid 65534)
        await settle(pilot)
        assert table_pids(app) == [303]
        await pilot.press("slash", "ctrl+u", *"--big", "enter")  # by command line
        await settle(pilot)
        assert table_pids(app) == [202]
        await pilot.press("escape")
        await settle(pilot)
        assert len(table_pids(app)) == 3
        # pause: data keeps coming into state, the table does not move
        await pilot.press("space")
        add_proc(fake_proc, 404, "delta", (90000, 0, 0), 0, 1, 0)
        force_tick(app)
        await settle(pilot)
        assert 404 not in table_pids(app)
        # collected (the runner's state), not shown (the app's: the copy taken at the pause)
        assert 404 in {r["pid"] for r in get_view("processes").document(app.runner.state, Options())["rows"]}
        assert 404 not in {r["pid"] for r in get_view("processes").document(app.state, Options())["rows"]}
        await pilot.press("space")
        await settle(pilot)
        assert table_pids(app)[0] == 404


@pytest.mark.parametrize("fmt", ["svg", "txt", "json"])
async def test_snapshot_key_writes_valid_file(
    fake_proc: Path, no_bpf: None, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / "snaps"
    out.mkdir()
    app = MemtopApp(Bridge([ProcfsProbe(fake_proc)]), snapshot_format=fmt, snapshot_dir=str(out))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        force_tick(app)
        await settle(pilot)
        await pilot.press("s")
        for _ in range(100):  # the write happens on the app's loop; allow a loaded machine time
            await settle(pilot)
            if any(out.iterdir()):
                break
    files = list(out.iterdir())
    assert len(files) == 1 and files[0].suffix == f".{fmt}"
    assert files[0].stat().st_mode & 0o777 == 0o644
    text = files[0].read_text()
    if fmt == "json":
        doc = json.loads(text)
        assert doc["pane"] == "processes" and doc["source"] == "procfs"
        assert {r["pid"] for r in doc["rows"]} == {101, 202, 303}
        assert isinstance(doc["taken_at_ns"], int)
    elif fmt == "txt":
        assert "bravo" in text and "COMMAND" in text and "Recently exited" in text
    else:
        import xml.etree.ElementTree as ET

        root = ET.fromstring(text)
        assert root.tag.endswith("svg")
        assert "bravo" in text


async def test_help_and_quit(fake_proc: Path, no_bpf: None) -> None:
    app = MemtopApp(Bridge([ProcfsProbe(fake_proc)]))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("question_mark")
        await settle(pilot)
        assert type(app.screen).__name__ == "HelpScreen"
        force_tick(app)  # the timer keeps redrawing the main screen beneath
        await settle(pilot)
        await pilot.press("escape")
        await settle(pilot)
        assert type(app.screen).__name__ != "HelpScreen"
        await pilot.press("q")
    assert app.return_code == 0


async def test_vanished_pid_does_not_crash(fake_proc: Path, no_bpf: None) -> None:
    import shutil

    app = MemtopApp(Bridge([ProcfsProbe(fake_proc)]))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        force_tick(app)
        shutil.rmtree(fake_proc / "202")
        shutil.rmtree(fake_proc / "303")  # two gone in one tick: same exit time, distinct rows
        force_tick(app)
        await settle(pilot)
        assert table_pids(app) == [101]
        doc = get_view("processes").document(app.state, Options())
        assert {202, 303} <= {e["pid"] for e in doc["exited"]}
        from textual.widgets import DataTable

        assert app.query_one("#processes-exited", DataTable).row_count == 2


async def test_resize_to_tiny_and_back_during_updates(fake_proc: Path, no_bpf: None) -> None:
    app = MemtopApp(Bridge([ProcfsProbe(fake_proc)]))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        for size in [(40, 12), (160, 40), (20, 5), (60, 15), (40, 12), (120, 30)]:
            await pilot.resize_terminal(*size)
            force_tick(app)
            await settle(pilot)
            small = size[0] < 60 or size[1] < 15
            note = app.query_one("#too-small")
            assert ("hidden" not in note.classes) == small, size
            if small:
                assert "too small" in str(note.render())
        assert sorted(table_pids(app)) == [101, 202, 303]


def screen_lines(app: MemtopApp) -> list[str]:
    """The text on the terminal, line by line (what the user sees, not the table's data)."""
    import re
    from html import unescape

    svg = app.export_screenshot()
    lines: dict[float, list[tuple[float, str]]] = {}
    for x, y, t in re.findall(r'<text class="[^"]*-r\d+" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>', svg):
        lines.setdefault(float(y), []).append((float(x), unescape(t).replace("\xa0", " ")))
    return ["".join(t for _, t in sorted(parts)) for _, parts in sorted(lines.items())]


async def test_screen_follows_changes_many_rows_and_scrolling(tmp_path: Path, no_bpf: None) -> None:
    """The table repaints only the rows that changed: the screen must still show every change,
    rows that move, rows scrolled into view, and the cursor where it is."""
    root = make_fake_proc(tmp_path / "proc")
    for i in range(200):
        add_proc(root, 1000 + i, f"idle{i:03d}", (100 + i, 10, 0), 0, 5, 0)
    app = MemtopApp(Bridge([ProcfsProbe(root)]))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        for _ in range(SPARK_WIDTH + 1):  # until the RSS sparklines are full and stop changing
            force_tick(app)
            await settle(pilot)
        text = "\n".join(screen_lines(app))
        assert "idle199" in text and "idle000" not in text  # RSS descending, 200 rows > screen
        flat = fmt.sparkline([309 * 1024] * SPARK_WIDTH, SPARK_WIDTH, SPARK_MIN_SPAN)
        assert flat in next(x for x in screen_lines(app) if "idle199" in x)
        # a visible row changes one cell (RSS), in place
        add_proc(root, 1199, "idle199", (555_555, 10, 0), 0, 5, 0)
        force_tick(app)
        await settle(pilot)
        line = next(x for x in screen_lines(app) if "idle199" in x)
        assert f" {fmt.bytes_h((555_555 + 10) * 1024)} " in line, line
        # its sparkline, a flat line until now, shows the jump
        assert (
            fmt.sparkline([309 * 1024] * (SPARK_WIDTH - 1) + [555_565 * 1024], SPARK_WIDTH, SPARK_MIN_SPAN)
            in line
        ), line
        # ... and again at the same width and place: only that row is repainted
        add_proc(root, 1199, "idle199", (444_444, 10, 0), 0, 5, 0)
        force_tick(app)
        await settle(pilot)
        line = next(x for x in screen_lines(app) if "idle199" in x)
        assert f" {fmt.bytes_h((444_444 + 10) * 1024)} " in line, line
        # an off-screen row grows to the top: it moves into view
        add_proc(root, 1000, "idle000", (900_000, 10, 0), 0, 5, 0)
        force_tick(app)
        await settle(pilot)
        lines = screen_lines(app)
        first = next(i for i, x in enumerate(lines) if "idle" in x)
        assert "idle000" in lines[first], lines[first]
        # an off-screen row changes, then is scrolled to: it shows the new value
        add_proc(root, 1001, "idle001", (104, 10, 0), 0, 5, 0)
        force_tick(app)
        await settle(pilot)
        assert not [x for x in screen_lines(app) if "idle001" in x]
        table = app.query_one("#processes-table", DataTable)
        table.focus()
        table.move_cursor(row=table.row_count - 1, animate=False)
        await settle(pilot)
        line = next(x for x in screen_lines(app) if "idle001" in x)
        assert f" {fmt.bytes_h(114 * 1024)} " in line, line


async def test_unseen_panes_are_built_when_first_shown(fake_proc: Path, no_bpf: None) -> None:
    """Only the pane shown at start is built before the first frame; a pane shown later (number
    key with the processes table focused, or a click on its tab) is built then, shown, and has
    the keyboard; one shown before is not built again, and only the pane asked for is shown."""
    from textual.widgets import Tree

    from memtop.ui.lines import TabLine
    from memtop.ui.panes.base import Pane

    app = MemtopApp(Bridge([ProcfsProbe(fake_proc), ProcmemProbe()]))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        force_tick(app)  # the /proc-only banner is up: the tabs do not move under the click below
        await settle(pilot)
        assert [p.id for p in app.query(Pane)] == ["pane-processes"]
        assert isinstance(app.focused, DataTable) and app.focused.id == "processes-table"
        tabs = app.query_one("#tabline", TabLine)
        await pilot.press("6")  # the leaks pane (its tree takes the focus)
        await settle(pilot)
        assert app.active_name == tabs.active == "leaks"
        assert isinstance(app.focused, Tree) and app.focused.id == "leaks-tree"
        start, _end, name = tabs.spans()[1]
        assert name == "vmscan"
        assert await pilot.click("#tabline", offset=(start + 2, 0))
        await settle(pilot)
        assert app.active_name == tabs.active == "vmscan"
        assert app.query_one("#vmscan-status").region.height > 0  # drawn, not only mounted
        leaks = app.query_one("#pane-leaks", Pane)
        assert leaks.region.height == 0 and not leaks.display
        await pilot.press("6")
        await settle(pilot)
        assert app.active_name == tabs.active == "leaks" and app.query_one("#pane-leaks", Pane) is leaks
        assert leaks.region.height > 0 and app.active_pane() is leaks
        assert [p.id for p in app.query(Pane) if p.display] == ["pane-leaks"]
        assert sorted(str(p.id) for p in app.query(Pane)) == ["pane-leaks", "pane-processes", "pane-vmscan"]
        assert await pilot.click("#tabline", offset=(tabs.spans()[-1][1] + 5, 0))  # past the labels
        await settle(pilot)
        assert app.active_name == "leaks"


async def test_tab_line_marks_the_shown_pane(fake_proc: Path, no_bpf: None) -> None:
    """The tab line shows every pane's label in order and, under the shown pane's label only,
    the highlighted part of its bar."""
    from memtop.ui.lines import TabLine

    app = MemtopApp(Bridge([ProcfsProbe(fake_proc), ProcmemProbe()]))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        tabs = app.query_one("#tabline", TabLine)
        labels, bar = tabs.render_line(0).text, tabs.render_line(1).text
        assert len(bar) == tabs.size.width == 160
        for i, (start, end, name) in enumerate(tabs.spans(), 1):
            assert labels[start:end].strip().startswith(f"{i} "), (labels, name)
        highlight = tabs.get_component_rich_style("tabline--highlight")

        def highlighted() -> list[int]:
            strip = tabs.render_line(1)
            cells: list[int] = []
            x = 0
            for seg in strip:
                if seg.style is not None and seg.style.color == highlight.color:
                    cells.extend(range(x, x + len(seg.text)))
                x += len(seg.text)
            return cells

        assert set(bar) == {"━"}
        start, end, _ = tabs.spans()[0]
        assert highlighted() == list(range(start, end))
        await pilot.press("3")
        await settle(pilot)
        start, end, name = tabs.spans()[2]
        assert name == app.active_name
        assert highlighted() == list(range(start, end))

        def label_color(index: int) -> object:
            start = tabs.spans()[index][0]
            x = 0
            for seg in tabs.render_line(0):
                if x <= start + 1 < x + len(seg.text):
                    return seg.style.color if seg.style is not None else None
                x += len(seg.text)
            raise AssertionError("no label there")

        plain = label_color(4)
        assert await pilot.hover("#tabline", offset=(tabs.spans()[4][0] + 2, 0))
        for _ in range(40):  # the mouse-move event is handled on a later turn of the loop
            if tabs.hovered == tabs.spans()[4][2]:
                break
            await settle(pilot)
        assert tabs.hovered == tabs.spans()[4][2]
        assert label_color(4) == tabs.get_component_rich_style("tabline--hover").color != plain
        assert await pilot.hover("#header")
        await settle(pilot)
        assert tabs.hovered == "" and label_color(4) == plain


async def test_start_pane_is_the_only_one_built(fake_proc: Path, no_bpf: None) -> None:
    from memtop.ui.lines import TabLine
    from memtop.ui.panes.base import Pane

    app = MemtopApp(Bridge([ProcfsProbe(fake_proc), ProcmemProbe()]), initial_pane="oom")
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        assert app.query_one("#tabline", TabLine).active == "oom" == app.active_name
        assert [p.id for p in app.query(Pane)] == ["pane-oom"]
        assert app.active_pane() is app.query_one("#pane-oom", Pane)


async def test_key_line_follows_focus_and_clicks_press_keys(fake_proc: Path, no_bpf: None) -> None:
    from memtop.ui.lines import KeyLine

    app = MemtopApp(Bridge([ProcfsProbe(fake_proc), ProcmemProbe()]))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        line = app.query_one("#keys", KeyLine)

        def shown() -> str:
            return str(line.render())

        assert "/ Filter" in shown() and "q Quit" in shown() and "Min age" not in shown()
        assert "Sort RSS" not in shown()  # show=False bindings stay out
        await pilot.press("6")  # the leaks tree has the focus: its keys, the app's still
        await settle(pilot)
        assert "a Min age" in shown() and "q Quit" in shown()
        start, end, key = next(k for k in line.keys if k[2] == "question_mark")
        assert shown()[start:end].strip() == "? Help"
        await pilot.click("#keys", offset=(start + 1, 0))
        await settle(pilot)
        assert type(app.screen).__name__ == "HelpScreen"


class FrameSpy:
    """Every frame Textual writes (monotonic time before and after, rows in the processes table
    then) and how the app marked its first frame."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from textual.app import App

        self.frames: list[tuple[float, float, int]] = []
        self.marked: list[float | None] = []
        #: set once Textual has written a frame
        self.painted = asyncio.Event()
        write, mark = App._display, MemtopApp._first_frame

        def display(app: MemtopApp, screen: Screen[Any], update: RenderableType | None) -> None:
            before = time.monotonic()
            table = app.main_screen.query("#processes-table")
            write(app, screen, update)
            self.frames.append((before, time.monotonic(), len(table.first(DataTable).rows) if table else 0))
            self.painted.set()

        def first_frame(app: MemtopApp, written_at: float | None = None) -> None:
            if app.first_frame_s is None:
                self.marked.append(written_at)
            mark(app, written_at)

        monkeypatch.setattr(MemtopApp, "_display", display)
        monkeypatch.setattr(MemtopApp, "_first_frame", first_frame)


async def test_first_frame_is_marked_when_the_frame_with_data_is_written(
    fake_proc: Path, no_bpf: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = FrameSpy(monkeypatch)
    app = MemtopApp(Bridge([ProcfsProbe(fake_proc), ProcmemProbe()]))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        assert app.first_frame_s is not None
        # the CPU to that frame is read with it: some, and no more than the process has used now
        assert app.first_frame_cpu_s is not None and 0 < app.first_frame_cpu_s <= time.process_time()
        first_written, rows = spy.frames[0][1], spy.frames[0][2]
        assert rows == 3  # the first frame already showed the processes
        # marked once, through Ready, with the time that frame was written (not a later repaint)
        [written_at] = spy.marked
        assert written_at is not None and first_written <= written_at
        if len(spy.frames) > 1:
            assert written_at <= spy.frames[1][0]


class SlowStart(Bridge):
    """A source whose first /proc data arrives after Textual has painted its first frame."""

    spy: FrameSpy

    async def start(self) -> None:
        await asyncio.wait_for(self.spy.painted.wait(), BOUND_S)
        await super().start()


async def test_first_frame_waits_for_data_when_the_first_paint_had_none(
    fake_proc: Path, no_bpf: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = FrameSpy(monkeypatch)
    source = SlowStart([ProcfsProbe(fake_proc), ProcmemProbe()])
    source.spy = spy
    app = MemtopApp(source)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: app.first_frame_s is not None, "the first frame with data")
        assert spy.frames[0][2] == 0  # Textual's first paint: no data yet
        assert spy.marked == [None]  # Ready did not mark it; the repaint after the data did
        assert app.first_frame_s is not None
        assert any(rows == 3 for _, _, rows in spy.frames)


def test_panes_follow_their_views_and_load_when_built() -> None:
    """Tabs come in the views' order, one per pane module, each module's pane shows its view; no
    pane module is imported before its pane is built (a fresh interpreter with the app imported)."""
    import subprocess
    import sys

    from memtop.ui.panes import pane_class, pane_names
    from memtop.views import views

    names = pane_names()
    assert names == [n for n in views() if n != "process"]  # the drill-in screen's view has no pane
    assert names[0] == "processes" and {"vmscan", "reclaim", "swapin", "oom", "leaks"} <= set(names)
    for name in names:
        assert pane_class(name).view_name == name
    code = (
        "import sys; import memtop.ui.app as a; a.pane_names(); "
        "print(sorted(m for m in sys.modules if m.startswith('memtop.ui.panes.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['memtop.ui.panes.base']"


async def test_caches_keep_only_what_the_rows_shown_draw(tmp_path: Path, no_bpf: None) -> None:
    """What the pane keeps to draw its rows is bounded by the rows it shows: the sparklines of
    this redraw only (not of every window ever drawn), equal cells as one Text, and nothing of a
    process once it is gone (a churning machine must not grow memtop)."""
    import shutil

    from memtop.ui.panes.base import _MEMOS
    from memtop.ui.panes.processes import ProcessesPane

    root = make_fake_proc(tmp_path / "proc")
    pids = range(2000, 2060)
    app = MemtopApp(Bridge([ProcfsProbe(root)]))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        for tick in range(SPARK_WIDTH + 3):  # every process grows each tick: a new window each
            for i, pid in enumerate(pids):
                add_proc(root, pid, "grower", (100 + i + 7 * tick, 10, 0), 0, 5, 0)
            force_tick(app)
            await settle(pilot)
        pane = app.query_one(ProcessesPane)
        table = app.query_one("#processes-table", DataTable)
        assert table.row_count == 63 and len(pane._sparks) <= table.row_count
        cells = [c for rk in table.rows for c in table.get_row(rk)]
        assert len({id(c) for c in cells}) < len(cells) // 2  # "grower", "0", "-" … shared
        for pid in pids:
            shutil.rmtree(root / str(pid))
        force_tick(app)
        await settle(pilot)
        assert sorted(table_pids(app)) == [101, 202, 303]
        memo = _MEMOS[table]
        assert set(memo.shown) == set(memo.rows) == {"101", "202", "303"}
        assert len(pane._sparks) <= 3
        for _ in range(2):  # the cells kept for sharing: those of the last two fills only
            force_tick(app)
            await settle(pilot)
        assert len(memo.texts) + len(memo.texts_before) <= 3 * len(table.columns)
