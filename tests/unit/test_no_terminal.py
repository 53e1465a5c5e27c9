"""Without a terminal on stdin or stdout the TUI refuses to start: one line naming what to use
instead, exit 2 (it spun at 100 % CPU on read() == 0 and outlived signals, issue 19 item 5)."""

from __future__ import annotations

import subprocess
import tempfile
from typing import IO

import pytest
from support import ROOT, memtop_cmd

RECORDING = ROOT / "tests" / "data" / "pressure.jsonl.gz"


@pytest.mark.parametrize("command", [[], ["--pid", "1"], ["replay", str(RECORDING)]])
@pytest.mark.parametrize("missing", ["stdin", "stdout"])
def test_the_tui_needs_a_terminal(command: list[str], missing: str) -> None:
    with tempfile.TemporaryFile() as out:
        stdout: int | IO[bytes] = subprocess.DEVNULL if missing == "stdout" else out
        proc = subprocess.run(
            memtop_cmd() + command,
            stdin=subprocess.DEVNULL,  # never a terminal here; stdout is one only under a pty
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, lines
    assert "terminal" in lines[0]
    assert all(word in lines[0] for word in ("memtop --batch", "memtop snapshot", "memtop record")), lines[0]
