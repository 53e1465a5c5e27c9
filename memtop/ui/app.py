"""The memtop Textual app: composes the panes, drives polling on a timer, snapshots panes."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import Binding, BindingType
from textual.containers import Container, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.widgets import Static

from memtop.core.errors import Interrupted, MemtopError
from memtop.headless import snapshots
from memtop.headless.snapshots import SnapshotRequest
from memtop.records import Batch
from memtop.runtime import lifecycle, priority, ready, resources, startup_gc
from memtop.state import State
from memtop.stream.runner import Runner
from memtop.stream.source import Source, sleep_until
from memtop.ui import help, term_compat
from memtop.ui.levels import mono
from memtop.ui.lines import KeyLine, TabLine, show_text
from memtop.ui.panes import pane_class, pane_names
from memtop.ui.panes.base import ChooseTracing, DrillIn, Pane, TraceAllocations
from memtop.ui.recplay import RecordReplay
from memtop.ui.screens import DrillScreen
from memtop.ui.textual_compat import LeanScreen
from memtop.views import ALWAYS_SHOWN_PROBES, FIRST_FRAME_PROBES, LEGEND, TABS, get_view
from memtop.views.header import header_line

if TYPE_CHECKING:
    from textual.driver import Driver

#: from the start of an exit, how long unmounting waits for the probes to detach (what is left when
#: a compilation holds them up, the kernel detaches as the process exits)
DETACH_WAIT_S = 1.8
MIN_SIZE = (60, 15)


#: what the help says below the keys
HELP_NOTES = (
    "Replay: memtop replay FILE (Space plays and pauses).",
    "Snapshots: --snapshot-format svg|txt|json, --snapshot-dir DIR;"
    " headless: memtop snapshot --pane NAME --format json --output FILE --after SECONDS.",
)


class HelpScreen(ModalScreen[None]):
    """The keys of what was shown (a pane or a drill-in) first, then the keys that work everywhere
    (memtop/ui/help.py), in columns to the terminal's width; it scrolls when taller."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", tooltip="close the help")]

    def __init__(
        self,
        sections: list[help.Section] | None = None,
        notes: tuple[str, ...] = (),
        legend: Sequence[help.Entry] = (),
    ) -> None:
        super().__init__()
        self.sections = sections or []
        self.notes = notes
        self.legend = legend

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-scroll"):
            yield Static(id="help-body")

    def on_mount(self) -> None:
        self._lay_out()

    def on_resize(self, event: events.Resize) -> None:
        self._lay_out()

    def _lay_out(self) -> None:
        # the border and padding take 6 cells; the screen keeps 2 around the box
        width = max(20, min(150, self.app.size.width - 8))
        body = self.query_one("#help-body", Static)
        body.styles.width = width + 6
        show_text(body, help.layout(self.sections, width, self.notes, self.legend))


class WholeCellScrollBar(ScrollBarRender):
    """Scrollbars whose thumb is whole cells. Textual draws a thumb's ends with eighth-block
    glyphs (`▅`, `▊`) for a smoother look; a terminal that shows the glyph rather than the colour
    (tmux's capture, a poor palette, a screen reader, the SVG's text) shows `▅▅` at the end of
    a row, read as a stale sparkline. A blank glyph is never taken for data."""

    VERTICAL_BARS: ClassVar[list[str]] = [" "] * len(ScrollBarRender.VERTICAL_BARS)
    HORIZONTAL_BARS: ClassVar[list[str]] = [" "] * len(ScrollBarRender.HORIZONTAL_BARS)


