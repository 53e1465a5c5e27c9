"""The `memtop` command ends through lifecycle.end (no C++ static destructors after a thread was
inside libbcc): exit codes and output survive it, through a pipe too."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from support import DATA, memtop_cmd

from memtop import __version__


def memtop(*args: str) -> subprocess.CompletedProcess[str]:
    # buffered output, as a user's shell has it (a PYTHONUNBUFFERED here would hide a lost flush)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(memtop_cmd() + list(args), capture_output=True, text=True, timeout=120, env=env)


def test_version_help_and_usage_errors_keep_their_codes() -> None:
    done = memtop("--version")
    assert done.returncode == 0 and __version__ in done.stdout
    helped = memtop("--help")
    assert helped.returncode == 0
    from memtop.views import views

    for i, (name, cls) in enumerate(((n, c) for n, c in views().items() if n != "process"), 1):
        assert f"{i}  {name:<10} {cls.title}" in helped.stdout  # the panes, as the number keys pick them
    assert "Enter drill into a process" in helped.stdout and "q quit" in helped.stdout
    bad = memtop("--no-such-flag")
    assert bad.returncode == 2 and "memtop: error:" in bad.stderr


def test_output_through_a_pipe_is_flushed_before_the_end(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    done = memtop(
        "snapshot", "--replay", str(DATA / "pressure.jsonl.gz"), "--pane", "oom", "--output", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{out}\n" and out.stat().st_size > 0
    batch = memtop("--batch", "--replay", str(DATA / "pressure.jsonl.gz"), "--count", "2")
    heads = [line for line in batch.stdout.splitlines() if line.startswith("memtop ")]
    assert batch.returncode == 0 and len(heads) == 2, batch.stdout[:300]


def test_a_replay_is_stamped_with_its_recorded_time(tmp_path: Path) -> None:
    """Issue 22, item 9: `--batch --replay` stamped each output with the time of the reading;
    JSON had only a monotonic taken_at_ns. Both now carry the recording's wall-clock time, and
    text output has top -b's summary line."""
    import json

    env_tz = {"TZ": "UTC"}
    rec = DATA / "pressure.jsonl.gz"
    out = subprocess.run(
        memtop_cmd() + ["--batch", "--replay", str(rec), "--count", "1", "--pane", "oom"],
        capture_output=True, text=True, timeout=120, env={**os.environ, **env_tz},
    )  # fmt: skip
    head, summary = out.stdout.splitlines()[:2]
    assert " - 13:42:4" in head, head  # recorded 2026-11-21 13:42:42 UTC, one interval in
    assert summary.startswith("Mem ") and "Swap " in summary and "PSI some " in summary
    snap = tmp_path / "o.json"
    done = memtop("snapshot", "--replay", str(rec), "--pane", "oom", "--output", str(snap))
    assert done.returncode == 0, done.stderr
    doc = json.loads(snap.read_text())
    assert doc["taken_at"].startswith("2026-11-21T13:43:") and doc["taken_at"].endswith("Z")


def test_record_says_where_at_once_on_a_terminal(tmp_path: Path) -> None:
    """Issue 22, item 11: `memtop record` said nothing until it stopped. On a terminal it names
    the file at once and keeps a line of how much so far; a script still gets one line."""
    import pty

    out = tmp_path / "r.jsonl.gz"
    args = ["record", "--no-bpf", "-o", str(out), "--duration", "1.5", "--interval", "0.5"]
    master, slave = pty.openpty()
    proc = subprocess.Popen(memtop_cmd() + args, stdin=slave, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    said = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        said += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0
    text = said.decode()
    assert text.startswith(f"memtop: recording to {out} (Ctrl-C or SIGTERM stops)")
    assert "samples," in text and "so far" in text and "memtop: recorded" in text
    piped = memtop(*args[:3], str(tmp_path / "p.jsonl.gz"), *args[4:])
    assert piped.returncode == 0 and len(piped.stderr.splitlines()) == 1, piped.stderr
