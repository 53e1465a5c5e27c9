"""Command line: `memtop` (the TUI), `memtop doctor`, `memtop snapshot`."""

from __future__ import annotations

import argparse
import atexit
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn, cast

from memtop import __version__, startup_gc
from memtop.errors import MemtopError

if TYPE_CHECKING:
    from pathlib import Path

    from memtop.snapshot import SnapshotRequest
    from memtop.source import Source
    from memtop.ui.app import MemtopApp
    from memtop.views import View

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


def pid_arg(text: str) -> int:
    return positive_int(text, "pid", "not a pid")


def pid_list(text: str) -> list[int]:
    return [pid_arg(part) for part in text.split(",") if part.strip()] or [pid_arg(text)]


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


if TYPE_CHECKING:
    _SubcommandsBase = argparse._SubParsersAction[Parser]
else:  # generic only to the type checker
    _SubcommandsBase = argparse._SubParsersAction


class Subcommands(_SubcommandsBase):
    """The subcommands, refusing an option given before one that the subcommand would not use.

    argparse parses ``memtop --limit line=8M replay FILE`` into the top level's ``--limit``, then
    lets the ``replay`` parser overwrite it with its own default, and ``memtop --leaks 5 doctor``
    keeps a ``--leaks`` doctor never reads: both were ignored without a word. An option before
    the subcommand now applies when the subcommand takes it and leaves it to the top level (its
    default is SUPPRESS, as ``replay --pane``); otherwise it is a usage error saying where it
    goes."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        given = {
            a.dest: (a, getattr(namespace, a.dest, a.default))
            for a in parser._actions  # the top level's own options, as parsed so far
            if a.option_strings and a.dest not in ("help", "version")
        }
        given = {d: (a, v) for d, (a, v) in given.items() if v != a.default}
        super().__call__(parser, namespace, values, option_string)
        assert isinstance(values, list) and values
        name = str(values[0])
        takes = {a.dest for a in self.choices[name]._actions if a.option_strings}
        for dest, (action, value) in given.items():
            opt = action.option_strings[-1]
            if dest not in takes:
                parser.error(f"{opt} does not go with `memtop {name}` (it is an option of `memtop` alone)")
            if getattr(namespace, dest, None) != value:  # the subcommand's own value replaced it
                parser.error(f"{opt} before `{name}` would be ignored: give it after, memtop {name} {opt} …")


def common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--interval",
        type=interval_arg,
        default=1.0,
        help=f"refresh interval, {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} seconds (default 1)",
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
        "--kill-threshold-mib",
        type=nonneg_int,
        default=100,
        metavar="MIB",
        help="OOM pane: list SIGKILLs by other programs of processes holding more than MIB MiB (default 100)",
    )


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="memtop", description="A live view of Linux memory behaviour, fed by BPF.")
    p.add_argument("--version", action="version", version=f"memtop {__version__}")
    common(p)
    p.add_argument("--pid", type=pid_arg, help="open the drill-in screen for PID at start")
    p.add_argument("--pane", help="pane to show at start")
    p.add_argument("--leaks", type=pid_list, help="trace allocations of (leaks pane) PID[,PID…] at start")
    add_sample_bytes(p)
    add_budget(p)
    p.add_argument("--snapshot-format", choices=SNAPSHOT_FORMATS[:3], default="svg", help="format for `s`")
    p.add_argument("--snapshot-dir", default=".", help="directory for `s` snapshots (default: .)")
    sub = p.add_subparsers(dest="command", parser_class=Parser, action=Subcommands)
    d = sub.add_parser("doctor", help="check what this machine can run, with hints")
    d.add_argument("--json", action="store_true")
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
    s.add_argument("--leaks", type=pid_list, help="pids for --pane leaks")
    add_sample_bytes(s)
    add_budget(s)
    add_record_replay_args(p, sub, s)
    add_export_args(sub)
    return p


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


def make_source(args: argparse.Namespace, defer_bpf: bool = False) -> Source:
    """The live source: the default probes. ``defer_bpf``: BPF compiles once the TUI's first frame
    is on screen (the app calls begin_bpf)."""
    from memtop.bridge import Bridge
    from memtop.probes.registry import default_probes

    probes = default_probes(args.proc_root, bpf=not args.no_bpf)
    for p in probes:
        if p.name == "kills":
            from memtop.probes.kills import KillsProbe

            if isinstance(p, KillsProbe):
                p.configure(getattr(args, "killer", []), getattr(args, "kill_threshold_mib", 100) << 20)
    bridge = Bridge(probes, defer_bpf=defer_bpf)
    bridge.leaks_sample_bytes = getattr(args, "sample_bytes", None)
    bridge.leaks_budget = getattr(args, "budget", None) or 0.0
    atexit.register(bridge.close)
    return bridge


def check_pid(pid: int | None, proc_root: str = "/proc") -> None:
    if pid is None:
        return
    from memtop.errors import PidNotFound

    if not os.path.exists(os.path.join(proc_root, str(pid), "stat")):
        raise PidNotFound(f"no process with pid {pid}", "pick a running pid (see `ps` or the processes pane)")
    try:
        with open(
            os.path.join(proc_root, str(pid), "status"), encoding="utf-8", errors="surrogateescape"
        ) as f:
            status = f.read()
        if "RssAnon" not in status:
            # a zombie has no memory either: it exited, its parent has not reaped it yet
            if "\nState:\tZ" in status:
                raise PidNotFound(f"pid {pid} has exited (a zombie, not yet reaped)", "pick a running pid")
            raise PidNotFound(f"pid {pid} is a kernel thread (it has no user memory)", "pick a user process")
    except OSError as exc:
        raise PidNotFound(f"pid {pid} vanished", "pick a running pid") from exc


def check_section(view: View, section: str) -> None:
    """``--section`` must name one of the pane's own sections (the view's list, not a copy)."""
    if not section:
        return
    if not view.sections:
        raise MemtopError(f"pane {view.name!r} has no sections", "--section goes with --pane process")
    if section not in view.sections:
        raise MemtopError(
            f"unknown section {section!r} for pane {view.name!r}", "sections: " + ", ".join(view.sections)
        )


def check_snapshot_args(args: argparse.Namespace) -> None:
    """The checks every headless snapshot makes before anything starts (pane, format, section,
    pid, file)."""
    from memtop import files
    from memtop.views import get_view

    view = get_view(args.pane)
    if args.format not in ("svg", "txt", "json", *view.extra_formats, *view.binary_formats):
        raise MemtopError(f"pane {args.pane!r} has no {args.format!r} format", "use svg, txt or json")
    check_section(view, args.section)
    if args.pane == "process" and args.pid is None:
        raise MemtopError("--pane process needs --pid PID")
    files.check_target(args.output, args.force)


def run_app(app: MemtopApp, headless: bool = False) -> int:
    """Run the app (a terminal session, or headless for a snapshot) and surface its error."""
    try:
        if headless:
            code = app.run(headless=True, size=(200, 60))
        else:  # fd 2 to the log, a terminal that can go away, an exit deadline (memtop.ui.term_compat)
            from memtop.ui import term_compat

            code = term_compat.run_in_terminal(app)
    finally:
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


def run_headless_snapshot(
    args: argparse.Namespace, source: Source, after_s: float, leak_pids: list[int] | None = None
) -> int:
    from memtop.snapshot import SnapshotRequest

    req = SnapshotRequest(args.pane, args.format, args.output, after_s, args.force, args.pid, args.section)
    if req.fmt == "svg":  # a picture of the screen: the app draws it
        written = run_svg_snapshot(args, source, req, leak_pids)
    else:  # from the view alone, without Textual
        import asyncio

        from memtop.headless import snapshot

        written = asyncio.run(snapshot(source, req, interval_s=args.interval, leak_pids=leak_pids or ()))
    if written is None:  # the app ended before writing (e.g. SIGINT before it listened)
        raise MemtopError(f"{args.output} was not written")
    print(args.output)  # only a complete file is reported
    return 0


def run_svg_snapshot(
    args: argparse.Namespace, source: Source, req: SnapshotRequest, leak_pids: list[int] | None
) -> Path | None:
    startup_gc.hold()  # until the first frame (importing Textual included)
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


def check_pane(pane: str | None) -> None:
    if pane:
        from memtop.views import get_view

        get_view(pane)


def check_at(at: float, duration_s: float) -> None:
    if at > duration_s + 1e-6:
        raise MemtopError(f"--at {at:g} is past the end of the recording ({duration_s:.1f} s)")


def run_tui_app(args: argparse.Namespace, source: Source, leak_pids: list[int] | None = None) -> int:
    """The terminal app on a live or replayed source, with the options both share."""
    from memtop import lifecycle

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


def run_snapshot(args: argparse.Namespace) -> int:
    check_snapshot_args(args)
    check_pid(args.pid, args.proc_root)
    for pid in args.leaks or []:
        check_pid(pid, args.proc_root)
    # rates need two readings an interval apart: a snapshot taken at once showed 0/s while the
    # kernel scanned 36k pages/s
    after_s = args.interval if args.after is None else args.after
    return run_headless_snapshot(args, make_source(args), after_s, args.leaks)


def import_asyncio_without_tls() -> None:
    """Import asyncio as on a Python built without TLS. asyncio imports ``ssl`` only to offer TLS
    transports, which memtop never opens, and loading it (OpenSSL's libraries) was a visible part
    of the CPU before the first frame (docs/performance.md). A None entry in ``sys.modules`` makes that
    import fail the way asyncio expects when ``ssl`` is missing; the entry goes at once, so
    anything importing ``ssl`` later gets the real module. A no-op when either is loaded."""
    if "asyncio" in sys.modules or "ssl" in sys.modules:
        return
    sys.modules["ssl"] = cast(ModuleType, None)
    try:
        import asyncio  # noqa: F401
    finally:
        if "ssl" in sys.modules and sys.modules["ssl"] is None:
            del sys.modules["ssl"]


def entry() -> NoReturn:
    """The `memtop` command: :func:`main`, then the process ends at once (lifecycle.end)."""
    from memtop import lifecycle

    try:
        code = main()
    except SystemExit as exc:  # argparse's --help, --version and usage errors
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    lifecycle.end(code)


def main(argv: Sequence[str] | None = None) -> int:
    # the collector is held from the first line, not from the app's start: the imports before the
    # app (views, state and records for the argument checks, asyncio for the bridge) ran dozens of
    # collections before the first frame; commands that draw no app release it at once, and any
    # command on its way out (a no-op once an app's first frame released it)
    startup_gc.hold()
    from memtop import lifecycle

    lifecycle.ensure_std_fds()  # `memtop 2>&-`: nothing may land on a closed fd 0-2, LLVM aborted
    import_asyncio_without_tls()
    try:
        return _main(argv)
    finally:
        startup_gc.release()


#: every path argument a command reads or writes after start
PATH_ARGS = ("output", "snapshot_dir", "replay", "file", "proc_root", "textfile", "openmetrics")


def absolute_paths(args: argparse.Namespace) -> None:
    """Make path arguments absolute once, at start. BCC compiles with the kernel header tree as the
    process's working directory (memtop.bcc_compat.compile_text), so a relative path opened by
    another thread while an on-demand probe compiles (a snapshot, a recording) would land there."""
    for name in PATH_ARGS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value:
            setattr(args, name, os.path.abspath(value))


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    absolute_paths(args)
    # the commands that draw no app get the collector back at once; the exporter above all, which
    # runs for weeks: held, every reference cycle a poll made (ctypes casts, exceptions) stayed,
    # and its RssAnon grew 45 MiB in 2 minutes of process churn (bench/soak_export.py)
    if args.command in ("record", "doctor", "export") or (
        args.command is None and getattr(args, "batch", False)
    ):
        startup_gc.release()
    try:
        handled = dispatch_record_replay(args)
        if handled is not None:
            return handled
        if args.command == "export":
            return run_export(args)
        if args.command == "doctor":
            from memtop.doctor import report

            text, code = report(args.json)
            sys.stdout.write(text)
            return code
        if args.command == "snapshot":
            return run_snapshot(args)
        return run_tui(args)
    except MemtopError as exc:
        sys.stderr.write(f"memtop: {exc.message}\n")
        if exc.hint:
            sys.stderr.write(f"  hint: {exc.hint}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("memtop: interrupted\n")
        return 130


# -- record, replay, batch (issue 7) -----------------------------------------------------------------
def speed_arg(text: str) -> float:
    value = positive_float(text)
    if value > 1000:
        raise argparse.ArgumentTypeError(f"speed must be at most 1000: {text!r}")
    return value


def count_arg(text: str) -> int:
    return positive_int(text, "count", "must be 1 or more")


def limit_arg(text: str) -> str:
    from memtop.replay import parse_limit

    try:
        parse_limit(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


LIMIT_HELP = (
    "raise a limit on what a recording may hold (repeatable): line=SIZE (default 4M), "
    "records=N per sample (100000), samples=N (1000000), size=SIZE decompressed (8G)"
)


def add_record_replay_args(
    p: argparse.ArgumentParser, sub: argparse._SubParsersAction[Parser], snap: argparse.ArgumentParser
) -> None:
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
    snap.add_argument("--replay", metavar="FILE", help="take the snapshot from a recording")
    snap.add_argument(
        "--at", type=nonneg_float, help="--replay: seconds from the recording's start (default: its end)"
    )
    snap.add_argument("--salvage", action="store_true", help="--replay: accept a recording cut short")
    snap.add_argument("--limit", type=limit_arg, action="append", metavar="NAME=VALUE", help=LIMIT_HELP)


# -- export (issue 24) ---------------------------------------------------------------------------
def add_export_args(sub: argparse._SubParsersAction[Parser]) -> None:
    e = sub.add_parser(
        "export",
        help="serve memtop's figures to Prometheus (/metrics), write them for node_exporter's "
        "textfile collector, or turn a recording into OpenMetrics; no TUI",
    )
    common(e)
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
    e.add_argument("--replay", metavar="FILE", help="read a recording instead (with --openmetrics)")
    e.add_argument(
        "--openmetrics", metavar="OUT", help="--replay: write timestamped OpenMetrics for promtool"
    )
    e.add_argument(
        "--step", type=positive_float, default=15.0, help="--replay: seconds between points (default 15)"
    )
    e.add_argument("--force", action="store_true", help="overwrite an existing --openmetrics file")


def nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
    return value


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
    opts = ExportOptions(
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


def dispatch_record_replay(args: argparse.Namespace) -> int | None:
    """Run record / replay / batch / snapshot --replay; None for every other command."""
    if args.command == "record":
        return run_record(args)
    if args.command == "replay":
        return run_replay(args)
    if args.command == "snapshot" and getattr(args, "replay", None):
        return run_replay_snapshot(args)
    if args.command is None and getattr(args, "batch", False):
        return run_batch(args)
    if args.command is None and (args.json or args.count or args.replay or args.limit):
        raise MemtopError(
            "--json, --count, --replay and --limit go with --batch", "e.g. memtop --batch --count 3 --json"
        )
    return None


def run_record(args: argparse.Namespace) -> int:
    import asyncio

    from memtop import fmt
    from memtop.headless import record

    for pid in args.leaks or []:
        check_pid(pid, args.proc_root)
    from memtop.recording import Recorder

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


def run_replay(args: argparse.Namespace) -> int:
    from memtop.replay import Recording, ReplaySource, limits_from

    rec = Recording.load(args.file, salvage=args.salvage, limits=limits_from(args.limit))
    if args.info:
        print(rec.describe())
        return 0
    check_pane(args.pane)
    if args.at is not None:
        check_at(args.at, rec.duration_s)
    return run_tui_app(args, ReplaySource(rec, speed=args.speed, at_s=args.at))


def run_replay_snapshot(args: argparse.Namespace) -> int:
    from memtop.replay import Recording, ReplaySource, limits_from

    check_snapshot_args(args)
    rec = Recording.load(args.replay, salvage=args.salvage, limits=limits_from(args.limit))
    at = rec.duration_s if args.at is None else args.at
    check_at(at, rec.duration_s)
    return run_headless_snapshot(args, ReplaySource(rec, at_s=at), 0.0)


def run_batch(args: argparse.Namespace) -> int:
    import asyncio

    from memtop.headless import batch_live, batch_replay
    from memtop.views import Options, get_view

    view = get_view(args.pane or "processes")
    if view.name == "process" and args.pid is None:
        raise MemtopError("--pane process needs --pid PID")
    opts = Options(pid=args.pid)
    try:
        if args.replay:
            from memtop.replay import limits_from

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


if __name__ == "__main__":
    raise SystemExit(main())
