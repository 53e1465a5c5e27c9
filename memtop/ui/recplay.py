"""Recording and replay in the TUI, as a component of the app: ``RecordReplay`` owns its bindings
and actions, and memtop's app is built on it. `R` toggles a recording of the live session; on a
replayed source, Space pauses/plays, ←/→ step one interval, [ / ] jump one minute, G goes to a
time (lower-case g stays the leaks pane's growth sort).

The recording is one of the Runner's subscribers: it gets the batches the state got, in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from memtop.core import fmt
from memtop.core.errors import MemtopError
from memtop.records import Batch, Lost, Record
from memtop.state.host import HostState
from memtop.stream.runner import Runner
from memtop.stream.source import ReplayControls

REPLAY_ACTIONS = {"replay_step", "replay_jump", "replay_goto"}

if TYPE_CHECKING:  # json and gzip load when a recording starts, not before the first frame
    from memtop.stream.recording import Recorder


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
        from memtop.stream.replay import fmt_clock

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
        from memtop.stream.replay import parse_time

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


class RecordReplay(App[int]):
    """The record / replay controls. The app built on it provides the runner, the snapshot
    directory (where `R` records) and ``redraw``."""

    # priority: the focused table would otherwise take ← → (check_action lets them through when the
    # source is live or a text field has the keyboard)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("R", "record", "Record", priority=True, tooltip="start / stop recording (to --snapshot-dir)"),
        Binding(
            "left",
            "replay_step(-1)",
            "−1 step",
            priority=True,
            show=False,
            tooltip="replay: one interval back",
        ),
        Binding(
            "right", "replay_step(1)", "+1 step", priority=True, show=False, tooltip="replay: one interval on"
        ),
        Binding(
            "left_square_bracket",
            "replay_jump(-60)",
            "−1 min",
            priority=True,
            show=False,
            tooltip="replay: a minute back",
        ),
        Binding(
            "right_square_bracket",
            "replay_jump(60)",
            "+1 min",
            priority=True,
            show=False,
            tooltip="replay: a minute on",
        ),
        Binding("G", "replay_goto", "Go to time", priority=True, tooltip="replay: go to a time"),
    ]

    runner: Runner
    snapshot_dir: str
    error: MemtopError | None

    def __init__(self) -> None:
        super().__init__()
        #: the recording `R` toggles (fed the same batches as the state, by the runner)
        self.recorder: Recorder | None = None

    def redraw(self) -> None:
        raise NotImplementedError

    @property
    def replay(self) -> ReplayControls | None:
        return self.runner.source.replay

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action not in REPLAY_ACTIONS and action != "record":
            return True
        if isinstance(self.focused, Input) or isinstance(self.screen, ModalScreen):
            return False  # typing in a field, or a dialog is open
        if action == "record":
            return self.replay is None
        return self.replay is not None

    # -- recording ------------------------------------------------------------------------------
    def action_record(self) -> None:
        rec = self.recorder
        if rec is not None:
            self._end_recording(rec)
            return
        from memtop.stream.recording import (  # json and gzip: not before the first frame
            default_name,
            open_recorder,
        )

        state = self.runner.state
        # what the live state already knows that the recording would otherwise lack
        prelude: list[Record] = list(state.statuses.values())
        prelude += [Lost(p, w, n) for (p, w), n in state.lost.items()]
        prelude += [f for f in (state.get(HostState).facts,) if f is not None]
        try:
            self.recorder = open_recorder(
                default_name(self.snapshot_dir),
                state.statuses.values(),
                interval_s=self.runner.interval_s,
                mode=self.runner.source.mode,
                prelude=prelude,
            )
        except MemtopError as exc:
            self.notify(f"cannot record: {exc}", severity="error", timeout=10, markup=False)
            return
        self.runner.subscribe(self._record_batch)
        self.notify(f"recording to {self.recorder.path} (R stops)", timeout=4, markup=False)
        self.redraw()

    def _end_recording(self, rec: Recorder) -> None:
        self.recorder = None
        self.runner.unsubscribe(self._record_batch)
        try:
            path = rec.close("user")
        except MemtopError as exc:
            self.notify(f"recording failed: {exc}", severity="error", timeout=10, markup=False)
            return
        self.notify(
            f"recording written to {path} ({rec.batches} samples, {rec.duration_s:.0f} s)",
            timeout=6,
            markup=False,
        )
        self.redraw()

    def _record_batch(self, batch: Batch) -> None:
        rec = self.recorder
        if rec is None:
            return
        try:
            rec.write(batch)
        except MemtopError as exc:  # disk full and the like: the session goes on
            self.recorder = None
            self.runner.unsubscribe(self._record_batch)
            self.notify(str(exc), severity="error", timeout=10, markup=False)

    def stop_recording(self, reason: str = "quit") -> None:
        """Finish the recording on the way out (its last batch is in)."""
        rec, self.recorder = self.recorder, None
        self.runner.unsubscribe(self._record_batch)
        if rec is not None:
            try:
                rec.close(reason)
            except MemtopError as exc:
                self.error = self.error or exc

    def recording_text(self) -> Text:
        """The recording / replay position indicator for the header line."""
        t = Text()
        rec = self.recorder
        if rec is not None:
            t.append(" ● REC ", style="bold red")
            try:
                size = fmt.bytes_h(rec.tmp_path.stat().st_size)
            except OSError:
                size = ""
            t.append(f"{rec.duration_s:.0f}s {rec.batches} samples {size} → {rec.path.name}", style="red")
        replay = self.replay
        if replay is not None:
            t.append(f" {replay.position_text()} ", style="bold reverse cyan")
        return t

    # -- replay controls ------------------------------------------------------------------------
    def replay_toggle(self) -> bool:
        """Space on a replay: play / pause it. False on a live source (Space pauses the display)."""
        replay = self.replay
        if replay is None:
            return False
        replay.toggle_play()
        self.redraw()
        return True

    def action_replay_step(self, n: int) -> None:
        if self.replay is not None:
            self.replay.step(n)
            self.redraw()

    def action_replay_jump(self, seconds: float) -> None:
        if self.replay is not None:
            self.replay.jump(seconds)
            self.redraw()

    def action_replay_goto(self) -> None:
        replay = self.replay
        if replay is None:
            return

        def done(seconds: float | None) -> None:
            if seconds is not None and self.replay is not None:
                self.replay.goto(seconds)
                self.redraw()

        self.push_screen(GotoScreen(replay.duration_s), done)
