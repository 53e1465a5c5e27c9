"""Find kernel headers for BCC, or build a stand-in tree.

BCC compiles our C against kernel headers. Exact headers for ``uname -r`` are best. Without them
the newest installed ``linux-headers-*`` serves as a stand-in: Debian and Ubuntu split headers into
an arch directory (``-amd64``/``-generic``) and a shared one (``-common`` / unsuffixed); BCC needs
one tree, so we build a merged tree of symlinks in a cache directory and point
``BCC_KERNEL_SOURCE`` at it.

A stand-in is safe only because memtop's programs read tracepoint fields (BCC takes their real
layout from tracefs) and BPF helpers, never kernel structs. Keep it that way.

What memtop trusts (it runs as root, and whatever these trees hold is compiled into the kernel):

- **Sources.** A header directory is used only if every directory from ``/`` down to it belongs
  to root (or to us) and nobody else may write it (a sticky directory such as ``/tmp`` above it
  aside). When a stand-in tree is built, every directory and file of its sources, and the target
  of every symlink in them, is checked the same way; a version that fails is not used.
- **The cache** (``/var/cache/memtop``, ``$MEMTOP_CACHE_DIR``, or ``~/.cache/memtop`` without
  root) is reached from ``/`` one directory fd at a time with ``O_NOFOLLOW``: no component is
  followed through a symlink. Its ancestors are checked like the sources'; the cache directory and
  everything in it must be ours and writable by nobody else. memtop creates directories 0755 and
  files 0644 whatever the umask (a cache directory of ours with looser bits is taken back with
  ``fchmod``). A cache that cannot be trusted (another user's, a symlink, an ancestor others may
  write) is never touched: the tree is built in a private temporary directory, removed at exit.
- **Entries** of the cache (``headers/``, ``headers/<version>/`` and its marker) that are not
  ours, writable by others, symlinks, or of an older layout are never used: they are renamed aside
  and deleted fd by fd (``shutil.rmtree`` with ``dir_fd``, which never follows a link), then
  rebuilt.
- **Concurrent starts.** A tree is built in a private ``.build-*`` directory beside its final
  name and renamed into place, under an ``flock`` on the cache directory's own fd (no lock file to
  plant). A start that finds a finished tree uses it without the lock; one that waited re-checks
  first, so N processes starting at once build once and all use the same tree. The wait is bounded
  (:data:`LOCK_WAIT_S`); past it a start builds privately instead of blocking.
- ``find_headers(build=False)`` (``memtop doctor``) only looks: it creates, repairs and deletes
  nothing.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import os
import platform
import re
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SRC_ROOT = Path("/usr/src")
MODULES_ROOT = Path("/lib/modules")

#: first line of a finished tree's marker. Trees of an older layout (made before memtop set the
#: modes itself: under umask 000 their directories were 0777) are rebuilt, never used.
FORMAT = "memtop-headers 2"
MARKER = ".memtop-merged"
#: how long a start waits for another process building the tree before building its own
LOCK_WAIT_S = 30.0
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SCRATCH = (".build-", ".trash-")
_MARKER_MAX_BYTES = 1 << 16


class Untrusted(Exception):
    """A path memtop will not use; the message names it and says why."""


class UntrustedSource(Untrusted):
    """A header source (not the cache) that fails the checks: that version is not used."""


@dataclass(frozen=True, slots=True)
class HeaderInfo:
    kind: str  # "exact" | "standin" | "missing"
    release: str  # running kernel
    version: str = ""  # headers' version (stand-in)
    path: str = ""  # tree BCC should use ("" = BCC's default)
    hint: str = ""
    #: how the tree is held when that is not the usual (private directory, not built yet)
    note: str = ""

    @property
    def summary(self) -> str:
        if self.kind == "exact":
            return f"exact headers for {self.release}"
        if self.kind == "standin":
            return f"stand-in headers {self.version} for kernel {self.release} (tracepoint fields only)"
        return f"no kernel headers for {self.release}"


def cache_dir() -> Path:
    env = os.environ.get("MEMTOP_CACHE_DIR")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/cache/memtop")
    return Path(os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))) / "memtop"


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", name))


def _has_tree(path: Path) -> bool:
    return (path / "include").is_dir() or (path / "Makefile").is_file()


def package_hint(release: str) -> str:
    """The package a user should install for headers on this distribution."""
    exact = f"linux-headers-{release}"
    generic = _generic_package()
    try:
        out = subprocess.run(
            ["apt-cache", "policy", exact], capture_output=True, text=True, timeout=10
        ).stdout
        if "Candidate:" in out and "(none)" not in out:
            return f"apt-get install {exact}"
    except (OSError, subprocess.SubprocessError):
        pass
    return f"apt-get install {generic}  (or {exact} where your distribution has it)"


def _generic_package() -> str:
    osrel = ""
    try:
        osrel = Path("/etc/os-release").read_text()
    except OSError:
        pass
    if "ID=ubuntu" in osrel:
        return "linux-headers-generic"
    machine = platform.machine()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
    return f"linux-headers-{arch}"


def _pairs(src_root: Path) -> list[tuple[Path, Path | None]]:
    """(arch dir, shared dir or None) for each installed header version, newest first."""
    if not src_root.is_dir():
        return []
    dirs = {p.name: p for p in src_root.iterdir() if p.name.startswith("linux-headers-") and p.is_dir()}
    out: list[tuple[Path, Path | None]] = []
    for name, path in dirs.items():
        if name.endswith("-common") or not (path / "include").is_dir() and not (path / "arch").is_dir():
            continue
        base = name.rsplit("-", 1)[0]
        shared = dirs.get(base + "-common") or (dirs.get(base) if base != name else None)
        if shared is None and not (path / "include" / "linux").is_dir():
            continue
        out.append((path, shared))
    out.sort(key=lambda pair: _version_key(pair[0].name), reverse=True)
    return out


# -- trust ----------------------------------------------------------------------------------------


def _owners() -> tuple[int, int]:
    return (0, os.geteuid())


def _check_own(st: os.stat_result, what: str, error: type[Untrusted] = Untrusted) -> None:
    """``what`` belongs to root (or us) and nobody else may write it."""
    if st.st_uid not in _owners():
        raise error(f"{what} belongs to uid {st.st_uid}, not root")
    if st.st_mode & 0o022:
        raise error(f"{what} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})")


def _check_ancestor(st: os.stat_result, what: str, error: type[Untrusted] = Untrusted) -> None:
    """A directory above a trusted one: root's (or ours), writable by others only when sticky
    (others can then add names but not replace ours)."""
    if not stat.S_ISDIR(st.st_mode):
        raise error(f"{what} is not a directory")
    if st.st_uid not in _owners():
        raise error(f"{what} belongs to uid {st.st_uid}, not root")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise error(f"{what} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})")


def _open_dir(name: str, dir_fd: int, where: str, error: type[Untrusted] = Untrusted) -> int:
    """``name`` in ``dir_fd`` as a directory fd, never through a symlink."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise error(f"{where} is a symlink or not a directory") from None
        raise


