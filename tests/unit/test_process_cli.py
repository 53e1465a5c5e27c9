"""The drill-in from the command line, without BPF: a pid that never existed is an error (exit 2)
and writes nothing."""

from __future__ import annotations

from pathlib import Path


def test_snapshot_pid_that_never_existed(tmp_path: Path) -> None:
    from memtop.cli import main

    code = main(
        [
            "snapshot",
            "--pane",
            "process",
            "--pid",
            "4194303",
            "--section",
            "growth",
            "--output",
            str(tmp_path / "x.json"),
            "--no-bpf",
        ]
    )
    assert code == 2
    assert not (tmp_path / "x.json").exists()
