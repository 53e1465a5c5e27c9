"""Writing files safely: one place for every snapshot, recording and export.

Never follow a symlink at the target, never overwrite without ``force``, refuse directories and
unwritable places with a clear message, write atomically (temp file in the same directory, fsync,
rename) with mode 0644. A write that fails anywhere (the data, the flush, fsync, close, the
rename) is a :class:`~memtop.core.errors.WriteFailed` and leaves neither the target nor the temporary
file behind.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from memtop.core.errors import UnsafePath, WriteFailed

MODE = 0o644
#: NAME_MAX on Linux file systems (bytes, not characters)
NAME_MAX = 255
#: what the temporary name adds to (a cut of) the target's name: "." + "." + 8 random + ".tmp"
_TEMP_EXTRA = 1 + 1 + 8 + 4


def check_target(path: str | Path, force: bool = False) -> Path:
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:  # one line: the message says it all
            raise UnsafePath(f"cannot write {p}: file name too long (at most {NAME_MAX} bytes)") from exc
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


def temp_prefix(name: str) -> str:
    """``.NAME.`` with NAME cut (at a character boundary) so that the temporary file's name,
    ``.NAME.XXXXXXXX.tmp``, fits NAME_MAX whatever the length of the target's name: a target
    name of 245-255 bytes once made the temporary name too long and the write fail."""
    raw = os.fsencode(name)
    room = NAME_MAX - _TEMP_EXTRA
    if len(raw) > room:
        cut = room
        while cut > 0 and (raw[cut] & 0xC0) == 0x80:  # never split a UTF-8 sequence
            cut -= 1
        raw = raw[:cut]
    return f".{os.fsdecode(raw)}."


def failure(path: Path, exc: OSError, what: str = "cannot write") -> WriteFailed:
    return WriteFailed(f"{what} {path}: {exc.strerror or exc}; nothing was written")


class AtomicWriter:
    """A binary file that appears at ``path`` only when committed without error.

    Without ``force`` the final name is made with ``link()``, which never replaces a file that
    appeared meanwhile; with ``force``, ``rename()`` (which replaces a symlink, never follows it).
    Any failure or interruption removes the temporary file."""

    def __init__(self, path: str | Path, force: bool = False) -> None:
        self.path = check_target(path, force)
        self.force = force
        parent = self.path.parent
        try:
            fd, tmp = tempfile.mkstemp(prefix=temp_prefix(self.path.name), suffix=".tmp", dir=parent)
        except OSError as exc:
            raise failure(self.path, exc) from exc
        self.tmp = Path(tmp)
        try:
            os.fchmod(fd, MODE)
            self.file: BinaryIO = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            self.tmp.unlink(missing_ok=True)
            raise
        self.done = False

    def write(self, data: bytes) -> None:
        """Write ``data``; on failure the temporary file is gone and WriteFailed raised."""
        try:
            self.file.write(data)
        except OSError as exc:
            self.abort()
            raise failure(self.path, exc) from exc

    def commit(self) -> Path:
        if self.done:
            return self.path
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            # re-check right before the rename: a symlink planted meanwhile is still refused
            check_target(self.path, self.force)
            publish(self.tmp, self.path, self.force)
        except BaseException as exc:  # disk full at flush/fsync/close, Ctrl-C, a planted symlink
            self.abort()
            if isinstance(exc, OSError):
                raise failure(self.path, exc) from exc
            raise
        self.done = True
        return self.path

    def abort(self) -> None:
        """Drop the file: nothing appears at the target and the temporary file is removed."""
        if not self.done:
            self.done = True
            try:
                self.file.close()  # may fail flushing a full disk: the file goes anyway
            except OSError:
                pass
            finally:
                self.tmp.unlink(missing_ok=True)

    def __enter__(self) -> AtomicWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
            return
        self.abort()
        if isinstance(exc, OSError):
            raise failure(self.path, exc) from exc


def publish(tmp: Path, path: Path, force: bool) -> None:
    """Give the finished ``tmp`` its final name (see :class:`AtomicWriter`)."""
    if not force:
        try:
            os.link(tmp, path)  # fails if anything appeared at the target
        except OSError as exc:
            # file systems without hard links (vfat, some FUSE): a rename after the re-check
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
        else:
            os.unlink(tmp)
            return
    os.replace(tmp, path)


def write_atomic(path: str | Path, data: bytes | str, force: bool = False) -> Path:
    w = AtomicWriter(path, force)
    try:
        # "replace": a lone surrogate (from a decoded \\udXXX escape) must not fail a whole snapshot
        w.write(data.encode("utf-8", "replace") if isinstance(data, str) else data)
    except BaseException:
        w.abort()
        raise
    return w.commit()
