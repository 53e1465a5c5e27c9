"""As an unprivileged user memtop starts in the /proc view with its banner; doctor explains."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support import memtop_cmd

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "HOME=/tmp"]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to drop to an unprivileged user"
)


def test_unprivileged_snapshot_runs_proc_view_with_banner() -> None:
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(prefix="memtop-nonroot-"))  # pytest's tmp dirs are 0700
    try:
        tmp_path.chmod(0o777)
        snapshots_as_nobody(tmp_path)
    finally:  # not pytest's: nothing else removes it (77 were left in /tmp)
        shutil.rmtree(tmp_path, ignore_errors=True)


def snapshots_as_nobody(tmp_path: Path) -> None:
    for fmt in ("json", "svg"):
        out = tmp_path / f"s.{fmt}"
        proc = subprocess.run(
            NOBODY
            + memtop_cmd()
            + ["snapshot", "--pane", "processes", "--format", fmt, "--output", str(out), "--after", "0.5"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        text = out.read_text()
        if fmt == "json":
            doc = json.loads(text)
            assert doc["source"] == "procfs"
            assert any(r["pid"] == 1 for r in doc["rows"])
        else:
            screen = text.replace("&#160;", " ")
            assert "BPF unavailable" in screen and "not running as root" in screen
            assert "sudo memtop" in screen


def test_unprivileged_doctor_explains() -> None:
    proc = subprocess.run(
        NOBODY + memtop_cmd() + ["doctor", "--json"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert not checks["privileges"]["ok"] and "root" in checks["privileges"]["hint"]
    assert not checks["tracefs"]["ok"] and checks["tracefs"]["hint"]