def _normal(path: Path | str) -> str:
    # lexical: equal to the kernel's resolution because no component may be a symlink
    return os.path.normpath(os.path.abspath(path))


def _open_path(path: Path | str, *, create: bool, error: type[Untrusted] = Untrusted) -> int:
    """A directory fd on ``path``, reached from / one component at a time without following a
    symlink. Every directory above it passes :func:`_check_ancestor`, ``path`` itself
    :func:`_check_own`. ``create`` makes missing components (0755 whatever the umask) and takes back
    a last component of ours that others may write; without it nothing is changed and a missing
    component raises FileNotFoundError."""
    names = [n for n in _normal(path).split("/") if n]
    fd = os.open("/", _DIR_FLAGS)
    try:
        _check_ancestor(os.fstat(fd), "/", error)
        for i, name in enumerate(names):
            where = "/" + "/".join(names[: i + 1])
            made = False
            try:
                nfd = _open_dir(name, fd, where, error)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                    made = True
                except FileExistsError:  # another start made it meanwhile
                    pass
                nfd = _open_dir(name, fd, where, error)
            os.close(fd)
            fd = nfd
            st = os.fstat(fd)
            last = i == len(names) - 1
            if made or (create and last and st.st_uid in _owners() and st.st_mode & 0o022):
                os.fchmod(fd, 0o755)
                st = os.fstat(fd)
            if last:
                _check_own(st, where, error)
            else:
                _check_ancestor(st, where, error)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _source(path: Path) -> Path:
    """``path`` resolved, once checked it is a header directory memtop may compile from."""
    resolved = Path(os.path.realpath(path))
    try:
        os.close(_open_path(resolved, create=False, error=UntrustedSource))
    except FileNotFoundError:
        raise UntrustedSource(f"{path} vanished") from None
    return resolved


