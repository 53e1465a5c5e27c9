"""`memtop export --textfile`: the exposition written for node_exporter's textfile collector,
every interval, for weeks, as root.

The directory is opened once, at start, and checked then (a directory, not a symlink, owned by
root or us, writable by nobody else unless sticky); every write after that goes through that
descriptor (``openat``, ``renameat``), so a parent directory swapped for a symlink later is not
followed: the writes stay in the directory that was checked. The temporary file has a name that
says whose it is (``.NAME.<pid>.tmp``), so a later start removes those of runs that were killed
(their pid no longer alive) and leaves those of a run still going. A failed write is
:class:`~memtop.core.errors.WriteFailed` (exit 2), with the temporary file removed.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from pathlib import Path

from memtop.core.errors import UnsafePath, WriteFailed
from memtop.linux.files import MODE, temp_prefix

#: temporary files of the memtop that wrote with random names (mkstemp): removed at start once
#: older than this, as no write takes that long
LEGACY_TEMP_AGE_S = 600.0


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's: alive
        return True
    return True


def check_directory(st: os.stat_result, where: str) -> None:
    """A directory a textfile may be written in: UnsafePath when another user could replace or
    redirect what is written there."""
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{where} is not a directory", "give a path in an existing directory")
    if st.st_uid not in (0, os.geteuid()):
        raise UnsafePath(
            f"directory {where} belongs to uid {st.st_uid}, who could replace what memtop writes there",
            "use a directory owned by root",
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        raise UnsafePath(
            f"directory {where} is writable by other users, who could replace what memtop writes there",
            f"chmod go-w {where}, or use a directory only root can write",
        )


class Textfile:
    """A textfile target: the directory held open, the name within it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        name = self.path.name
        if name in ("", ".", ".."):
            raise UnsafePath(f"{path} names no file", "give a file name, e.g. memtop.prom")
        parent = str(self.path.parent) or "."
        try:
            # O_NOFOLLOW: the directory itself must not be a symlink (its parents may be, as set
            # up by the administrator; what matters is that the one checked is the one written)
            fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise UnsafePath(
                f"cannot open directory {parent}: {exc.strerror}",
                "give a path in an existing directory that is not a symbolic link",
            ) from exc
        try:
            check_directory(os.fstat(fd), parent)
        except BaseException:
            os.close(fd)
            raise
        self.dir_fd: int | None = fd
        self.name = name
        self._prefix = temp_prefix(name)  # ".NAME." cut to fit NAME_MAX with the pid
        self.temp = f"{self._prefix}{os.getpid()}.tmp"
        try:
            self._check_target()
            self.cleaned = self.clean_stale()
        except BaseException:
            self.close()
            raise

    def _fd(self) -> int:
        if self.dir_fd is None:
            raise WriteFailed(f"cannot write {self.path}: already closed")
        return self.dir_fd

    def _check_target(self) -> None:
        try:
            st = os.stat(self.name, dir_fd=self._fd(), follow_symlinks=False)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise UnsafePath(f"cannot inspect {self.path}: {exc.strerror}", "choose another path") from exc
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePath(
                f"{self.path} is a symbolic link; refusing to write through it", "choose another path"
            )
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{self.path} is not a regular file", "choose another path")

    def clean_stale(self) -> list[str]:
        """Remove the temporary files earlier runs left (killed mid-write): ours by a pid no
        longer alive, and the random-named ones of older memtops once old. Returns their names."""
        fd = self._fd()
        ours = re.compile(re.escape(self._prefix) + r"([0-9]+)\.tmp")
        legacy = re.compile(re.escape(self._prefix) + r"[A-Za-z0-9_]{8}\.tmp")
        removed: list[str] = []
        try:
            names = os.listdir(fd)
        except OSError:
            return removed
        now = time.time()
        for entry in names:
            m = ours.fullmatch(entry)
            if m is not None:
                pid = int(m.group(1))
                stale = pid == os.getpid() or not pid_alive(pid)
            elif legacy.fullmatch(entry):
                try:
                    st = os.stat(entry, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue
                stale = now - st.st_mtime > LEGACY_TEMP_AGE_S
            else:
                continue
            if stale:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry, dir_fd=fd)
                    removed.append(entry)
        return removed

    def write(self, data: bytes) -> None:
        """Replace the textfile with ``data`` atomically; WriteFailed (nothing left behind) when
        any step fails."""
        fd = self._fd()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.temp, dir_fd=fd)  # ours, from a write cut short
        try:
            out = os.open(
                self.temp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                MODE,
                dir_fd=fd,
            )
        except OSError as exc:
            raise WriteFailed(
                f"cannot write {self.path}: {exc.strerror or exc}; nothing was written"
            ) from exc
        try:
            try:
                os.fchmod(out, MODE)  # whatever the umask: node_exporter may run as another user
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view) :]
                os.fsync(out)
            finally:
                os.close(out)
            # rename within the held directory: a symlink at the name is replaced, never followed
            os.replace(self.temp, self.name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(self.temp, dir_fd=fd)
            if isinstance(exc, OSError):
                raise WriteFailed(
                    f"cannot write {self.path}: {exc.strerror or exc}; nothing was written"
                ) from exc
            raise

    def close(self) -> None:
        """Remove our temporary file if a write left it, and let the directory go."""
        if self.dir_fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.temp, dir_fd=self.dir_fd)
        os.close(self.dir_fd)
        self.dir_fd = None