class MemtopApp(RecordReplay):
    # every pane family brings its own styles/<name>.tcss; memtop.tcss first
    CSS_PATH = [
        str(p) for p in sorted(resources.styles_dir().glob("*.tcss"), key=lambda p: p.name != "memtop.tcss")
    ]
    TITLE = "memtop"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, tooltip="quit"),
        Binding("question_mark", "help", "Help", tooltip="this help"),
        Binding("f1", "help", "Help", show=False, tooltip="this help"),  # htop's keys
        Binding("f10", "quit", "Quit", show=False, tooltip="quit"),
        Binding("s", "snapshot", "Snapshot", tooltip="snapshot the pane to a file"),
        Binding("space", "pause", "Pause", tooltip="freeze what is shown (data is still collected)"),
        Binding("plus", "interval(0.5)", "Slower", show=False, tooltip="refresh less often"),
        Binding("minus", "interval(-0.5)", "Faster", show=False, tooltip="refresh more often"),
    ]
    BINDINGS += [Binding(str(i), f"show_pane({i})", show=False) for i in range(1, 10)]
    # the tenth pane's key is 0, as the tenth key of the number row
    BINDINGS += [Binding("0", "show_pane(10)", show=False)]
    #: whether a timer calls :meth:`tick` every ``interval_s``. The UI tests turn it off and call
    #: ``tick`` themselves (tests/support/ui.py ``drive``): a timer firing whenever a loaded
    #: machine lets it made what a test saw depend on the clock
    timer_ticks: ClassVar[bool] = True

    def __init__(
        self,
        source: Source,
        *,
        interval_s: float = 1.0,
        snapshot_format: str = "svg",
        snapshot_dir: str = ".",
        snapshot_request: SnapshotRequest | None = None,
        initial_pid: int | None = None,
        initial_pane: str | None = None,
        leak_pids: list[int] | None = None,
        ask_before_tracing: bool = True,
    ) -> None:
        """``ask_before_tracing``: after the leaks preflight the Leaks pane asks how to trace
        (False: `--sample-bytes` was given, or no one is there to ask, as in a headless
        snapshot: the source follows `--sample-bytes`, else the proposal)."""
        super().__init__()
        ScrollBar.renderer = WholeCellScrollBar
        self.source = source
        # a replay's seeks start from checkpoints of the state; a headless snapshot seeks once
        self.runner = Runner(source, interval_s=interval_s, checkpoints=snapshot_request is None)
        self.snapshot_format = snapshot_format
        self.snapshot_dir = snapshot_dir
        self.snapshot_request = snapshot_request
        self.initial_pid = initial_pid
        # `memtop --leaks PID` is asked to show allocations: it opens on the Leaks pane
        self.initial_pane = initial_pane or ("leaks" if leak_pids else None)
        #: pids to trace the allocations of (`memtop --leaks PID[,PID…]`, the drill-in's `m`)
        self.leak_pids = list(leak_pids or [])
        self.ask_before_tracing = ask_before_tracing and snapshot_request is None
        self.paused = False
        #: while paused, what is shown: a copy of the state as it was when the pause began (the
        #: runner's goes on being updated), so a resize, a sort key or a drill-in redraws the
        #: moment paused and not the data collected since
        self._frozen: State | None = None
        #: the panes' view names, in tab order
        self.pane_names = pane_names()
        #: the view name of the pane shown (its tab is marked; the pane is built when first shown)
        self.active_name = self._first_pane()
        self._timer: Any = None
        #: ticks done: the source polled (or had nothing), the batch applied and, unless paused,
        #: drawn (tests wait on this rather than on the clock)
        self.ticks_done = 0
        self.last_snapshot: Path | None = None
        self._drill_mounted: Awaitable[Any] | None = None  # the drill-in screen, once pushed
        #: seconds from process start to the first frame with data (for the benchmarks)
        self.first_frame_s: float | None = None
        #: CPU seconds (user + system, every thread) this process had used by its first frame
        self.first_frame_cpu_s: float | None = None
        #: set once the first frame with data is on screen
        self._drawn = asyncio.Event()
        #: monotonic time of the first redraw (the data reached the widgets)
        self._first_redraw_at: float | None = None
        self.error: MemtopError | None = None
        #: the thread detaching the probes once exiting has begun (terminal sessions), and when
        self._detacher: threading.Thread | None = None
        self._released = threading.Event()
        self._exit_started = 0.0
        #: the probes last said to feed what is on screen (None: all; Source.watch)
        self._watched: frozenset[str] | None = None
        #: what the header was last drawn from (its line, the recording's text, the width, the
        #: styles as NO_COLOR leaves them)
        self._header_drawn: tuple[object, ...] | None = None

    @property
    def state(self) -> State:
        """What is shown: the runner's state (a replay's seek may replace it: never keep it
        across ticks), or while paused the copy taken when the pause began."""
        return self._frozen if self._frozen is not None else self.runner.state

    # -- layout -----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield Static(id="banner", classes="hidden")
        yield Static(id="too-small", classes="hidden")
        tabs = [(name, f"{i} {TABS[name]}") for i, name in enumerate(self.pane_names, 1)]
        yield TabLine(tabs, self.active_name, id="tabline")
        # only the pane shown at start is built now; the others when first shown (_pane_in): the
        # unseen panes' widgets cost CPU before the first frame for nothing (docs/performance.md)
        with Container(id="panes"):
            yield pane_class(self.active_name)(id=f"pane-{self.active_name}")
        yield KeyLine(id="keys")

    def _first_pane(self) -> str:
        names = self.pane_names
        req = self.snapshot_request
        for name in (req.pane if req is not None else None, self.initial_pane):
            if name in names:
                return name
        return names[0]

    async def _pane_in(self, name: str) -> Pane:
        """The pane ``name`` (one of ``pane_names``), built and mounted the first time it is shown."""
        container = self.main_screen.query_one("#panes", Container)
        for pane in container.query_children(Pane):
            if pane.id == f"pane-{name}":
                return pane
        pane = pane_class(name)(id=f"pane-{name}")
        await container.mount(pane)
        return pane

    def get_default_screen(self) -> Screen[Any]:
        """The main screen, whose partial updates render only the lines they send (on an idle
        tick Textual rendered every widget on it for the header and a row or two)."""
        return LeanScreen(id="_default")

    def get_driver_class(self) -> type[Driver]:
        """Textual's Linux driver, made to survive the terminal going away (memtop.ui.term_compat)."""
        return term_compat.MemtopDriver

    def exit(self, result: int | None = None, return_code: int = 0, message: Any = None) -> None:
        """Every way out (q, a signal, the terminal gone) starts here. On a terminal the exit
        deadline is armed, so the process is gone within it whatever a thread is doing, and the
        probes start detaching at once, while Textual tears down."""
        if term_compat.SESSION is not None:
            lifecycle.arm_exit_deadline(int(result or return_code or 0))
            self._begin_detach()
        super().exit(result, return_code, message)

    def _begin_detach(self) -> None:
        """Finish the recording and detach everything in a daemon thread: first every perf event
        at once (each detach waits for RCU grace periods in the kernel: one after the other they
        were most of an exit), then the probes one by one, which then costs little."""
        if self._detacher is not None:
            return
        self._exit_started = time.monotonic()
        self.stop_recording()  # its last batch is in; nothing after this is recorded
        source = self.source

        def detach() -> None:
            source.stop_attaching()
            lifecycle.release_perf_events()
            self._released.set()
            source.close()

        self._detacher = threading.Thread(target=detach, name="memtop-detach", daemon=True)
        self._detacher.start()

    def wait_detached(self) -> None:
        """Return once the detach begun at exit is done (at once when none was begun). The exit
        deadline armed at the same time ends the process should the detach outlast it."""
        if self._detacher is not None:
            self._detacher.join()

    async def on_mount(self) -> None:
        # SIGTERM, SIGHUP (terminal closed) and SIGINT end the app through its normal exit path,
        # so every probe is detached in on_unmount; end of file or an error on the terminal does
        # the same (term_compat). In a terminal Ctrl-C is a key.
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self.exit, 128 + int(sig))
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        term_compat.attach(self)
        if self.snapshot_request is not None:
            # headless, Ctrl-C is a signal, not a key: the snapshot is abandoned (exit 130)
            try:
                loop.add_signal_handler(signal.SIGINT, self._snapshot_interrupted)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        pane = self.active_pane()
        if pane is not None:
            pane.focus_default()
        # the probes the first screen shows are read before it; those of other panes after
        self._watch()
        await self.runner.start()  # /proc data is in state now; BPF probes attach in the background
        if self.leak_pids:  # `memtop --leaks PID[,PID…]`: counted first, the leaks pane asks
            self._ask_to_trace(self.leak_pids)
        self.redraw()
        self._start_timer()
        if self.snapshot_request is not None:
            self.run_worker(self._headless_snapshot(self.snapshot_request), exclusive=True)
        if self.initial_pid is not None:
            self.post_message(DrillIn(self.initial_pid))
        self.run_worker(self._announce_ready())

    async def _announce_ready(self) -> None:
        """For scripts and benchmarks (memtop.runtime.ready): once every probe is attached or failed."""
        await self.source.wait_settled(120.0)
        # and once the first frame is drawn: with nothing to compile (--no-bpf) every probe was
        # settled before it, and the file said nothing of the first frame
        try:
            await asyncio.wait_for(self._drawn.wait(), 120.0)
        except TimeoutError:
            pass
        ready.announce(self.source.statuses(), self.first_frame_s, self.first_frame_cpu_s)

    def _start_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = (
            self.run_worker(self._ticks(), name="ticks", exit_on_error=True) if self.timer_ticks else None
        )

    async def _ticks(self) -> None:
        """A tick every ``interval_s`` on a fixed grid from now, as Textual's ``set_interval``
        (a late tick skips the times it missed). Each tick's poll is asked for its time (the
        live source waits for it in its poll thread): the event loop is woken once a tick, by
        the batch, not first by a timer and then by the batch."""
        step = self.runner.interval_s
        start = time.monotonic()
        n = 1
        while True:  # cancelled when the timer is started again and when the app ends
            at = start + n * step
            now = time.monotonic()
            if at < now:  # late: the next time on the grid
                n = int((now - start) / step) + 1
                continue
            await self.tick(at)
            # absorbed at once by a poll in flight (a pane's catch-up): this tick's time is waited
            # for here, not spun through
            await sleep_until(at)
            n += 1

    async def tick(self, at: float | None = None) -> Batch | None:
        """One tick, as the timer runs it: poll the source (at ``time.monotonic()`` ``at``, else
        now), apply, announce notices, redraw. The batch applied (None: the source had nothing,
        or a poll in flight absorbed this one)."""
        batch = await self.runner.tick(at)
        # notices any state asks for (e.g. an OOM kill) show on whatever screen is up, paused
        # too, except on the pane that shows the same thing in full: there a toast would cover
        # the detail it repeats
        on_main = len(self.screen_stack) == 1
        for notice in self.runner.pop_notices():
            if not (on_main and notice.pane and notice.pane == self.active_name):
                self.notify(notice.text, severity=notice.severity, timeout=10, markup=False)
        if not self.paused:
            self.redraw()
        self.ticks_done += 1
        return batch

    @property
    def main_screen(self) -> Screen[Any]:
        """The screen with the header and the panes (a drill-in or help screen may be on top;
        ``App.query_one`` would search only that one)."""
        return self.screen_stack[0]

    def redraw(self) -> None:
        if not self.screen_stack or not self.is_running:
            return
        try:
            self._redraw()
        except NoMatches:  # torn down between the timer firing and this call
            pass

    def _redraw(self) -> None:
        if self._first_redraw_at is None:
            self._first_redraw_at = time.monotonic()
            # a fallback: on_ready marks the first frame sooner when that frame showed the data
            self.call_after_refresh(self._first_frame)
        self._draw_header()
        self._watch_and_catch_up()
        # a drill-in covers the pane: the pane is drawn again when the drill-in is left (in a swap
        # storm, refreshing the unseen processes table was a tenth of memtop's CPU)
        pane = self.active_pane()
        if pane is not None and not any(isinstance(s, DrillScreen) for s in self.screen_stack):
            pane.refresh_from(self.state)
        screen = self.screen
        if isinstance(screen, DrillScreen):
            screen.refresh_from(self.state)

    def _watch(self) -> bool:
        """Tell the source which probes feed what is on screen (the drill-in's, or the pane's, and
        those the header and the notices need): the others are polled less often, and the Kernel
        and Shared probes read slabinfo and scan processes less often still. A recording (R) is
        of every pane, a headless snapshot is short: everything is watched meanwhile. True when
        a probe now watched was polled less often until now: poll before drawing it (the source
        reads it at its next poll)."""
        probes: frozenset[str] | None = None
        if self.recorder is None and self.snapshot_request is None:
            drill = next((s for s in reversed(self.screen_stack) if isinstance(s, DrillScreen)), None)
            pane = self.active_pane()
            # until the first frame is on screen, only what it draws (the source's first poll
            # reads only what is watched); the notices' probes from the tick after it
            always = ALWAYS_SHOWN_PROBES if self.first_frame_s is not None else FIRST_FRAME_PROBES
            if drill is not None:
                probes = frozenset((*drill.view.probes, *always))
            elif pane is not None:
                probes = frozenset((*pane.view.probes, *always))
        if probes == self._watched:
            return False
        self._watched = probes
        return self.source.watch(probes)

    def _watch_and_catch_up(self) -> None:
        """:meth:`_watch`, and a tick at once when what is now on screen was polled less often
        (a drill-in left, a recording started): never drawn from a reading seconds old."""
        if self._watch() and self._first_redraw_at is not None:
            self.call_later(self.tick)

    def pop_screen(self) -> AwaitComplete:
        done = super().pop_screen()
        if (
            self.screen_stack
            and not isinstance(self.screen, DrillScreen)
            and self._first_redraw_at is not None
        ):
            self._redraw()  # the pane a drill-in covered is drawn as it is now
        return done

    def on_resize(self, event: events.Resize) -> None:
        """Below MIN_SIZE the panes cannot show their tables: say so instead of drawing garbage."""
        small = event.size.width < MIN_SIZE[0] or event.size.height < MIN_SIZE[1]
        note = self.main_screen.query_one("#too-small", Static)
        parts = (
            self.main_screen.query_one("#tabline", TabLine),
            self.main_screen.query_one("#panes", Container),
        )
        if small:
            show_text(
                note,
                Text(
                    f"Terminal too small ({event.size.width}×{event.size.height}); "
                    f"memtop needs at least {MIN_SIZE[0]}×{MIN_SIZE[1]}. Data keeps being collected."
                ),
            )
            note.remove_class("hidden")
            for part in parts:
                part.add_class("hidden")
        else:
            note.add_class("hidden")
            for part in parts:
                part.remove_class("hidden")

    def on_ready(self, event: events.Ready) -> None:
        """Textual sends Ready once its first full frame is written. When the data was in the
        widgets before that frame (on_mount draws it before the first layout), that frame is
        memtop's first: it is marked at the time it was written, not when this handler runs
        (an after-refresh callback comes several partial repaints later)."""
        drawn = self._first_redraw_at
        if drawn is not None and drawn <= event.time:
            self._first_frame(written_at=event.time)

    def _first_frame(self, written_at: float | None = None) -> None:
        if self.first_frame_s is None:
            late = 0.0 if written_at is None else max(0.0, time.monotonic() - written_at)
            self.first_frame_s = ready.since_process_start() - late
            # the CPU the process used to get there: on a shared or loaded machine the wall time
            # above is this stretched by whoever else runs (the callbacks since the frame was
            # written are in it too: a few ms at most)
            self.first_frame_cpu_s = time.process_time()
            self._drawn.set()
            # in a terminal (the TUI as users run it; not under a test's Pilot) the collector
            # runs at its steady thresholds from now on
            startup_gc.release(steady=term_compat.SESSION is not None)
            # the start's raised priority ends with it: from now on memtop competes with what it
            # watches as started, and the BPF compiler's process, started next, inherits that
            priority.restore()
            # BPF programs compile from now on: compiling while the first frame was drawn made
            # it later and attached nothing sooner (docs/performance.md)
            self.source.begin_bpf()
            # the probes the first frame did not wait for (the notices', the CGROUP column's):
            # read at a tick now rather than at the next one
            self._watch_and_catch_up()

    def active_pane(self) -> Pane | None:
        """The pane shown (None while a pane asked for is still being built)."""
        if not self.screen_stack:
            return None
        try:
            return self.main_screen.query_one(f"#pane-{self.active_name}", Pane)
        except NoMatches:
            return None

    def show_pane(self, name: str) -> None:
        """Show the pane ``name``: its tab is marked at once, the pane is built if it never was
        and shown (with the keyboard) once it is mounted."""
        if name == self.active_name or name not in self.pane_names:
            return
        self.active_name = name
        self.main_screen.query_one("#tabline", TabLine).active = name
        self.call_later(self._show_active)

    async def _show_active(self) -> None:
        name = self.active_name
        pane = await self._pane_in(name)
        if name != self.active_name:  # another pane was asked for meanwhile
            return
        for other in self.main_screen.query_one("#panes", Container).query_children(Pane):
            other.display = other is pane
        if self._watch():  # its probes were polled less often while it was hidden: poll them now
            await self.tick()
        pane.refresh_from(self.state)
        pane.focus_default()

    @on(TabLine.Selected)
    def _tab_clicked(self, event: TabLine.Selected) -> None:
        self.show_pane(event.name)

    def _draw_header(self) -> None:
        head = header_line(self.state, paused=self.paused, interval_s=self.runner.interval_s)
        recording = self.recording_text()
        width = self.size.width
        # the header's figures move a few times a minute on an idle machine: the same line is
        # not built again to be found equal to what is shown (a tenth of an idle redraw)
        drawn = (head, recording.plain, tuple(recording.spans), width, mono("bold red"))
        if drawn == self._header_drawn:
            return
        self._header_drawn = drawn
        t = Text()
        for seg in head.lead:
            t.append(seg.text, style=mono(seg.style))
        t.append_text(recording)  # replay position / recording: first, never cut off
        first, second = head.fit(width - t.cell_len, width) if width else (head.rest, ())
        for seg in first:
            t.append(seg.text, style=mono(seg.style))
        if second:  # swap and pressure did not fit beside the replay's position
            t.append("\n")
            for seg in second:
                t.append(seg.text, style=mono(seg.style))
        show_text(self.main_screen.query_one("#header", Static), t)
        banner = self.main_screen.query_one("#banner", Static)
        if head.banner:
            b = Text()
            for seg in head.banner:
                b.append(seg.text, style=seg.style)
            show_text(banner, b)
            banner.remove_class("hidden")
        else:
            banner.add_class("hidden")

    # -- drill-in ---------------------------------------------------------------------------------
    @on(DrillIn)
    def _drill(self, event: DrillIn) -> None:
        from memtop.ui.screens.process import ProcessScreen  # its charts load when first drilled into

        section = self.snapshot_request.section if self.snapshot_request else ""
        # kept so a headless snapshot can wait until the screen and its tabs are mounted: exiting
        # while they still mount raised in Textual's tabs (a traceback after a good snapshot)
        self._drill_mounted = self.push_screen(
            ProcessScreen(event.pid, self.source, self.state, section=section)
        )

    @on(TraceAllocations)
    def _trace_allocations(self, event: TraceAllocations) -> None:
        """Trace the pid's allocations and show the leaks pane (the drill-in's `m`)."""
        pid = event.pid
        if pid not in self.leak_pids:
            self.leak_pids.append(pid)
        if self._ask_to_trace([pid]):
            self.notify(
                f"pid {pid}: its allocation calls are counted first (1 s); see the Leaks pane", timeout=3
            )
        elif self.source.replay is not None:
            self.notify("a replay shows the allocations that were traced when it was recorded", timeout=4)
        else:  # attaching still, or no BPF: the leaks pane's status line says which
            self.notify(f"cannot trace pid {pid} now: see the leaks pane's status", severity="warning")
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.show_pane("leaks")

    def _ask_to_trace(self, pids: list[int]) -> bool:
        """The preflight first; then the Leaks pane asks, or the source decides unasked."""
        if self.ask_before_tracing:
            return self.source.measure_allocations(pids)
        return self.source.trace_allocations(pids)

    @on(ChooseTracing)
    def _choose_tracing(self, event: ChooseTracing) -> None:
        """The answer to the leaks preflight: trace as chosen, or not at all."""
        pids = ", ".join(map(str, event.pids))
        if event.sample_bytes is None:
            self.source.decline_allocations(event.pids)
            self.notify(f"not tracing pid {pids}", timeout=3)
        elif self.source.trace_allocations(event.pids, sample_bytes=event.sample_bytes, budget=event.budget):
            how = (
                f"in windows on a {event.budget:.0%} CPU budget"
                if event.budget
                else f"byte sampling every ~{event.sample_bytes} bytes"
                if event.sample_bytes
                else "every allocation"
            )
            self.notify(f"tracing allocations of pid {pids}: {how}", timeout=3)
        else:
            self.notify(f"cannot trace pid {pids} now: see the leaks pane's status", severity="warning")

    # -- actions ----------------------------------------------------------------------------------
    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.help_sections(), self.help_notes(), self.help_legend()))

    def help_sections(self) -> list[help.Section]:
        """What `?` lists: the keys of the drill-in or pane shown, then the keys of everywhere."""
        first: help.Section
        screen = self.screen
        if isinstance(screen, DrillScreen):
            first = (
                f"{screen.title or 'Drill-in'}",
                help.merge([*help.entries(help.class_bindings(type(screen))), *screen.help_entries()]),
            )
        else:
            # the class: a pane asked for a moment ago may still be being built
            pane = pane_class(self.active_name)
            keys = [*help.entries(help.class_bindings(pane)), *pane.help_entries()]
            first = (f"{get_view(self.active_name).title} pane", help.merge(keys))
        everywhere = [
            ("1-9", "show pane (tabs above)"),
            ("0", "show pane 10"),
            ("Tab Shift-Tab", "move the focus"),
            *help.entries(help.class_bindings(type(self))),
        ]
        return [first, ("Everywhere", everywhere)]

    def help_notes(self) -> tuple[str, ...]:
        from memtop.state.host import HostState
        from memtop.views.header import headers_text

        headers = headers_text(self.state.get(HostState).facts)
        if headers:  # not in the header line: it crowded it (a stand-in works: tracepoints only)
            headers = f"Kernel {headers} (the running kernel's are not installed; memtop reads only tracepoint fields)."
        return (*HELP_NOTES, *((headers,) if headers else ()))

    def help_legend(self) -> list[help.Entry]:
        """What the marks and counts of what is shown mean: the pane's own, then every pane's."""
        view = get_view("process" if isinstance(self.screen, DrillScreen) else self.active_name)
        return [*view.legend, *LEGEND]

    def action_pause(self) -> None:
        if self.replay_toggle():  # Space plays/pauses a replay itself
            return
        self.set_paused(not self.paused)

    def set_paused(self, paused: bool) -> None:
        """Pause the display (data keeps being collected) or go on from the data now."""
        from memtop.stream.replay import thaw

        self.paused = paused
        self._frozen = thaw(self.runner.save_state()) if paused else None
        # drawn from the copy at once (the same figures) or from the data now: a pane or drill-in
        # redrawn later by itself (a resize, a sort key) draws from the state it was last given
        self.redraw()

    def action_interval(self, delta: float) -> None:
        # the Runner owns the interval (headers, recordings and snapshots read it there); the
        # timer that calls its tick follows it
        interval_s = self.runner.change_interval(delta)
        self._start_timer()
        self.notify(f"refresh every {interval_s:g}s", timeout=1.5)
        self._draw_header()

    def action_show_pane(self, index: int) -> None:
        if 1 <= index <= len(self.pane_names):
            self.show_pane(self.pane_names[index - 1])

    def action_snapshot(self) -> None:
        try:
            path = self.write_snapshot(self.snapshot_format)
        except MemtopError as exc:  # disk full and the like: a notice, the session goes on
            self.notify(f"snapshot failed: {exc}", severity="error", timeout=10, markup=False)
            return
        self.notify(f"snapshot written to {path}", timeout=4, markup=False)

    def snapshot_target(self) -> DrillScreen | Pane | None:
        """What `s` snapshots: the drill-in screen when it is up, else the active pane."""
        screen = self.screen
        if isinstance(screen, DrillScreen):
            return screen
        return self.active_pane()

    def write_snapshot(self, fmt_name: str, output: str | None = None, force: bool = False) -> Path:
        target = self.snapshot_target()
        if target is None:
            raise MemtopError("nothing to snapshot")
        data: str | bytes
        if fmt_name == "svg":  # a picture of the screen
            data = self.export_screenshot(title=f"memtop {target.title}")
        else:  # the same document `memtop snapshot` writes, from the view
            data = snapshots.render_file(target.view, self.state, target.options(), fmt_name)
        name = target.snapshot_name if isinstance(target, DrillScreen) else target.view_name
        path = snapshots.write(
            output or snapshots.default_path(self.snapshot_dir, name, fmt_name), data, force
        )
        self.last_snapshot = path
        return path

    async def _headless_snapshot(self, req: SnapshotRequest) -> None:
        try:
            await self.runner.settle()
            await self.runner.tick()
            deadline = time.monotonic() + req.after_s
            while time.monotonic() < deadline:
                await asyncio.sleep(min(self.runner.interval_s, max(0.0, deadline - time.monotonic())))
                await self.runner.tick()
            await self.runner.tick()
            if self.initial_pid is not None:
                for _ in range(200):  # the DrillIn message is handled on the next turns of the loop
                    if self._drill_mounted is not None:
                        break
                    await asyncio.sleep(0.01)
                if self._drill_mounted is not None:
                    await self._drill_mounted
            self.redraw()
            await asyncio.sleep(0.05)
            self.write_snapshot(req.fmt, req.output, req.force)
            self.exit(0)
        except MemtopError as exc:
            self.error = exc
            self.exit(2)

    def _snapshot_interrupted(self) -> None:
        if self.last_snapshot is not None:
            return  # written (and the exit asked for) before the signal was handled
        req = self.snapshot_request
        self.error = Interrupted(f"interrupted; {req.output if req else 'the snapshot'} was not written")
        self.exit(Interrupted.exit_code)

    async def action_quit(self) -> None:
        self.exit(0)

    async def on_unmount(self) -> None:
        if term_compat.SESSION is not None:  # no-ops after exit(); else an exit by a crash
            lifecycle.arm_exit_deadline(int(self.return_code or 1))
            self._begin_detach()
        detach = self._detacher
        if detach is not None:  # a terminal session: wait for the detach begun at exit (bounded)
            while detach.is_alive() and time.monotonic() < self._exit_started + DETACH_WAIT_S:
                await asyncio.sleep(0.02)
            # perf events must all be released by the living process (lifecycle.release_perf_events)
            end = time.monotonic() + lifecycle.RELEASE_GRACE_S
            while not self._released.is_set() and time.monotonic() < end:
                await asyncio.sleep(0.02)
            if detach.is_alive():  # held up (a compilation under way): the kernel finishes at exit
                return
        self.stop_recording()
        await self.runner.stop()
