"""The sentences a pane shows (its status line, its summaries), as styled segments built from the
state and the document: the TUI draws them (memtop/ui/lines.py ``segments_text``), and nothing
here imports Rich or Textual. Style names are Rich style strings ("bold red")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memtop.state import State
from memtop.views import View, no_reading_text


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    style: str = ""


class Sentence(list[Segment]):
    """The segments of a pane's lines, built as a Rich Text is (``add(text, style)``) but without
    Rich: the TUI draws them (memtop/ui/lines.py ``segments_text``), and :func:`plain` gives
    their text. Lines are separated by "\\n" in a segment's text."""

    def add(self, text: str, style: str = "") -> None:
        self.append(Segment(text, style))


def plain(segments: list[Segment]) -> str:
    """The segments' text, without their styles (a text snapshot's line)."""
    return "".join(seg.text for seg in segments)


def _alternative_shown(view: View[Any], state: State, name: str) -> bool:
    """``name`` is one of a group of alternatives (View.alternatives) another of which the
    status line shows: the one running (or on its way, or failed), else the first with a
    state, else the group's first."""
    rank = {"attached": 0, "erroring": 0, "attaching": 0, "pending": 0, "failed": 1}
    for group in view.alternatives:
        if name in group:
            states = {n: st.state for n in group if (st := state.probe_state(n)) is not None}
            shown = min(states, key=lambda n: rank.get(states[n], 2)) if states else group[0]
            return name != shown
    return False


def probe_line(view: View[Any], state: State, *, quiet_when_absent: bool = False) -> list[Segment]:
    """A pane's status line: what feeds it and whether it is attached, erroring (since when, why,
    how often), failed (why, what to do), and what /proc/vmstat says while its probe is blind.
    ``quiet_when_absent``: its probes run only when asked, so not running is no news."""
    parts: list[Segment] = []

    def sep() -> str:
        return "  " if parts else ""

    for name in view.probes:
        st = state.probe_state(name)
        if st is None:
            if quiet_when_absent or _alternative_shown(view, state, name):
                continue
            if name in view.on_request:  # it runs when asked (the pane's keys say how)
                parts.append(Segment(sep() + f"{name}: off", "dim"))
                continue
            # not loaded at all (--no-bpf, or a recording made without it): its figures are
            # not measurements, whatever the table shows
            where = "in this recording" if state.mode == "replay" else "in this session"
            parts.append(Segment(sep() + f"{name}: not running {where}", "yellow"))
            continue
        if parts:
            parts.append(Segment("  "))
        lost = state.lost_total(name)
        if st.state == "erroring":
            # the pane's figures are this probe's last reading: say how old, and why
            text = (
                no_reading_text(state, name) or f"{name}: erroring (poll failed {st.failures}×: {st.message})"
            )
            parts.append(Segment(text, "bold red"))
            if lost:
                parts.append(Segment(f"  lost {lost}", "bold red"))
            continue
        style = {"attached": "green", "failed": "red", "attaching": "yellow"}.get(st.state, "dim")
        parts.append(Segment(f"{name}: {st.state}", style))
        if st.state == "failed":
            parts.append(Segment(f" — {st.message}", "red"))
            if st.hint:
                parts.append(Segment(f" ({st.hint})", "italic"))
        elif st.state in ("attaching", "pending"):
            parts.append(Segment(" …", "yellow"))
        if lost:
            parts.append(Segment(f"  lost {lost}", "bold red"))
    blind = view.blind_note(state)
    if blind:
        parts.append(Segment(sep() + blind, "yellow"))
    return parts
