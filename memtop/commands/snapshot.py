"""`memtop snapshot`: run headless (live, or `--replay FILE`), then write one pane to a file."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from memtop.commands.args import (
    LIMIT_HELP,
    SNAPSHOT_FORMATS,
    Parser,
    add_budget,
    add_sample_bytes,
    common,
    limit_arg,
    nonneg_float,
    pid_arg,
    pid_list,
)
from memtop.commands.common import check_at, check_pid, check_section, make_source
from memtop.core.errors import MemtopError
from memtop.runtime import startup_gc

if TYPE_CHECKING:
    from pathlib import Path

    from memtop.headless.snapshots import SnapshotRequest
    from memtop.stream.source import Source


def add_parser(sub: argparse._SubParsersAction[Parser]) -> argparse.ArgumentParser:
    s = sub.add_parser("snapshot", help="run headless, then write one pane to a file")
    common(s)
    s.add_argument("--pane", required=True)
    s.add_argument("--format", choices=SNAPSHOT_FORMATS, default="json")
    s.add_argument("--output", required=True)
    s.add_argument(
        "--after",
        type=nonneg_float,
        default=None,
        metavar="SECONDS",
        help="seconds to watch after probes attach before writing (default: one --interval, so "
        "rates and charts have two readings; 0: the first reading only, rates then read n/a)",
    )
    s.add_argument("--force", action="store_true", help="overwrite an existing file")
    s.add_argument("--pid", type=pid_arg)
    s.add_argument("--section", default="")
    s.add_argument(
        "--working-set",
        type=nonneg_float,
        default=0.0,
        metavar="SECONDS",
        help="with --pane process --pid: measure the process's working set over one window of "
        "SECONDS first (clears its referenced bits; json or txt; the section defaults to working_set)",
    )
    s.add_argument("--leaks", type=pid_list, help="pids for --pane leaks")
    add_sample_bytes(s)
    add_budget(s)
    return s


def add_replay_args(snap: argparse.ArgumentParser) -> None:
    """`memtop snapshot --replay FILE`: its options come after the record and replay commands'."""
    snap.add_argument("--replay", metavar="FILE", help="take the snapshot from a recording")
    snap.add_argument(
        "--at", type=nonneg_float, help="--replay: seconds from the recording's start (default: its end)"
    )
    snap.add_argument("--salvage", action="store_true", help="--replay: accept a recording cut short")
    snap.add_argument("--limit", type=limit_arg, action="append", metavar="NAME=VALUE", help=LIMIT_HELP)


def check_snapshot_args(args: argparse.Namespace) -> None:
    """The checks every headless snapshot makes before anything starts (pane, format, section,
    pid, file)."""
    from memtop.linux import files
    from memtop.views import get_view

    view = get_view(args.pane)
    if args.format not in ("svg", "txt", "json", *view.extra_formats, *view.binary_formats):
        raise MemtopError(f"pane {args.pane!r} has no {args.format!r} format", "use svg, txt or json")
    check_section(view, args.section)
    if args.pane == "process" and args.pid is None:
        raise MemtopError("--pane process needs --pid PID")
    if getattr(args, "working_set", 0.0):
        if args.pane != "process" or args.format not in ("json", "txt"):
            raise MemtopError("--working-set goes with --pane process --pid PID", "and --format json or txt")
        args.section = args.section or "working_set"
    files.check_target(args.output, args.force)


def run_headless_snapshot(
    args: argparse.Namespace, source: Source, after_s: float, leak_pids: list[int] | None = None
) -> int:
    from memtop.headless.snapshots import SnapshotRequest

    req = SnapshotRequest(
        args.pane,
        args.format,
        args.output,
        after_s,
        args.force,
        args.pid,
        args.section,
        getattr(args, "working_set", 0.0),
    )
    if req.fmt == "svg":  # a picture of the screen: the app draws it
        written = run_svg_snapshot(args, source, req, leak_pids)
    else:  # from the view alone, without Textual
        import asyncio

        from memtop.headless.frontends import snapshot

        written = asyncio.run(snapshot(source, req, interval_s=args.interval, leak_pids=leak_pids or ()))
    if written is None:  # the app ended before writing (e.g. SIGINT before it listened)
        raise MemtopError(f"{args.output} was not written")
    print(args.output)  # only a complete file is reported
    return 0


def run_svg_snapshot(
    args: argparse.Namespace, source: Source, req: SnapshotRequest, leak_pids: list[int] | None
) -> Path | None:
    startup_gc.hold()  # until the first frame (importing Textual included)
    from memtop.commands.tui import run_app
    from memtop.ui.app import MemtopApp

    app = MemtopApp(
        source,
        interval_s=args.interval,
        snapshot_request=req,
        initial_pid=args.pid if args.pane == "process" else None,
        leak_pids=leak_pids,
    )
    code = run_app(app, headless=True)
    if code:
        raise SystemExit(code)
    return app.last_snapshot


def run_snapshot(args: argparse.Namespace) -> int:
    check_snapshot_args(args)
    check_pid(args.pid, args.proc_root)
    for pid in args.leaks or []:
        check_pid(pid, args.proc_root)
    # rates need two readings an interval apart: a snapshot taken at once showed 0/s while the
    # kernel scanned 36k pages/s
    after_s = args.interval if args.after is None else args.after
    return run_headless_snapshot(args, make_source(args), after_s, args.leaks)


def run_replay_snapshot(args: argparse.Namespace) -> int:
    from memtop.stream.recfile import Recording, limits_from
    from memtop.stream.replay import ReplaySource

    check_snapshot_args(args)
    rec = Recording.load(args.replay, salvage=args.salvage, limits=limits_from(args.limit))
    at = rec.duration_s if args.at is None else args.at
    check_at(at, rec.duration_s)
    return run_headless_snapshot(args, ReplaySource(rec, at_s=at), 0.0)
