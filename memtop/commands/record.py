"""`memtop record`: the record stream to a file, headless (no TUI)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from memtop.commands.args import Parser, add_budget, add_sample_bytes, common, pid_list, positive_float
from memtop.commands.common import check_pid, make_source

if TYPE_CHECKING:
    from memtop.stream.recording import Recorder


def add_parser(sub: argparse._SubParsersAction[Parser]) -> None:
    r = sub.add_parser("record", help="record the record stream to a file, headless (no TUI)")
    common(r)
    r.add_argument("--output", "-o", required=True, help="the recording (.jsonl.gz)")
    r.add_argument(
        "--duration", type=positive_float, help="seconds to record (default: until Ctrl-C/SIGTERM)"
    )
    r.add_argument("--force", action="store_true", help="overwrite an existing file")
    r.add_argument("--quiet", "-q", action="store_true", help="no summary on stderr")
    r.add_argument(
        "--leaks", type=pid_list, default=None, help="also trace allocations of (leaks pane) PID[,PID…]"
    )
    add_sample_bytes(r)
    add_budget(r)


def run_record(args: argparse.Namespace) -> int:
    import asyncio

    from memtop.core import fmt
    from memtop.headless.frontends import record

    for pid in args.leaks or []:
        check_pid(pid, args.proc_root)
    live = not args.quiet and sys.stderr.isatty()

    def started(rec: Recorder) -> None:
        # on a terminal, where it goes at once (it used to say nothing until it stopped); a script
        # still gets one line on stderr, the summary or the error
        if live:
            sys.stderr.write(f"memtop: recording to {rec.path} (Ctrl-C or SIGTERM stops)\n")

    def ticked(rec: Recorder) -> None:
        try:
            size = fmt.bytes_h(rec.tmp_path.stat().st_size)
        except OSError:
            size = "?"
        sys.stderr.write(f"\r  {rec.batches} samples, {rec.duration_s:.0f} s, {size} so far ")
        sys.stderr.flush()

    try:
        res = asyncio.run(
            record(
                make_source(args),
                args.output,
                interval_s=args.interval,
                duration_s=args.duration,
                force=args.force,
                leak_pids=args.leaks or (),
                on_start=started,
                on_tick=ticked if live else None,
            )
        )
    finally:
        if live:
            sys.stderr.write("\n")
    if not args.quiet:
        sys.stderr.write(
            f"memtop: recorded {res.batches} samples, {res.records} records, "
            f"{res.duration_s:.1f} s, {fmt.bytes_h(res.size_bytes)}\n"
        )
    print(res.path)
    return 0
