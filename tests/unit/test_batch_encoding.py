"""`memtop --batch` on a stdout that cannot encode a process's name (LANG=C, an ASCII or latin-1
terminal): the run goes on, text output escapes what the encoding lacks, JSON stays valid and
lossless."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from support import memtop_cmd

NAME = "mém-naïve✓"  # 14 bytes in UTF-8: comm keeps 15
CHILD = "import sys, time; open('/proc/self/comm', 'w').write(sys.argv[1]); print('ready', flush=True); time.sleep(120)"


@pytest.fixture
def named() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, NAME], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        with open(f"/proc/{proc.pid}/comm", encoding="utf-8") as f:
            assert f.read().strip() == NAME
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def batch(encoding: str, *extra: str) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, LANG="C", LC_ALL="C", PYTHONIOENCODING=encoding)
    return subprocess.run(
        memtop_cmd() + ["--batch", "--count", "1", "--no-bpf", "--interval", "0.2", *extra],
        capture_output=True,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_text_batch_escapes_what_the_encoding_lacks(named: int, encoding: str) -> None:
    proc = batch(encoding)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"Traceback" not in proc.stderr
    line = next(x for x in proc.stdout.decode(encoding).splitlines() if x.split()[:1] == [str(named)])
    expected = NAME.encode(encoding, "backslashreplace").decode(encoding)
    assert expected in line  # ascii: m\xe9m-na\xefve\u2713; latin-1: mém-naïve\u2713


def test_json_batch_stays_valid_and_lossless(named: int) -> None:
    proc = batch("ascii", "--json")
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    proc.stdout.decode("ascii")  # every byte ASCII
    doc = json.loads(proc.stdout.splitlines()[0])
    assert [r["comm"] for r in doc["rows"] if r["pid"] == named] == [NAME]