class _DirTrust:
    """Memo of directories checked from / (for the targets of the sources' symlinks)."""

    def __init__(self) -> None:
        self._ok: dict[str, bool] = {"/": True}

    def ok(self, path: str) -> bool:
        if path not in self._ok:
            parent = os.path.dirname(path)
            try:
                st = os.lstat(path)
                self._ok[path] = self.ok(parent)
                if self._ok[path]:
                    _check_ancestor(st, path)
            except (OSError, Untrusted):
                self._ok[path] = False
        return self._ok[path]


def _plan(layers: list[Path]) -> dict[str, str | None]:
    """The merged tree as {relative path: None for a directory, else the symlink's target}:
    ``layers`` in order, a later one's files over an earlier one's, directories merged.
    UntrustedSource when any directory or file in them, or a symlink's target, is not root's."""
    entries: dict[str, str | None] = {}
    dirs = _DirTrust()
    for layer in layers:
        todo = [""]
        while todo:
            rel = todo.pop()
            with os.scandir(os.path.join(layer, rel) if rel else layer) as it:
                for entry in it:
                    key = f"{rel}/{entry.name}" if rel else entry.name
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        _check_own(st, entry.path, UntrustedSource)
                        entries[key] = None  # a directory wins over an earlier layer's file
                        todo.append(key)
                        continue
                    if entries.get(key, "") is None:  # an earlier layer's directory stays
                        continue
                    if stat.S_ISREG(st.st_mode):
                        _check_own(st, entry.path, UntrustedSource)
                        entries[key] = entry.path
                    elif stat.S_ISLNK(st.st_mode):
                        # linked by its resolved target (relative links would not resolve from
                        # the cache); a dangling link is left out: whoever may create its target
                        # later must not choose what is compiled
                        target = os.path.realpath(entry.path)
                        try:
                            tst = os.lstat(target)
                        except OSError:
                            continue
                        if not dirs.ok(os.path.dirname(target)):
                            raise UntrustedSource(f"{entry.path} points into {os.path.dirname(target)}")
                        _check_own(tst, target, UntrustedSource)
                        entries[key] = target
    return entries


# -- the cache ------------------------------------------------------------------------------------


