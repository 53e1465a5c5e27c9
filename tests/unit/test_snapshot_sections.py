"""`memtop snapshot --pane process --section S` on a recording: every section writes its document
and says nothing on stderr. Exiting while the drill-in screen's tabs were still mounting made
Textual print a traceback after a good snapshot (fault_stacks, mappings)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import memtop_cmd

from memtop.views.process import SECTIONS

PRESSURE = Path(__file__).resolve().parent.parent / "data" / "pressure.jsonl.gz"
PID = 3620  # the pressure workload in that recording


@pytest.mark.parametrize("section", SECTIONS)
def test_snapshot_of_each_drill_in_section_is_quiet(tmp_path: Path, section: str) -> None:
    out = tmp_path / f"{section}.json"
    proc = subprocess.run(
        memtop_cmd()
        + ["snapshot", "--replay", str(PRESSURE), "--pane", "process", "--pid", str(PID)]
        + ["--section", section, "--format", "json", "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    doc = json.loads(out.read_text())
    assert doc["pid"] == PID and doc["section"] == section
