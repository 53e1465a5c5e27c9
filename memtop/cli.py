"""Command line: the top-level parser and the dispatch to one module per subcommand
(memtop.commands: `memtop` the TUI, `snapshot`, `record`, `replay`, `--batch`, `export`,
`doctor`), and the way in and out of the process around them."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn, cast

from memtop import __version__
from memtop.commands import batch, doctor, export, record, replay, snapshot, tui
from memtop.commands.args import (
    SNAPSHOT_FORMATS,
    Parser,
    add_budget,
    add_sample_bytes,
    common,
    pid_arg,
    pid_list,
)
from memtop.core.errors import MemtopError
from memtop.runtime import priority, startup_gc

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
    # the order of `memtop --help` and of each usage line: do not reorder
    doctor.add_parser(sub)
    snap = snapshot.add_parser(sub)
    batch.add_args(p)
    record.add_parser(sub)
    replay.add_parser(sub)
    snapshot.add_replay_args(snap)
    export.add_parser(sub)
    return p


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
    from memtop.runtime import lifecycle

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
    # the start at a raised priority until the TUI's first frame (memtop.runtime.priority); the
    # commands that draw no app put it back as soon as they know they are one
    priority.boost()
    from memtop.runtime import lifecycle

    lifecycle.ensure_std_fds()  # `memtop 2>&-`: nothing may land on a closed fd 0-2, LLVM aborted
    import_asyncio_without_tls()
    try:
        return _main(argv)
    finally:
        priority.restore()
        startup_gc.release()


#: every path argument a command reads or writes after start
PATH_ARGS = ("output", "snapshot_dir", "replay", "file", "proc_root", "textfile", "openmetrics")


def absolute_paths(args: argparse.Namespace) -> None:
    """Make path arguments absolute once, at start. BCC compiles with the kernel header tree as the
    process's working directory (memtop.linux.bcc_compat.compile_text), so a relative path opened by
    another thread while an on-demand probe compiles (a snapshot, a recording) would land there."""
    for name in PATH_ARGS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value:
            setattr(args, name, os.path.abspath(value))


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    absolute_paths(args)
    if not tui_command(args):  # only the terminal app's first frame is raced (a no-op when done)
        priority.restore()
    # the commands that draw no app get the collector back at once; the exporter above all, which
    # runs for weeks: held, every reference cycle a poll made (ctypes casts, exceptions) stayed,
    # and its RssAnon grew 45 MiB in 2 minutes of process churn (bench/soak_export.py)
    if args.command in ("record", "doctor", "export") or (
        args.command is None and getattr(args, "batch", False)
    ):
        startup_gc.release()
    try:
        return dispatch(args)
    except MemtopError as exc:
        sys.stderr.write(f"memtop: {exc.message}\n")
        if exc.hint:
            sys.stderr.write(f"  hint: {exc.hint}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("memtop: interrupted\n")
        return 130


def tui_command(args: argparse.Namespace) -> bool:
    """Whether ``args`` run the terminal app (`memtop`, `memtop replay FILE`)."""
    if args.command is None:  # `--batch` and the options that go with it print, no app
        return not any(getattr(args, k, None) for k in ("batch", "json", "count", "replay", "limit"))
    return bool(args.command == "replay")


def dispatch(args: argparse.Namespace) -> int:
    """The command's module runs it (looked up on the module at call time, so a test can replace
    one command)."""
    if args.command == "record":
        return record.run_record(args)
    if args.command == "replay":
        return replay.run_replay(args)
    if args.command == "snapshot" and getattr(args, "replay", None):
        return snapshot.run_replay_snapshot(args)
    if args.command is None and getattr(args, "batch", False):
        return batch.run_batch(args)
    if args.command is None and (args.json or args.count or args.replay or args.limit):
        raise MemtopError(
            "--json, --count, --replay and --limit go with --batch", "e.g. memtop --batch --count 3 --json"
        )
    if args.command == "export":
        return export.run_export(args)
    if args.command == "doctor":
        return doctor.run_doctor(args)
    if args.command == "snapshot":
        return snapshot.run_snapshot(args)
    return tui.run_tui(args)


if __name__ == "__main__":
    raise SystemExit(main())
