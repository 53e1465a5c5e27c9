"""Arguments memtop refuses before it starts anything: an interval outside 0.1-3600 s (every
command that takes one) and a --section the pane does not have."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtop.cli import build_parser, main
from memtop.commands.args import MAX_INTERVAL_S, MIN_INTERVAL_S
from memtop.views.process import ProcessView

REC = Path(__file__).resolve().parent.parent / "data" / "recording-1.0.jsonl.gz"


def commands(interval: str, tmp: Path) -> list[list[str]]:
    return [
        ["--batch", "--count", "1", "--no-bpf", "--interval", interval],
        ["snapshot", "--pane", "processes", "--output", str(tmp / "s.json"), "--interval", interval],
        [
            "record",
            "--no-bpf",
            "--output",
            str(tmp / "r.jsonl.gz"),
            "--duration",
            "3",
            "--interval",
            interval,
        ],
        ["replay", str(REC), "--interval", interval],
        ["--batch", "--replay", str(REC), "--interval", interval],
        ["--interval", interval],  # the TUI (last: were it taken, it would start)
    ]


@pytest.mark.parametrize("interval", ["1e-6", "0.0999", "3600.5", "1e9", "0", "-1", "nan", "inf"])
def test_interval_out_of_range_is_refused_everywhere(
    interval: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in commands(interval, tmp_path):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2, argv
        err = capsys.readouterr().err
        assert err.splitlines()[-1].startswith("memtop: error: argument --interval:"), (argv, err)
    assert not list(tmp_path.iterdir())  # nothing written, nothing started


@pytest.mark.parametrize("interval", [str(MIN_INTERVAL_S), "1", str(MAX_INTERVAL_S)])
def test_interval_bounds_are_accepted(interval: str, tmp_path: Path) -> None:
    for argv in commands(interval, tmp_path):
        assert build_parser().parse_args(argv).interval == float(interval)


def test_unknown_section_is_refused_with_the_real_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.json"
    base = ["snapshot", "--pane", "process", "--pid", "1", "--no-bpf", "--output", str(out)]
    assert main(base + ["--section", "bogus"]) == 2
    err = capsys.readouterr().err
    assert "unknown section 'bogus'" in err
    assert "sections: " + ", ".join(ProcessView.sections) in err  # the view's own list
    assert main(["snapshot", "--pane", "vmscan", "--section", "mappings", "--output", str(out)]) == 2
    assert "has no sections" in capsys.readouterr().err
    assert main(base + ["--replay", str(REC), "--section", "nope"]) == 2
    assert "unknown section 'nope'" in capsys.readouterr().err
    assert not out.exists()
