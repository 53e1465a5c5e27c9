"""Find kernel headers for BCC, or build a stand-in tree.

BCC compiles our C against kernel headers. Exact headers for ``uname -r`` are best. Without them
the newest installed ``linux-headers-*`` serves as a stand-in: Debian and Ubuntu split headers into
an arch directory (``-amd64``/``-generic``) and a shared one (``-common`` / unsuffixed); BCC needs
one tree, so we build a merged tree of symlinks in a cache directory and point
``BCC_KERNEL_SOURCE`` at it.

A stand-in is safe only because memtop's programs read tracepoint fields (BCC takes their real
layout from tracefs) and BPF helpers, never kernel structs. Keep it that way.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SRC_ROOT = Path("/usr/src")
MODULES_ROOT = Path("/lib/modules")


@dataclass(frozen=True, slots=True)
class HeaderInfo:
    kind: str  # "exact" | "standin" | "missing"
    release: str  # running kernel
    version: str = ""  # headers' version (stand-in)
    path: str = ""  # tree BCC should use ("" = BCC's default)
    hint: str = ""

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


def _merge(shared: Path | None, arch: Path, dest: Path) -> None:
    """A tree of symlinks: ``shared`` first, ``arch`` over it (arch wins on clashes)."""
    tmp = Path(tempfile.mkdtemp(prefix=".merge-", dir=dest.parent))
    os.chmod(tmp, 0o755)
    try:
        for layer in [p for p in (shared, arch) if p is not None]:
            for root, dirnames, filenames in os.walk(layer, followlinks=False):
                rel = Path(root).relative_to(layer)
                (tmp / rel).mkdir(parents=True, exist_ok=True)
                for entry in list(dirnames) + filenames:
                    src = Path(root) / entry
                    if src.is_symlink() or entry in filenames:
                        target = tmp / rel / entry
                        if target.is_symlink() or target.is_file():
                            target.unlink()
                        elif target.is_dir():
                            continue
                        # resolve relative links (e.g. scripts -> ../../lib/...) against the source
                        target.symlink_to(src.resolve() if src.is_symlink() else src)
        (tmp / ".memtop-merged").write_text(f"{shared}\n{arch}\n")
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def find_headers(
    release: str | None = None,
    src_root: Path = SRC_ROOT,
    modules_root: Path = MODULES_ROOT,
    build: bool = True,
) -> HeaderInfo:
    """Locate headers for ``release`` (default: running kernel); build a stand-in if needed."""
    release = release or os.uname().release
    exact = modules_root / release / "build"
    if _has_tree(exact):
        return HeaderInfo("exact", release, release, str(exact.resolve()))
    for arch, shared in _pairs(src_root):
        if arch.name == f"linux-headers-{release}":
            # exact headers that are not linked from /lib/modules: still need one tree
            pass
        version = arch.name.removeprefix("linux-headers-")
        kind = "exact" if version == release else "standin"
        if shared is None:
            return HeaderInfo(kind, release, version, str(arch))
        dest = cache_dir() / "headers" / version
        if not (dest / ".memtop-merged").is_file():
            if not build:
                return HeaderInfo(kind, release, version, str(dest))
            dest.parent.mkdir(parents=True, exist_ok=True)
            _merge(shared, arch, dest)
        return HeaderInfo(kind, release, version, str(dest))
    return HeaderInfo("missing", release, hint=package_hint(release))


def apply(info: HeaderInfo) -> None:
    """Point BCC at the chosen tree (BCC reads BCC_KERNEL_SOURCE when it compiles)."""
    if info.kind == "standin" or (info.kind == "exact" and info.path and "/lib/modules/" not in info.path):
        os.environ["BCC_KERNEL_SOURCE"] = info.path
