"""An option given before a subcommand applies or is a usage error with a hint, never ignored.

argparse let the subcommand's own default overwrite it (``memtop --limit line=8M replay FILE``
replayed under the default limit), and kept options no subcommand reads (``memtop --leaks 5
doctor``): both silently. Every top-level option is tried before every subcommand."""

from __future__ import annotations

import argparse

import pytest

from memtop.cli import build_parser

#: a value for each top-level option that is not its default (None: a flag)
SAMPLES: dict[str, str | None] = {
    "--interval": "2",
    "--no-bpf": None,
    "--proc-root": "/tmp/proc-elsewhere",
    "--pid": "4242",
    "--pane": "leaks",
    "--leaks": "4242",
    "--sample-bytes": "4096",
    "--budget": "1%",
    "--snapshot-format": "json",
    "--snapshot-dir": "/tmp/snaps-elsewhere",
    "--batch": None,
    "--count": "3",
    "--json": None,
    "--replay": "/tmp/rec.jsonl.gz",
    "--limit": "line=8M",
    "--killer": "nohang2",
    "--kill-threshold-mib": "300",
    "--cache-path": "/tmp/cache-elsewhere",
}
#: each subcommand with the arguments it requires
COMMANDS = {
    "doctor": [],
    "snapshot": ["--pane", "processes", "--output", "/tmp/out.json"],
    "record": ["--output", "/tmp/rec.jsonl.gz"],
    "replay": ["/tmp/rec.jsonl.gz"],
    "export": [],
}


def top_level_options() -> dict[str, argparse.Action]:
    parser = build_parser()
    return {
        a.option_strings[-1]: a
        for a in parser._actions
        if a.option_strings and a.dest not in ("help", "version")
    }


def subcommand_dests(command: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest for a in sub.choices[command]._actions if a.option_strings}


def test_every_option_and_subcommand_is_covered() -> None:
    assert set(top_level_options()) == set(SAMPLES)
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("option", sorted(SAMPLES))
def test_an_option_before_a_subcommand_applies_or_is_refused(
    command: str, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    action = top_level_options()[option]
    given = [option] if SAMPLES[option] is None else [option, str(SAMPLES[option])]
    alone = build_parser().parse_args(given)  # what the option means to the top level
    try:
        args = build_parser().parse_args([*given, command, *COMMANDS[command]])
    except SystemExit as exc:
        assert exc.code == 2
        err = capsys.readouterr().err
        assert option in err and f"memtop {command}" in err, err  # says which, and where
        return
    # accepted: the subcommand reads it, with the value given before it
    assert action.dest in subcommand_dests(command), f"{option} kept for `{command}`, which never reads it"
    assert getattr(args, action.dest) == getattr(alone, action.dest)


def test_after_the_subcommand_still_works() -> None:
    args = build_parser().parse_args(["replay", "--limit", "line=8M", "/tmp/r.jsonl.gz"])
    assert args.limit == ["line=8M"]
    args = build_parser().parse_args(["--pane", "leaks", "--interval", "2", "replay", "/tmp/r.jsonl.gz"])
    assert (args.pane, args.interval) == ("leaks", 2.0)  # replay leaves these to the top level
