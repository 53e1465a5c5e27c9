"""The kernel's own figures for a process or the machine (/proc), read around memtop's."""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from support.waits import wait_until

if TYPE_CHECKING:
    import pytest

    from memtop.probes.procfs import ProcfsProbe
    from memtop.records.processes import ProcSample

K = TypeVar("K")
V = TypeVar("V")


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


def within(value: float, expected: float, tol: float = 0.05) -> bool:
    """``value`` is within ``tol`` (relative) of ``expected``."""
    return abs(value - expected) <= tol * max(expected, 1)


def bracket(kernel: Callable[[], K], ours: Callable[[], V], tries: int = 5) -> tuple[K, V, K]:
    """The kernel's figure, memtop's, and the kernel's again: (before, memtop's, after).

    A value that moves (RSS, PSS, swap, counters of a running process) read once by memtop and
    once by the test is two moments compared as one. Read around memtop's read instead, again
    while the kernel's moved in between (at most ``tries`` times), then check with
    :func:`between`: exact when the kernel's figure held still, bounded by it when it did not."""
    for _ in range(tries):
        before = kernel()
        value = ours()
        after = kernel()
        if before == after:
            break
    return before, value, after


def between(value: float, before: float, after: float) -> bool:
    """``value`` lies between two readings of the kernel's figure (either order)."""
    return min(before, after) <= value <= max(before, after)


def function_address(pid: int, lib_pattern: str, name: str) -> int:
    """Where ``pid`` has the dynamic symbol ``name`` of its mapped library matching
    ``lib_pattern`` (nm -D: an oracle independent of memtop's own ELF reader). A process just
    started maps its libraries a moment after the fork returns: waited for."""
    lib, base = "", 0

    def mapped() -> bool:
        nonlocal lib, base
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 6 and lib_pattern in parts[5] and int(parts[2], 16) == 0:
                lib, base = parts[5], int(parts[0].split("-")[0], 16)
                return True
        return False

    wait_until(mapped, f"{lib_pattern} mapped by {pid}")
    out = subprocess.run(
        ["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True
    ).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].split("@")[0] == name:
            return base + int(parts[0], 16)
    raise AssertionError(f"{name} not in {lib}")


def code_byte(pid: int, addr: int) -> int:
    """The byte at ``addr`` in ``pid``'s memory: 0xcc (int3) where a uprobe is attached."""
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(addr)
        return f.read(1)[0]


def pid_reads(monkeypatch: pytest.MonkeyPatch, probe: ProcfsProbe) -> list[int]:
    """The pids the /proc reader ``probe`` reads a process's files of, in order (its
    ``read_pid`` spied on); the test may clear the list between polls."""
    read: list[int] = []
    read_pid = probe.read_pid

    def counting(pid: int) -> ProcSample | None:
        read.append(pid)
        return read_pid(pid)

    monkeypatch.setattr(probe, "read_pid", counting)
    return read


def proc_samples(probe: ProcfsProbe) -> dict[int, ProcSample]:
    """One poll of the /proc reader ``probe``: its process samples by pid."""
    from memtop.records.processes import ProcSample

    return {r.pid: r for r in probe.poll() if isinstance(r, ProcSample)}


def waking_sleepers(n: int) -> list[subprocess.Popen[str]]:
    """``n`` children that say "ready" and sleep on their stdin; a line sent wakes one to fault in
    64 MiB of anonymous memory, say "ok" and sleep again."""
    code = (
        "import sys; print('ready', flush=True); sys.stdin.readline(); b = bytearray(64 << 20); "
        "b[::4096] = b'x' * len(b[::4096]); print('ok', flush=True); sys.stdin.readline()"
    )
    return [
        subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(n)
    ]


def asleep_in(pid: int, wchan: str) -> bool:
    """Whether the kernel has ``pid`` asleep (state S) in a function whose name ends with
    ``wchan`` ("pipe_read": reading a pipe; "nanosleep": sleep(1))."""
    try:
        where = Path(f"/proc/{pid}/wchan").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return where.endswith(wchan) and stat[stat.rindex(")") + 2 :].startswith("S")


def wait_asleep(pids: Iterable[int], wchan: str = "pipe_read") -> None:
    """Wait (on the kernel) until every one of ``pids`` sleeps in ``wchan`` (see :func:`asleep_in`):
    a child that printed "ready" may not have reached its read yet, and until it does it still
    runs (its schedstat moves)."""
    for pid in pids:
        wait_until(functools.partial(asleep_in, pid, wchan), f"pid {pid} asleep in {wchan}")
