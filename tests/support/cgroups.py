"""Real memory pressure: a memory cgroup with a limit (v1 where mounted, else v2) and a swap file."""

from __future__ import annotations

import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.waits import wait_until

CG1 = Path("/sys/fs/cgroup/memory")
CG2 = Path("/sys/fs/cgroup")


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
        def removed() -> bool:  # busy until the kernel has let its last process go
            try:
                procs = (self.path / "cgroup.procs").read_text().split()
            except OSError:
                return True
            for pid in procs:
                try:
                    os.kill(int(pid), 9)
                except ProcessLookupError:
                    pass
            try:
                self.path.rmdir()
            except OSError:
                return False
            return True

        wait_until(removed, f"{self.path} removed")


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
