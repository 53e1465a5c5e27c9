"""A process whose name is not UTF-8 (and carries an escape) can be drilled into and traced.

The kernel takes a process's comm from the file it executes, as bytes: a leaker run under such a
name has a comm, an exe link, a maps line and a status ``Name:`` that are not UTF-8. The drill-in
and ``--leaks`` read all of them; each used to fail with a UnicodeDecodeError (rc 1)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import Leaker, compile_c, memtop_cmd

from memtop.core.text import clean

NAME = b"lk\xff\xfe\x1b[31m"
SHOWN = clean(NAME)  # 'lk\ufffd\ufffd\\x1b[31m'


@pytest.fixture
def leaker() -> Iterator[Leaker]:
    d = Path(tempfile.mkdtemp(prefix=f"memtop-defects-{os.getpid()}-"))
    exe = Path(os.fsdecode(os.path.join(os.fsencode(d), NAME)))
    shutil.copy(compile_c("leaky"), exe)
    # leaks 4 KiB every 10 ms for 60 s once a probe is on malloc (tests/workloads/leaky.c)
    w = Leaker([exe, b"a", b"60", b"0"], "leaky")
    try:
        assert Path(f"/proc/{w.proc.pid}/comm").read_bytes().strip() == NAME
        yield w
    finally:
        w.kill()
        shutil.rmtree(d)


def snapshot(tmp: Path, *args: str) -> dict[str, object]:
    out = tmp / "s.json"
    proc = subprocess.run(
        [*memtop_cmd(), "snapshot", "--format", "json", "--output", str(out), "--force", *args],
        capture_output=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    raw = out.read_bytes()
    assert b"\x1b" not in raw and b"\xff" not in raw  # shown escaped, never raw
    doc: dict[str, object] = json.loads(raw)
    return doc


@pytest.mark.bpf
@pytest.mark.parametrize("section", ["history", "mappings", "fault_stacks"])
def test_drill_in_of_a_non_utf8_comm(leaker: Leaker, tmp_path: Path, section: str) -> None:
    pid = str(leaker.proc.pid)
    doc = snapshot(tmp_path, "--pane", "process", "--pid", pid, "--section", section, "--after", "1")
    assert doc["comm"] == SHOWN
    if section == "mappings":
        rows = doc["rows"]
        assert isinstance(rows, list)
        assert any(str(r.get("name", "")).endswith("/" + SHOWN) for r in rows), rows[:5]


@pytest.mark.bpf
def test_leaks_of_a_non_utf8_comm(leaker: Leaker, tmp_path: Path) -> None:
    pid = str(leaker.proc.pid)
    doc = snapshot(tmp_path, "--pane", "leaks", "--leaks", pid, "--sample-bytes", "0", "--after", "4")
    targets = doc["targets"]
    assert isinstance(targets, list) and targets[0]["comm"] == SHOWN
    assert targets[0]["state"] == "tracing" and targets[0]["allocator"] == "glibc", targets[0]
    rows = doc["rows"]
    assert isinstance(rows, list)
    here = [r for r in rows if r["frames"][0].startswith("leak_here+")]
    assert len(here) == 1, json.dumps(doc)
    # four seconds of a 400 KiB/s leak, the first of them maybe before the tracer
    assert here[0]["outstanding_bytes"] >= 4096 * 100 and here[0]["growth_bytes_per_s"] > 0
    assert f"[{SHOWN}]" in here[0]["frames"][0]
