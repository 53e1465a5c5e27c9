"""A process's open files, from /proc/PID/fd, walked the one safe way every probe uses.

The fd directory is opened with ``O_NOFOLLOW`` (a symlink put where it should be is not walked)
and ``O_NONBLOCK``; each entry is a magic link whose ``stat`` gives the open file's own inode
without opening anything (a FIFO or a device is never opened, so nothing can block); at most
``max_fds`` entries are looked at; a process that exits before or during the walk, or an fd
closed under it, is skipped, never an error.
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Callable
from dataclasses import dataclass, field

#: how the fd directory is opened: never through a symlink, never blocking
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(slots=True)
class OpenFile:
    """A regular file a process holds open."""

    #: /proc/PID/fd/N: a magic link that stats and opens the very inode the process holds
    link: str
    st: os.stat_result
    #: where the link points (the kernel's name of the file), once read
    _target: str | None = field(default=None, repr=False)

    def target(self) -> str | None:
        """The kernel's name of the file (`` (deleted)`` and all), read on first use; None once
        the fd is closed. Read as the kernel gives it: the caller cleans it before showing it."""
        if self._target is None:
            try:
                self._target = os.readlink(self.link)
            except OSError:
                return None
        return self._target


@dataclass(slots=True)
class FdWalk:
    """What one walk of a process's fds found."""

    files: list[OpenFile]
    #: directory entries read, the one past ``max_fds`` included (so ``seen > max_fds``: there
    #: were more than the walk looked at)
    seen: int


def open_files(proc_root: str, pid: str, max_fds: int, named: Callable[[str], bool] | None = None) -> FdWalk:
    """The regular files process ``pid`` holds open (by /proc/PID/fd), at most ``max_fds`` fds
    looked at. ``named``: only the files whose link target it accepts, and the target is read
    before the stat (cheaper where most fds are not wanted); without it every regular file, its
    target read only when asked for (``OpenFile.target``)."""
    fd_dir = os.path.join(proc_root, pid, "fd")
    files: list[OpenFile] = []
    seen = 0
    try:
        dfd = os.open(fd_dir, DIR_FLAGS)
    except OSError:  # gone, not ours to read, or not a directory
        return FdWalk(files, 0)
    try:
        with os.scandir(dfd) as it:
            for entry in it:
                seen += 1
                if seen > max_fds:
                    break
                name = entry.name
                target = None
                try:
                    if named is not None:
                        target = os.readlink(name, dir_fd=dfd)
                        if not named(target):
                            continue
                    # stat of the magic link: the open file's inode (nothing opened)
                    st = os.stat(name, dir_fd=dfd)
                except OSError:  # the fd was closed since the directory was read
                    continue
                if stat_mod.S_ISREG(st.st_mode):
                    files.append(OpenFile(os.path.join(fd_dir, name), st, target))
    except OSError:  # the process exited during the walk: what was read stands
        pass
    finally:
        os.close(dfd)
    return FdWalk(files, seen)
