"""Path arguments are made absolute at start: BCC compiles with the kernel header tree as the
process's working directory, so a relative path opened while an on-demand probe compiles would
land there instead of where the user started memtop."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memtop.cli import PATH_ARGS, absolute_paths, build_parser


@pytest.mark.parametrize(
    "argv",
    [
        ["snapshot", "--pane", "processes", "--output", "out.json", "--replay", "rec.jsonl.gz"],
        ["record", "--output", "rec.jsonl.gz"],
        ["replay", "rec.jsonl.gz"],
        ["--snapshot-dir", "snaps", "--proc-root", "fakeproc"],
    ],
)
def test_path_arguments_are_absolute_after_start(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(argv)
    absolute_paths(args)
    os.chdir("/")  # what a compile does to the process meanwhile
    given = [getattr(args, name) for name in PATH_ARGS if isinstance(getattr(args, name, None), str)]
    assert given
    for value in given:
        assert os.path.isabs(value) and (value == "/proc" or value.startswith(str(tmp_path))), value
