"""Helpers shared by the tests: real pressure (memory cgroup + swap file), C workloads, memtop CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = Path(__file__).resolve().parent / "workloads"
CG1 = Path("/sys/fs/cgroup/memory")
CG2 = Path("/sys/fs/cgroup")


def bpf_unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "not root"
    try:
        import bcc  # noqa: F401
    except ImportError as exc:
        return f"bcc not importable: {exc}"
    from memtop import headers

    if headers.find_headers().kind == "missing":
        return "no kernel headers"
    return None


def compile_c(name: str, extra: list[str] | None = None) -> Path:
    """Build tests/workloads/<name>.c with frame pointers and debug info; cached per source."""
    src = WORKLOADS / f"{name}.c"
    out_dir = Path(tempfile.gettempdir()) / "memtop-test-bin"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / name
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(
            ["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline", "-o", str(out), str(src)]
            + (extra or []),
            check=True,
        )
    return out


class MemCgroup:
    """A memory cgroup with a limit (v1 where mounted, else v2). Processes join via ``add``."""

    def __init__(self, limit_bytes: int, swap: bool = True) -> None:
        self.name = f"memtop-test-{uuid.uuid4().hex[:8]}"
        self.v1 = (CG1 / "memory.limit_in_bytes").exists()
        self.path = (CG1 if self.v1 else CG2) / self.name
        self.path.mkdir()
        if self.v1:
            (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
            if not swap:
                try:
                    (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
                except OSError:
                    (self.path / "memory.swappiness").write_text("0")
        else:
            (self.path / "memory.max").write_text(str(limit_bytes))
            if not swap:
                (self.path / "memory.swap.max").write_text("0")

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def stat(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for line in (self.path / "memory.stat").read_text().splitlines():
            k, _, v = line.partition(" ")
            out[k] = int(v)
        return out

    def events(self) -> dict[str, int]:
        p = self.path / "memory.events"
        if not p.exists():
            return {}
        return {k: int(v) for k, v in (line.split() for line in p.read_text().splitlines())}

    def remove(self) -> None:
        for _ in range(50):
            try:
                procs = (self.path / "cgroup.procs").read_text().split()
            except OSError:
                return
            for pid in procs:
                try:
                    os.kill(int(pid), 9)
                except ProcessLookupError:
                    pass
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


@contextmanager
def memcg(limit_bytes: int, swap: bool = True) -> Iterator[MemCgroup]:
    cg = MemCgroup(limit_bytes, swap)
    try:
        yield cg
    finally:
        cg.remove()


@contextmanager
def swapfile(size_mib: int = 1024) -> Iterator[Path]:
    """A swap file, on for the duration. Reuses an active swap if the machine already has one."""
    swaps = Path("/proc/swaps").read_text().splitlines()[1:]
    if swaps:
        yield Path(swaps[0].split()[0])
        return
    path = Path(tempfile.gettempdir()) / f"memtop-test-swap-{uuid.uuid4().hex[:6]}"
    subprocess.run(["fallocate", "-l", f"{size_mib}M", str(path)], check=True)
    path.chmod(0o600)
    subprocess.run(["mkswap", str(path)], check=True, capture_output=True)
    subprocess.run(["swapon", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["swapoff", str(path)], check=False)
        path.unlink(missing_ok=True)


@contextmanager
def zram_filesystem(size_mib: int = 128) -> Iterator[Path | None]:
    """An ext4 file system on a new zram device (a synchronous block device: a page read from it
    is there before the reader would sleep), mounted for the duration; None when this kernel has
    no zram-control or mkfs.ext4 is missing."""
    control = Path("/sys/class/zram-control")
    if not (control / "hot_add").exists() or shutil.which("mkfs.ext4") is None:
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


def memtop_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "memtop"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "memtop"]


def run_snapshot(pane: str, after_s: float, *extra: str, fmt: str = "json", timeout: float = 120) -> Any:
    """Run `memtop snapshot` as a user would and return the parsed document (or text)."""
    out = Path(tempfile.mkdtemp(prefix="memtop-snap-")) / f"snap.{fmt}"
    try:
        proc = subprocess.run(
            memtop_cmd()
            + [
                "snapshot",
                "--pane",
                pane,
                "--format",
                fmt,
                "--output",
                str(out),
                "--after",
                str(after_s),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert proc.returncode == 0, f"memtop snapshot failed ({proc.returncode}): {proc.stderr}"
        text = out.read_text()
        return json.loads(text) if fmt == "json" else text
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


def proc_status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def kb(status: dict[str, str], key: str) -> int:
    return int(status.get(key, "0 kB").split()[0]) * 1024


def proc_stat_faults(pid: int) -> tuple[int, int]:
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[7]), int(fields[9])


def vmstat() -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in Path("/proc/vmstat").read_text().splitlines())}


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