def _delete(dir_fd: int, name: str) -> None:
    """Delete ``name`` in ``dir_fd``; a directory fd by fd, a symlink itself (never its target)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, ignore_errors=True, dir_fd=dir_fd)  # fd-based: never follows a link
    else:
        os.unlink(name, dir_fd=dir_fd)


def _token() -> str:
    """16 random hex digits for a private name: what ``secrets.token_hex(8)`` gives (os.urandom),
    without importing secrets, whose hmac and hashlib load OpenSSL into every memtop (~0.3 MiB of
    RssAnon for two names in the headers' build)."""
    return os.urandom(8).hex()


def _discard(dir_fd: int, name: str) -> None:
    """Free ``name`` at once (renamed aside), then delete what it was. Leftovers of a deletion
    that failed keep their ``.trash-`` name and go with the next build."""
    trash = f".trash-{_token()}"
    try:
        os.rename(name, trash, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except FileNotFoundError:
        return
    _delete(dir_fd, trash)


def _marker_text(layers: list[Path]) -> str:
    return FORMAT + "\n" + "".join(f"{layer}\n" for layer in layers)


def _tree_ok(dir_fd: int, name: str, marker: str) -> bool:
    """``name`` in ``dir_fd`` is a finished tree of ours for these sources."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        _check_own(os.fstat(fd), name)
        mfd = os.open(MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            st = os.fstat(mfd)
            if not stat.S_ISREG(st.st_mode):
                return False
            _check_own(st, MARKER)
            return os.read(mfd, _MARKER_MAX_BYTES).decode(errors="replace") == marker
        finally:
            os.close(mfd)
    except (OSError, Untrusted):
        return False
    finally:
        os.close(fd)


def _own_subdir(dir_fd: int, name: str) -> int:
    """fd of directory ``name`` in ``dir_fd``, made (0755) if missing; one that is not ours, is a
    symlink, or others may write is discarded and made anew. Call under the lock."""
    try:
        fd = _open_dir(name, dir_fd, name)
        try:
            _check_own(os.fstat(fd), name)
            return fd
        except Untrusted:
            os.close(fd)
    except FileNotFoundError:
        pass
    except Untrusted:
        pass
    _discard(dir_fd, name)
    os.mkdir(name, 0o755, dir_fd=dir_fd)
    fd = _open_dir(name, dir_fd, name)
    os.fchmod(fd, 0o755)
    return fd


def _build(dir_fd: int, layers: list[Path], marker: str) -> str:
    """Build the merged tree of ``layers`` in a new private directory of ``dir_fd``; its name."""
    plan = _plan(layers)  # before anything is made: untrusted sources leave nothing behind
    name = f".build-{_token()}"
    os.mkdir(name, 0o700, dir_fd=dir_fd)
    try:
        fd = _open_dir(name, dir_fd, name)
        try:
            # the directory is ours and private until renamed: paths below it resolve only
            # through what this loop made
            for rel, target in plan.items():  # a directory always comes before its entries
                if target is None:
                    os.mkdir(rel, 0o755, dir_fd=fd)
                    os.chmod(rel, 0o755, dir_fd=fd)  # whatever the umask
                else:
                    os.symlink(target, rel, dir_fd=fd)
            mfd = os.open(
                MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd
            )
            with os.fdopen(mfd, "w") as f:
                os.fchmod(mfd, 0o644)
                f.write(marker)
            os.fchmod(fd, 0o755)
        finally:
            os.close(fd)
    except BaseException:
        _delete(dir_fd, name)
        raise
    return name


def _install(dir_fd: int, built: str, name: str, marker: str) -> None:
    """Rename ``built`` to ``name``, replacing what is there (it failed :func:`_tree_ok`). Should
    a finished tree have appeared meanwhile (a start of an older memtop takes no lock), it is kept
    and ours deleted."""
    for _ in range(2):
        _discard(dir_fd, name)
        try:
            os.rename(built, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise
            if _tree_ok(dir_fd, name, marker):
                _delete(dir_fd, built)
                return
    _delete(dir_fd, built)
    raise OSError(errno.EEXIST, f"cannot install the header tree {name}")


def _clear_scratch(dir_fd: int) -> None:
    """Delete the build and trash directories a dead start left (builds and discards happen only
    under the lock, so none is in use)."""
    for name in os.listdir(dir_fd):
        if name.startswith(_SCRATCH):
            _delete(dir_fd, name)


@contextmanager
def _locked(fd: int, wait_s: float) -> Iterator[None]:
    """An exclusive flock on ``fd`` (the cache directory), waiting at most ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"another process held the cache lock for {wait_s:.0f} s") from None
            time.sleep(0.05)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


_private_trees: dict[str, str] = {}


def _private_tree(layers: list[Path], marker: str) -> str:
    """The tree built in a private temporary directory (removed at exit), once per process."""
    if marker in _private_trees:
        return _private_trees[marker]
    base = tempfile.mkdtemp(prefix="memtop-headers-")  # 0700, ours
    atexit.register(shutil.rmtree, base, True)
    fd = _open_path(base, create=False)  # and nobody may swap it: its ancestors are checked
    try:
        name = _build(fd, layers, marker)
    finally:
        os.close(fd)
    _private_trees[marker] = path = os.path.join(base, name)
    return path


def _standin(version: str, layers: list[Path], build: bool, wait_s: float) -> tuple[str, str]:
    """(path, note) of the merged tree of ``layers`` for ``version``."""
    root = _normal(cache_dir())
    path = os.path.join(root, "headers", version)
    marker = _marker_text(layers)
    later = "built when memtop first loads BPF"
    try:
        rfd = _open_path(root, create=build)
    except FileNotFoundError:
        return path, f"not built yet: {later}"
    except (Untrusted, OSError) as exc:
        if not build:
            return path, f"cache not used ({exc}): {later}, in a private directory"
        return _private_tree(layers, marker), f"cache not used ({exc}); built in a private directory"
    try:
        try:
            hfd = _open_dir("headers", rfd, "headers")
        except (OSError, Untrusted):
            pass
        else:
            try:
                _check_own(os.fstat(hfd), "headers")
                if _tree_ok(hfd, version, marker):
                    return path, ""
            except Untrusted:
                pass
            finally:
                os.close(hfd)
        if not build:
            return path, f"not built yet: {later}"
        try:
            with _locked(rfd, wait_s):
                _clear_scratch(rfd)
                hfd = _own_subdir(rfd, "headers")
                try:
                    _clear_scratch(hfd)
                    if not _tree_ok(hfd, version, marker):  # not built while we waited
                        _install(hfd, _build(hfd, layers, marker), version, marker)
                finally:
                    os.close(hfd)
            return path, ""
        except UntrustedSource:
            raise
        except (OSError, Untrusted) as exc:  # TimeoutError is an OSError
            return _private_tree(layers, marker), f"cache not used ({exc}); built in a private directory"
    finally:
        os.close(rfd)


def find_headers(
    release: str | None = None,
    src_root: Path = SRC_ROOT,
    modules_root: Path = MODULES_ROOT,
    build: bool = True,
    lock_wait_s: float = LOCK_WAIT_S,
) -> HeaderInfo:
    """Locate headers for ``release`` (default: running kernel); build a stand-in if needed.
    ``build=False`` only looks (the tree's path is where it would be built). Raises OSError only
    when a needed tree can be built neither in the cache nor in a private directory."""
    release = release or os.uname().release
    refused: list[str] = []
    exact = modules_root / release / "build"
    if _has_tree(exact):
        try:
            return HeaderInfo("exact", release, release, str(_source(exact)))
        except UntrustedSource as exc:
            refused.append(str(exc))
    for arch, shared in _pairs(src_root):
        version = arch.name.removeprefix("linux-headers-")
        kind = "exact" if version == release else "standin"
        try:
            layers = [_source(p) for p in (shared, arch) if p is not None]
            if shared is None:
                return HeaderInfo(kind, release, version, str(layers[0]))
            path, note = _standin(version, layers, build, lock_wait_s)
        except UntrustedSource as exc:
            refused.append(str(exc))
            continue
        return HeaderInfo(kind, release, version, path, note=note)
    hint = package_hint(release)
    if refused:
        hint = f"headers not used: {'; '.join(refused)}; or {hint}"
    return HeaderInfo("missing", release, hint=hint)


def apply(info: HeaderInfo) -> None:
    """Point BCC at the chosen tree (BCC reads BCC_KERNEL_SOURCE when it compiles)."""
    if info.kind == "standin" or (info.kind == "exact" and info.path and "/lib/modules/" not in info.path):
        os.environ["BCC_KERNEL_SOURCE"] = info.path
