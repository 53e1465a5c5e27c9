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


def each_open_file(
    proc_root: str, pid: str, max_fds: int, visit: Callable[[str, int, os.stat_result], None]
) -> int:
    """Hand ``visit`` every regular file process ``pid`` holds open (at most ``max_fds`` fds
    looked at) as ``(N, pfd, st)``: an ``O_PATH`` fd of the very inode the process holds, opened
    through the magic link ``N`` relative to the fd directory open (one lookup: a stat first and
    an open later would be two), and its fstat. ``O_PATH`` opens nothing (no device's open, no
    FIFO to block on); a caller that must read the file reopens ``pfd`` through /proc/self/fd
    (``reopen``). ``pfd`` is closed once ``visit`` returns. Returns the fds seen, the one past
    ``max_fds`` included."""
    fd_dir = os.path.join(proc_root, pid, "fd")
    seen = 0
    try:
        dfd = os.open(fd_dir, DIR_FLAGS)
    except OSError:  # gone, not ours to read, or not a directory
        return 0
    open_, fstat, close = os.open, os.fstat, os.close
    flags = os.O_PATH | os.O_CLOEXEC
    try:
        with os.scandir(dfd) as it:
            for entry in it:
                seen += 1
                if seen > max_fds:
                    break
                name = entry.name
                try:
                    pfd = open_(name, flags, dir_fd=dfd)
                except OSError:  # the fd was closed since the directory was read
                    continue
                try:
                    st = fstat(pfd)
                    if stat_mod.S_ISREG(st.st_mode):
                        visit(name, pfd, st)
                finally:
                    close(pfd)
    except OSError:  # the process exited during the walk: what was read stands
        pass
    finally:
        os.close(dfd)
    return seen


#: how a file is reopened for reading from an O_PATH fd of it
REOPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def reopen(pfd: int, self_fd_dir: int) -> int:
    """A read-only fd of the regular file ``pfd`` (an ``O_PATH`` fd whose fstat said regular)
    names, through its magic link in ``self_fd_dir`` (/proc/self/fd, open): the very inode, no
    name looked up again. ``O_NOATIME`` where allowed (the owner or CAP_FOWNER). OSError when it
    cannot be opened."""
    try:
        return os.open(str(pfd), REOPEN_FLAGS | os.O_NOATIME, dir_fd=self_fd_dir)
    except PermissionError:
        return os.open(str(pfd), REOPEN_FLAGS, dir_fd=self_fd_dir)
