"""Safe files: never through a symlink, never over an existing file without --force, not into a
directory or a missing one; atomic (temp + rename), mode 0644 whatever the umask."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support import memtop_cmd

from memtop.core.errors import UnsafePath
from memtop.linux import files


def test_refuses_symlink_even_with_force(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "out.json"
    link.symlink_to(victim)
    for force in (False, True):
        with pytest.raises(UnsafePath, match="symbolic link"):
            files.write_atomic(link, "x", force=force)
    assert victim.read_text() == "keep" and link.is_symlink()


def test_refuses_overwrite_without_force(tmp_path: Path) -> None:
    p = tmp_path / "a.txt"
    p.write_text("old")
    with pytest.raises(UnsafePath, match="already exists"):
        files.write_atomic(p, "new")
    assert p.read_text() == "old"
    files.write_atomic(p, "new", force=True)
    assert p.read_text() == "new"


def test_refuses_directory_and_missing_parent(tmp_path: Path) -> None:
    with pytest.raises(UnsafePath, match="directory"):
        files.write_atomic(tmp_path, "x", force=True)
    with pytest.raises(UnsafePath, match="does not exist"):
        files.write_atomic(tmp_path / "nope" / "x.json", "x")


def test_mode_0644_under_permissive_umask_and_no_temp_left(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        p = files.write_atomic(tmp_path / "m.json", "{}")
    finally:
        os.umask(old)
    assert p.stat().st_mode & 0o777 == 0o644
    assert [x.name for x in tmp_path.iterdir()] == ["m.json"]


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    with pytest.raises(RuntimeError):
        with files.AtomicWriter(target) as w:
            w.file.write(b"partial")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_symlink_planted_during_write_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "race.txt"
    victim = tmp_path / "victim"
    victim.write_text("keep")
    w = files.AtomicWriter(target)
    w.file.write(b"data")
    target.symlink_to(victim)
    with pytest.raises(UnsafePath):
        w.commit()
    assert victim.read_text() == "keep"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["race.txt", "victim"]


def test_cli_snapshot_refuses_symlink_with_clear_message(tmp_path: Path) -> None:
    link = tmp_path / "s.json"
    link.symlink_to(tmp_path / "elsewhere")
    proc = subprocess.run(
        memtop_cmd() + ["snapshot", "--no-bpf", "--pane", "processes", "--output", str(link)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "symbolic link" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "elsewhere").exists()
