"""File systems made for a test: a zram-backed ext4, a small tmpfs, a full disk."""

from __future__ import annotations

import errno
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def zram_filesystem(size_mib: int = 128) -> Iterator[Path | None]:
    """An ext4 file system on a new zram device (a synchronous block device: a page read from it
    is there before the reader would sleep), mounted for the duration; None when this kernel has
    no zram-control (mkfs.ext4 is in tests/programs.txt: always here)."""
    control = Path("/sys/class/zram-control")
    if not (control / "hot_add").exists():
        yield None
        return
    num = int((control / "hot_add").read_text())
    dev = Path(f"/sys/block/zram{num}")
    mnt = Path(tempfile.mkdtemp(prefix="memtop-zram-"))
    mounted = False
    try:
        (dev / "disksize").write_text(f"{size_mib}M")
        subprocess.run(["mkfs.ext4", "-q", f"/dev/zram{num}"], check=True, capture_output=True)
        subprocess.run(["mount", f"/dev/zram{num}", str(mnt)], check=True)
        mounted = True
        yield mnt
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], check=False)
        mnt.rmdir()
        (dev / "reset").write_text("1")
        (control / "hot_remove").write_text(str(num))


@contextmanager
def small_tmpfs(size: str = "64k") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on a fresh directory for the duration (root: skips without):
    a real full disk for the write-failure tests."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    mnt = Path(tempfile.mkdtemp(prefix="memtop-small-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        mnt.rmdir()


def fill(directory: Path, leave_bytes: int = 0, name: str = "filler") -> None:
    """Fill the file system of ``directory`` up to ``leave_bytes`` free, with the file ``name``."""
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    with open(directory / name, "wb") as f:
        f.write(b"\0" * max(0, free - leave_bytes))


def fill_up(directory: Path, name: str = "filler") -> None:
    """Append to the file ``name`` until the file system of ``directory`` says ENOSPC: full
    whatever another process writes or frees meanwhile (``fill`` sizes its one write from a
    statvfs that a concurrent writer makes stale). Call it again to take what was freed since."""
    chunk = b"\0" * (1 << 16)
    fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            try:
                os.write(fd, chunk)  # a short write fills the last page; the next one fails
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    return
                raise
    finally:
        os.close(fd)
