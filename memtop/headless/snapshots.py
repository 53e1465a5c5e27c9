"""Snapshots from views, without Textual: JSON documents, text tables and a view's own export
formats (folded stacks). The TUI's `s` and `memtop snapshot` write these; only SVG needs the app
(it is a picture of the screen)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtop.linux import files
from memtop.state import State
from memtop.views import Options, View
from memtop.views.header import summary_line

#: the formats every pane has; a view may add its own (View.extra_formats)
FORMATS = ("svg", "txt", "json")


@dataclass(frozen=True)
class SnapshotRequest:
    """`memtop snapshot`: watch ``after_s`` more once the probes have attached, then write pane
    ``pane`` as ``fmt`` to ``output`` (``pid`` and ``section`` for the drill-in)."""

    pane: str
    fmt: str
    output: str
    after_s: float = 0.0
    force: bool = False
    pid: int | None = None
    section: str = ""
    #: measure ``pid``'s working set over a window of this many seconds first (0: do not: it
    #: clears the process's referenced bits, so only on the user's flag)
    working_set_s: float = 0.0


def options_for(view: View[Any], pid: int | None = None, section: str = "") -> Options:
    """The options a snapshot of ``view`` is taken with when no pane on screen set them."""
    opts = view.default_options()
    opts.pid = pid
    if section:
        opts.section = section
    return opts


def render_file(view: View[Any], state: State, opts: Options, fmt: str) -> str | bytes:
    """What a snapshot file of ``fmt`` holds: ``render``'s text, or the bytes of one of the
    view's binary formats (pprof's gzipped protobuf)."""
    if fmt in view.binary_formats:
        return view.export_binary(state, opts, fmt)
    return render(view, state, opts, fmt)


def render(view: View[Any], state: State, opts: Options, fmt: str) -> str:
    """``fmt`` is json, txt or one of the view's extra formats (SVG is the app's)."""
    if fmt == "json":
        return json.dumps(view.document(state, opts), indent=1, ensure_ascii=False) + "\n"
    if fmt == "txt":
        summary = summary_line(state)
        return (f"{summary}\n" if summary else "") + view.text(state, opts)
    return view.export(state, opts, fmt)


def default_path(directory: str | Path, name: str, fmt: str) -> Path:
    """``memtop-<name>-<YYYYmmdd-HHMMSS>.<fmt>`` in ``directory`` (the TUI's `s`)."""
    return Path(directory) / f"memtop-{name}-{time.strftime('%Y%m%d-%H%M%S')}.{fmt}"


def write(output: str | Path, data: str | bytes, force: bool = False) -> Path:
    """Write atomically; a failure is memtop.core.errors.WriteFailed (exit 2), never a partial file."""
    return files.write_atomic(output, data, force=force)
