"""`memtop` (and `memtop replay FILE`): the terminal app on a live or replayed source."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from memtop.commands.common import check_pane, check_pid, make_source
from memtop.runtime import priority, startup_gc

if TYPE_CHECKING:
    from memtop.stream.source import Source
    from memtop.ui.app import MemtopApp


def run_app(app: MemtopApp, headless: bool = False) -> int:
    """Run the app (a terminal session, or headless for a snapshot) and surface its error."""
    try:
        if headless:
            code = app.run(headless=True, size=(200, 60))
        else:  # fd 2 to the log, a terminal that can go away, an exit deadline (memtop.ui.term_compat)
            from memtop.ui import term_compat

            code = term_compat.run_in_terminal(app)
    finally:
        priority.restore()  # as the collector: the first frame puts it back, or the way out
        startup_gc.release()  # the first frame releases it; an app that never drew one too
        # the probes are still detaching in a thread (uprobes go one at a time in the kernel): the
        # process may not wind down around it (LLVM's static destructors under a thread inside
        # libbcc crashed, rc 139); the exit deadline ends it if the detach takes too long
        app.wait_detached()
    if app.error is not None:
        raise app.error
    if code is None:  # an exception inside the app ended it (Textual printed it): 1, never 0
        code = app.return_code
    return int(code or 0)


def run_tui_app(args: argparse.Namespace, source: Source, leak_pids: list[int] | None = None) -> int:
    """The terminal app on a live or replayed source, with the options both share."""
    from memtop.runtime import lifecycle

    lifecycle.require_terminal()  # without one, Textual spun on end of file and outlived signals
    startup_gc.hold()  # until the first frame (importing Textual included)
    from memtop.ui.app import MemtopApp

    app = MemtopApp(
        source,
        interval_s=args.interval,
        snapshot_format=args.snapshot_format,
        snapshot_dir=args.snapshot_dir,
        initial_pid=args.pid,
        initial_pane=args.pane,
        leak_pids=leak_pids,
        # `--sample-bytes N` (0 too) is the answer to the preflight's question, given up front
        ask_before_tracing=getattr(args, "sample_bytes", None) is None and not getattr(args, "budget", None),
    )
    return run_app(app)


def run_tui(args: argparse.Namespace) -> int:
    check_pid(args.pid, args.proc_root)
    for pid in args.leaks or []:
        check_pid(pid, args.proc_root)
    check_pane(args.pane)
    return run_tui_app(args, make_source(args, defer_bpf=True), args.leaks)
