"""Writing files safely: one place for every snapshot, recording and export.

Never follow a symlink at the target, never overwrite without ``force``, refuse directories and
unwritable places with a clear message, write atomically (temp file in the same directory, fsync,
rename) with mode 0644.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from memtop.errors import UnsafePath

MODE = 0o644


def check_target(path: str | Path, force: bool = False) -> Path:
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UnsafePath(f"cannot inspect {p}: {exc.strerror}", "choose another path") from exc
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePath(f"{p} is a symbolic link; refusing to write through it", "choose another path")
        if stat.S_ISDIR(st.st_mode):
            raise UnsafePath(f"{p} is a directory", "give a file name, not a directory")
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{p} is not a regular file", "choose another path")
        if not force:
            raise UnsafePath(f"{p} already exists", "use --force to overwrite it, or choose another name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UnsafePath(f"directory {parent} does not exist", "create it first or choose another path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UnsafePath(f"directory {parent} is not writable", "choose a writable directory")
    return p


class AtomicWriter:
    """A binary file that appears at ``path`` only when closed without error."""

    def __init__(self, path: str | Path, force: bool = False) -> None:
        self.path = check_target(path, force)
        self.force = force
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent or ".")
        os.fchmod(fd, MODE)
        self.tmp = Path(tmp)
        self.file: BinaryIO = os.fdopen(fd, "wb")
        self.done = False

    def commit(self) -> Path:
        if self.done:
            return self.path
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        # re-check right before the rename: a symlink planted meanwhile is still refused
        try:
            check_target(self.path, self.force)
            os.replace(self.tmp, self.path)
        except BaseException:
            self.tmp.unlink(missing_ok=True)
            raise
        self.done = True
        return self.path

    def abort(self) -> None:
        if not self.done:
            try:
                self.file.close()
            finally:
                self.tmp.unlink(missing_ok=True)
                self.done = True

    def __enter__(self) -> AtomicWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def write_atomic(path: str | Path, data: bytes | str, force: bool = False) -> Path:
    with AtomicWriter(path, force) as w:
        w.file.write(data.encode() if isinstance(data, str) else data)
    return w.path
