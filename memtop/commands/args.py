"""Argument types, the parser class and the options several subcommands share."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

SNAPSHOT_FORMATS = ("svg", "txt", "json", "folded", "pprof")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


#: the refresh intervals memtop takes: below 0.1 s a tick costs more than it shows (a tiny
#: interval kept a core busy and stretched a short recording many times over); above an hour
#: nothing is live any more
MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 3600.0


def interval_arg(text: str) -> float:
    value = positive_float(text)
    if not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(
            f"must be between {MIN_INTERVAL_S:g} and {MAX_INTERVAL_S:g} seconds: {text!r}"
        )
    return value


def nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be zero or more seconds: {text!r}")
    return value


def positive_int(text: str, noun: str, too_small: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a {noun}: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{too_small}: {text!r}")
    return value


def nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
    return value


def pid_arg(text: str) -> int:
    return positive_int(text, "pid", "not a pid")


def pid_list(text: str) -> list[int]:
    return [pid_arg(part) for part in text.split(",") if part.strip()] or [pid_arg(text)]


def speed_arg(text: str) -> float:
    value = positive_float(text)
    if value > 1000:
        raise argparse.ArgumentTypeError(f"speed must be at most 1000: {text!r}")
    return value


def count_arg(text: str) -> int:
    return positive_int(text, "count", "must be 1 or more")


def limit_arg(text: str) -> str:
    from memtop.stream.recfile import parse_limit

    try:
        parse_limit(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


LIMIT_HELP = (
    "raise a limit on what a recording may hold (repeatable): line=SIZE (default 4M), "
    "records=N per sample (100000), samples=N (1000000), size=SIZE decompressed (8G)"
)


class Parser(argparse.ArgumentParser):
    def format_help(self) -> str:
        """The options, then (for `memtop --help`) the panes and the main keys, from the views: the
        views load only when help is asked for."""
        text = super().format_help()
        if self.prog != "memtop":
            return text
        from memtop.views import views

        panes = [(name, cls.title) for name, cls in views().items() if name != "process"]
        lines = ["", "panes (number keys switch; --pane NAME starts on one):"]
        lines += [f"  {i}  {name:<10} {title}" for i, (name, title) in enumerate(panes, 1)]
        lines += ["", "main keys:", *(f"  {row}" for row in HELP_KEYS)]
        return text + "\n".join(lines) + "\n"

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"memtop: error: {message}\n")
        raise SystemExit(2)


#: `memtop --help`'s summary of the keys (`?` in the TUI shows them all, the pane's first)
HELP_KEYS = (
    "1-9 pane · Enter drill into a process · Esc back · / filter · < > sort column · r reverse",
    "space pause · s snapshot · R record · + - refresh interval · ? help · q quit",
    "replay: space play/pause · ← → step · [ ] one minute · G go to a time",
)


def common(p: argparse.ArgumentParser, interval_default: str = "1") -> None:
    """``interval_default``: what --interval's help says when it is not given (the exporter's
    default is its own: None, read at the scrapes' pace)."""
    p.add_argument(
        "--interval",
        type=interval_arg,
        default=1.0,
        help=f"refresh interval, {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} seconds (default {interval_default})",
    )
    p.add_argument("--no-bpf", action="store_true", help="do not load BPF: the /proc view only")
    p.add_argument("--proc-root", default="/proc", help=argparse.SUPPRESS)
    p.add_argument(
        "--killer",
        action="append",
        default=[],
        metavar="NAME",
        help="OOM pane: count the kills of the program NAME (its executable's or script's name) as a "
        "memory killer's, besides earlyoom, systemd-oomd, oomd, nohang, kubelet and "
        "low-memory-monitor (repeatable)",
    )
    p.add_argument(
        "--cache-path",
        action="append",
        default=[],
        metavar="DIR",
        help="Page cache pane: also list the files below DIR (recursive, bounded, no symlink followed), "
        "held open or not (repeatable)",
    )
    p.add_argument(
        "--kill-threshold-mib",
        type=nonneg_int,
        default=100,
        metavar="MIB",
        help="OOM pane: list SIGKILLs by other programs of processes holding more than MIB MiB (default 100)",
    )


def add_sample_bytes(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sample-bytes",
        type=nonneg_int,
        default=None,
        metavar="N",
        help="leaks: record a stack only for allocations sampled every ~N bytes (e.g. 524288); bytes "
        "become estimates (0: every allocation, exact; not given: memtop counts the target's "
        "allocation calls for 1 s first and proposes sampling when exact tracing would cost more "
        "than a tenth of a core; without a terminal the proposal is taken)",
    )


def budget_arg(text: str) -> float:
    """``--budget``: "1%" or "0.01", a share of one core in (0, 1]."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a budget: {text!r} (e.g. 1%)") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"a budget is over 0 and at most 100% of a core: {text!r}")
    return value


def add_budget(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--budget",
        type=budget_arg,
        default=None,
        metavar="PCT",
        help="leaks: keep tracing's CPU cost (the target's added CPU and memtop's) under PCT of one "
        "core (e.g. 1%%) by tracing in windows; a stack whose blocks live past a window and are "
        "never freed is reported as a leak with a confidence (docs/panes/leaks.md)",
    )
