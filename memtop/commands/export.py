"""`memtop export`: serve memtop's figures to Prometheus, write them for node_exporter's textfile
collector, or turn a recording into OpenMetrics (memtop.export does the work)."""

from __future__ import annotations

import argparse
import os
import sys

from memtop.commands.args import Parser, common, count_arg, nonneg_int, positive_float
from memtop.commands.common import make_source
from memtop.core.errors import MemtopError
from memtop.core.text import clean


def add_parser(sub: argparse._SubParsersAction[Parser]) -> None:
    e = sub.add_parser(
        "export",
        help="serve memtop's figures to Prometheus (/metrics), write them for node_exporter's "
        "textfile collector, or turn a recording into OpenMetrics; no TUI",
    )
    common(e, interval_default="at each scrape's pace; 1 with --textfile")
    e.set_defaults(interval=None)  # memtop.export.pace
    e.add_argument(
        "--listen",
        default=None,
        metavar="HOST:PORT",
        help="where to serve /metrics (default 127.0.0.1:9479, loopback; another address is served "
        "only when given here)",
    )
    e.add_argument("--no-listen", action="store_true", help="serve nothing (with --textfile)")
    e.add_argument(
        "--textfile", metavar="PATH", help="also write the exposition here every interval, atomically"
    )
    e.add_argument("--duration", type=positive_float, help="seconds to run (default: until Ctrl-C/SIGTERM)")
    e.add_argument(
        "--topk",
        type=count_arg,
        default=10,
        help='processes exported per figure (default 10; the rest summed as rest="true")',
    )
    e.add_argument(
        "--pid-labels", action="store_true", help="add a pid label to process series (more series)"
    )
    e.add_argument(
        "--cgroup-depth", type=nonneg_int, default=3, help="deepest cgroup level exported (default 3)"
    )
    e.add_argument("--cgroup-regex", default="", metavar="RE", help="only cgroups whose path matches RE")
    e.add_argument(
        "--max-series", type=count_arg, default=10000, help="series per scrape at most (default 10000)"
    )
    e.add_argument(
        "--node-name",
        metavar="NAME",
        help="the node label on every series (default: $MEMTOP_NODE_NAME, else the host's name; '' for none)",
    )
    e.add_argument(
        "--page-cache-listing",
        action="store_true",
        help="also sum the page cache of every process's open and mapped files "
        "(memtop_page_cache_listed_bytes; reads each process's fds and maps, off by default as "
        "node_exporter's costlier collectors are; --cache-path files are exported either way)",
    )
    e.add_argument("--replay", metavar="FILE", help="read a recording instead (with --openmetrics)")
    e.add_argument(
        "--openmetrics", metavar="OUT", help="--replay: write timestamped OpenMetrics for promtool"
    )
    e.add_argument(
        "--step", type=positive_float, default=15.0, help="--replay: seconds between points (default 15)"
    )
    e.add_argument("--force", action="store_true", help="overwrite an existing --openmetrics file")


def say_what_is_lacking() -> None:
    """In one line at start, what the exporter cannot see here (the doctor's failing checks): in
    a container, the mount or capability it was not given. The checks import every probe class
    (the on-demand tracers' too) and every view to list their hooks: module code the exporter
    would keep for weeks and never run (~3 MiB). They run in a forked child, which says the line
    and exits; in this process when there is no fork."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError:
        _say_lacking()
        return
    if pid == 0:  # the child: nothing but the checks, then out without the parent's exit handlers
        code = 0
        try:
            _say_lacking()
        except BaseException:  # noqa: BLE001 - the line is a courtesy; the exporter starts anyway
            code = 1
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.waitpid(pid, 0)


def _say_lacking() -> None:
    from memtop.headless.doctor import run_checks

    failed = [c for c in run_checks() if not c.ok and c.required]
    # a tracepoint's or a probe's check fails because of one above it (privileges, tracefs):
    # counted only, `memtop doctor` lists them
    lacking = [f"{c.name} ({c.detail})" for c in failed if not c.name.startswith(("tracepoint ", "probe "))]
    hooks = sum(c.name.startswith("tracepoint ") for c in failed)
    lacking += [f"{hooks} tracepoints (memtop doctor lists them)"] if hooks else []
    if lacking:
        sys.stderr.write("memtop: lacking: " + "; ".join(clean(w) for w in lacking) + "\n")


def run_export(args: argparse.Namespace) -> int:
    import asyncio
    import re

    from memtop.export.metrics import Options as ExportOptions

    try:
        re.compile(args.cgroup_regex)
    except re.error as exc:
        raise MemtopError(
            f"--cgroup-regex: {exc}", "a Python regular expression, e.g. 'docker|kubepods'"
        ) from None
    from memtop.export.node import node_name

    opts = ExportOptions(
        node=node_name(args.node_name),
        topk=args.topk,
        pid_labels=args.pid_labels,
        cgroup_depth=args.cgroup_depth,
        cgroup_regex=args.cgroup_regex,
        max_series=args.max_series,
    )
    if args.replay or args.openmetrics:
        if not (args.replay and args.openmetrics):
            raise MemtopError(
                "--replay and --openmetrics go together", "memtop export --replay FILE --openmetrics OUT"
            )
        from memtop.export.backfill import backfill

        points, samples = backfill(args.replay, args.openmetrics, opts, step_s=args.step, force=args.force)
        sys.stderr.write(f"memtop: {args.openmetrics}: {points} points, {samples} samples\n")
        return 0
    if args.no_listen and not args.textfile:
        raise MemtopError("--no-listen without --textfile exports nothing", "add --textfile PATH")
    say_what_is_lacking()
    from memtop.export.server import DEFAULT_LISTEN, export, parse_listen

    listen = None if args.no_listen else parse_listen(args.listen or DEFAULT_LISTEN)
    return asyncio.run(
        export(
            make_source(args),
            opts,
            listen=listen,
            textfile=args.textfile,
            interval_s=args.interval,
            duration_s=args.duration,
        )
    )
