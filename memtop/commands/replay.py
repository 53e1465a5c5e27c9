"""`memtop replay FILE`: the terminal app on a recording (``--info``: describe it and exit)."""

from __future__ import annotations

import argparse

from memtop.commands.args import (
    LIMIT_HELP,
    SNAPSHOT_FORMATS,
    Parser,
    interval_arg,
    limit_arg,
    nonneg_float,
    pid_arg,
    speed_arg,
)
from memtop.commands.common import check_at, check_pane


def add_parser(sub: argparse._SubParsersAction[Parser]) -> None:
    rp = sub.add_parser("replay", help="open the TUI on a recording")
    rp.add_argument("file", metavar="FILE")
    rp.add_argument("--speed", type=speed_arg, default=1.0, help="playback speed (default 1)")
    rp.add_argument("--at", type=nonneg_float, help="start paused at SECONDS from the start")
    rp.add_argument("--salvage", action="store_true", help="load a recording that was cut short")
    rp.add_argument("--info", action="store_true", help="describe the recording and exit")
    rp.add_argument("--limit", type=limit_arg, action="append", metavar="NAME=VALUE", help=LIMIT_HELP)
    rp.add_argument(
        "--interval", type=interval_arg, default=argparse.SUPPRESS, help="screen refresh, seconds"
    )
    rp.add_argument("--pane", default=argparse.SUPPRESS, help="pane to show at start")
    rp.add_argument("--pid", type=pid_arg, default=argparse.SUPPRESS, help="open the drill-in for PID")
    rp.add_argument("--snapshot-format", choices=SNAPSHOT_FORMATS[:3], default=argparse.SUPPRESS)
    rp.add_argument("--snapshot-dir", default=argparse.SUPPRESS)


def run_replay(args: argparse.Namespace) -> int:
    from memtop.commands.tui import run_tui_app
    from memtop.stream.replay import Recording, ReplaySource, limits_from

    rec = Recording.load(args.file, salvage=args.salvage, limits=limits_from(args.limit))
    if args.info:
        print(rec.describe())
        return 0
    check_pane(args.pane)
    if args.at is not None:
        check_at(args.at, rec.duration_s)
    return run_tui_app(args, ReplaySource(rec, speed=args.speed, at_s=args.at))
