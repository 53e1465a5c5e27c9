"""`memtop doctor`: what this machine can run, with hints (the checks are memtop.headless.doctor)."""

from __future__ import annotations

import argparse
import sys

from memtop.commands.args import Parser


def add_parser(sub: argparse._SubParsersAction[Parser]) -> None:
    d = sub.add_parser("doctor", help="check what this machine can run, with hints")
    d.add_argument("--json", action="store_true")


def run_doctor(args: argparse.Namespace) -> int:
    from memtop.headless.doctor import report

    text, code = report(args.json)
    sys.stdout.write(text)
    return code
