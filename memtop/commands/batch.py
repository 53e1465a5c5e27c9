"""`memtop --batch`: print a pane every interval to stdout, like top -b (live or `--replay FILE`)."""

from __future__ import annotations

import argparse
import os
import sys

from memtop.commands.args import LIMIT_HELP, count_arg, limit_arg
from memtop.commands.common import check_pid, make_source
from memtop.core.errors import MemtopError


def add_args(p: argparse.ArgumentParser) -> None:
    """The top-level options of `--batch` (it is not a subcommand: `memtop --batch`, as top -b)."""
    p.add_argument(
        "--batch",
        action="store_true",
        help="print the pane (default: processes) every interval to stdout, like top -b; no TUI",
    )
    p.add_argument(
        "--count", type=count_arg, help="--batch: stop after N outputs (default: run until killed)"
    )
    p.add_argument("--json", action="store_true", help="--batch: one JSON snapshot document per line")
    p.add_argument("--replay", metavar="FILE", help="--batch: read a recording instead of the live system")
    p.add_argument("--limit", type=limit_arg, action="append", metavar="NAME=VALUE", help=LIMIT_HELP)


def run_batch(args: argparse.Namespace) -> int:
    import asyncio

    from memtop.headless.frontends import batch_live, batch_replay
    from memtop.views import Options, get_view

    view = get_view(args.pane or "processes")
    if view.name == "process" and args.pid is None:
        raise MemtopError("--pane process needs --pid PID")
    opts = Options(pid=args.pid)
    try:
        if args.replay:
            from memtop.stream.replay import limits_from

            batch_replay(
                args.replay,
                view,
                opts,
                interval_s=args.interval,
                count=args.count,
                as_json=args.json,
                limits=limits_from(args.limit),
            )
        else:
            check_pid(args.pid, args.proc_root)
            for pid in args.leaks or []:  # `--batch --pane leaks --leaks PID`: allocations traced
                check_pid(pid, args.proc_root)
            asyncio.run(
                batch_live(
                    make_source(args),
                    view,
                    opts,
                    interval_s=args.interval,
                    count=args.count,
                    as_json=args.json,
                    leak_pids=args.leaks or (),
                )
            )
    except BrokenPipeError:
        # the reader went away (| head): not an error; keep Python from complaining at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0
