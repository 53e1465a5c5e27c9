"""memtop/linux/procfd.py, the one walk of /proc/PID/fd (the pagecacheinfo and sharedinfo probes
use it): this process's own fds against what it opened, the bound, a vanished pid, a symlink
where the fd directory should be."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from memtop.linux.procfd import open_files


def test_the_regular_files_a_process_holds_by_their_inode(tmp_path: Path) -> None:
    path = tmp_path / "held"
    path.write_bytes(b"x" * 5000)
    r, w = os.pipe()  # not a regular file: left out
    memfd = os.memfd_create("procfd-test")
    try:
        with path.open("rb") as held:
            walk = open_files("/proc", str(os.getpid()), 1 << 20)
            st = os.fstat(held.fileno())
            mine = [f for f in walk.files if (f.st.st_dev, f.st.st_ino) == (st.st_dev, st.st_ino)]
            assert len(mine) == 1 and mine[0].st.st_size == 5000
            assert mine[0].target() == str(path)
            assert mine[0].link == f"/proc/{os.getpid()}/fd/{held.fileno()}"
            assert not any(f.link.endswith(f"/fd/{r}") or f.link.endswith(f"/fd/{w}") for f in walk.files)
            assert walk.seen >= 6  # stdio, the file, the pipe and the memfd at least
            # named: only the memfd, its target read first
            memfds = open_files("/proc", str(os.getpid()), 1 << 20, named=lambda t: t.startswith("/memfd:"))
            assert [f.link for f in memfds.files] == [f"/proc/{os.getpid()}/fd/{memfd}"]
            assert memfds.files[0].target() == "/memfd:procfd-test (deleted)"
    finally:
        for fd in (r, w, memfd):
            os.close(fd)


def test_the_walk_is_bounded() -> None:
    files = [tempfile.TemporaryFile() for _ in range(8)]
    try:
        walk = open_files("/proc", str(os.getpid()), 3)
        assert walk.seen == 4  # one past the bound: there were more
        assert len(walk.files) <= 3
    finally:
        for f in files:
            f.close()


def test_a_vanished_or_odd_process_is_nothing(tmp_path: Path) -> None:
    assert open_files("/proc", "999999999", 10).files == []
    # a symlink where the fd directory should be is not followed
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "fd").symlink_to(f"/proc/{os.getpid()}/fd")
    walk = open_files(str(tmp_path), "1", 10)
    assert walk.files == [] and walk.seen == 0
