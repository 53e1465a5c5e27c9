"""Recording and replay in the TUI: `R` toggles a recording of the live session; on a replayed
source, Space pauses/plays, ←/→ step one interval, [ / ] jump one minute, G goes to a time
(lower-case g stays the leaks pane's growth sort).

Kept out of ``app.py`` so the app only wires these in (bindings, a header hook, actions).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from memtop import fmt
from memtop.errors import MemtopError
from memtop.records import Lost
from memtop.state.host import HostState

if TYPE_CHECKING:
    from memtop.ui.app import MemtopApp

REPLAY_ACTIONS = {"replay_step", "replay_jump", "replay_goto"}

# priority: the focused table would otherwise take ← → (check_action lets them through when the
# source is live or a text field has the keyboard)
BINDINGS: list[BindingType] = [
    Binding("R", "record", "Record", priority=True),
    Binding("left", "replay_step(-1)", "−1 step", priority=True, show=False),
    Binding("right", "replay_step(1)", "+1 step", priority=True, show=False),
    Binding("left_square_bracket", "replay_jump(-60)", "−1 min", priority=True, show=False),
    Binding("right_square_bracket", "replay_jump(60)", "+1 min", priority=True, show=False),
    Binding("G", "replay_goto", "Go to time", priority=True),
]


def is_replay(app: MemtopApp) -> bool:
    return getattr(app.source, "mode", "") == "replay"


def check_action(app: MemtopApp, action: str) -> bool | None:
    if action not in REPLAY_ACTIONS and action != "record":
        return True
    if isinstance(app.focused, Input) or isinstance(app.screen, ModalScreen):
        return False  # typing in a field, or a dialog is open
    if action == "record":
        return not is_replay(app)
    return is_replay(app)


# -- recording ---------------------------------------------------------------------------------------
def toggle_recording(app: MemtopApp) -> None:
    rec = app.recorder
    if rec is not None:
        app.recorder = None
        try:
            path = rec.close("user")
        except MemtopError as exc:
            app.notify(f"recording failed: {exc}", severity="error", timeout=10, markup=False)
            return
        app.notify(
            f"recording written to {path} ({rec.batches} samples, {rec.duration_s:.0f} s)",
            timeout=6,
            markup=False,
        )
        app.redraw()
        return
    from memtop.recording import default_name, open_recorder  # json and gzip: not before the first frame

    # what the live state already knows that the recording would otherwise lack
    prelude: list[Any] = list(app.state.statuses.values())
    prelude += [Lost(p, w, n) for (p, w), n in app.state.lost.items()]
    prelude += [f for f in (app.state.get(HostState).facts,) if f is not None]
    try:
        app.recorder = open_recorder(
            default_name(app.snapshot_dir),
            app.state.statuses.values(),
            interval_s=app.interval_s,
            mode=app.source.mode,
            prelude=prelude,
        )
    except MemtopError as exc:
        app.notify(f"cannot record: {exc}", severity="error", timeout=10, markup=False)
        return
    app.notify(f"recording to {app.recorder.path} (R stops)", timeout=4, markup=False)
    app.redraw()


def stop_recording(app: MemtopApp, reason: str = "quit") -> None:
    rec, app.recorder = app.recorder, None
    if rec is not None:
        try:
            rec.close(reason)
        except MemtopError as exc:
            app.error = app.error or exc


def header_text(app: MemtopApp) -> Text:
    """The recording / replay position indicator for the header line."""
    t = Text()
    rec = app.recorder
    if rec is not None:
        t.append(" ● REC ", style="bold red")
        size = recording_size(app)
        t.append(f"{rec.duration_s:.0f}s {rec.batches} samples {size} → {rec.path.name}", style="red")
    position = getattr(app.source, "position_text", None)
    if callable(position):
        t.append(f" {position()} ", style="bold reverse cyan")
    return t


# -- replay controls ---------------------------------------------------------------------------------
def control(app: MemtopApp, what: str, value: float = 0) -> None:
    src: Any = app.source
    if what == "play":
        src.toggle_play()
    elif what == "step":
        src.step(int(value))
    elif what == "jump":
        src.jump(value)
    elif what == "goto":
        src.goto(value)
    app.redraw()


class GotoScreen(ModalScreen[float | None]):
    """Ask for a time in the recording: SS, MM:SS or H:MM:SS from its start."""

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]
    DEFAULT_CSS = """
    GotoScreen { align: center middle; }
    GotoScreen > #goto-label { width: 70; height: auto; padding: 1 2 0 2; background: $panel; }
    GotoScreen > #goto-input { width: 70; }
    """

    def __init__(self, duration_s: float) -> None:
        super().__init__()
        self.duration_s = duration_s

    def compose(self) -> ComposeResult:
        from memtop.replay import fmt_clock

        yield Static(
            Text(
                f"Go to time (SS, MM:SS or H:MM:SS from the start; the recording is "
                f"{fmt_clock(self.duration_s)} long). Enter goes, Esc cancels."
            ),
            id="goto-label",
        )
        yield Input(placeholder="e.g. 1:30", id="goto-input")

    def on_mount(self) -> None:
        self.query_one("#goto-input", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        from memtop.replay import parse_time

        try:
            seconds = parse_time(event.value)
        except ValueError:
            self.app.notify(
                f"not a time: {event.value!r} (use SS, MM:SS or H:MM:SS)", severity="error", markup=False
            )
            return
        self.dismiss(seconds)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


def ask_goto(app: MemtopApp) -> None:
    src: Any = app.source

    def done(seconds: float | None) -> None:
        if seconds is not None:
            control(app, "goto", seconds)

    app.push_screen(GotoScreen(float(src.duration_s)), done)


def install_sigterm(app: MemtopApp) -> None:
    """SIGTERM quits like `q`: the recording is finished and probes detach."""
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, lambda: app.exit(143))


def recording_size(app: MemtopApp) -> str:
    rec = app.recorder
    if rec is None:
        return ""
    try:
        return fmt.bytes_h(rec.tmp_path.stat().st_size)
    except OSError:
        return ""
