"""Clean detach: after quit, Ctrl-C, SIGTERM, SIGHUP and SIGKILL no memtop BPF program, perf event
or uprobe remains. The TUI runs on a real pseudo-terminal, as a user would run it."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import tempfile
import termios
import time
from pathlib import Path

import pytest
from support import memtop_cmd

pytestmark = pytest.mark.bpf


def progs_of(pid: int) -> set[int]:
    """Ids of the BPF programs ``pid`` holds open (from its fds' fdinfo)."""
    ids: set[int] = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) != "anon_inode:bpf-prog":
                continue
            info = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
        except OSError:
            continue
        for line in info.splitlines():
            if line.startswith("prog_id:"):
                ids.add(int(line.split()[1]))
    return ids


def all_progs() -> set[int]:
    out = subprocess.run(
        ["bpftool", "prog", "show", "--json"], capture_output=True, text=True, check=True
    ).stdout
    return {p["id"] for p in json.loads(out or "[]")}


def perf_fds(pid: int) -> int:
    n = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) == "anon_inode:[perf_event]":
                n += 1
        except OSError:
            pass
    return n


def trace_events(name: str) -> str:
    for base in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        p = Path(base) / name
        if p.exists():
            return p.read_text()
    return ""


def drain(fd: int, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                os.read(fd, 65536)
            except OSError:
                return


def start_tui() -> tuple[int, int, Path]:
    ready = Path(tempfile.mkdtemp()) / "ready"
    pid, fd = pty.fork()
    if pid == 0:  # child: the TUI on the pty
        os.environ["MEMTOP_READY_FILE"] = str(ready)
        os.environ["TERM"] = "xterm-256color"
        cmd = memtop_cmd()
        os.execv(cmd[0], cmd)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    deadline = time.monotonic() + 90
    while not ready.exists():
        assert time.monotonic() < deadline, "memtop did not attach its probes"
        drain(fd, 0.1)
    drain(fd, 1.0)
    return pid, fd, ready


def wait_exit(pid: int, fd: int, timeout: float = 20) -> int:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        drain(fd, 0.1)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("memtop did not exit")


@pytest.mark.parametrize("how", ["q", "ctrl-c", "SIGTERM", "SIGHUP", "SIGKILL"])
def test_no_probe_survives_exit(how: str) -> None:
    uprobes_before = trace_events("uprobe_events")
    pid, fd, ready = start_tui()
    try:
        mine = progs_of(pid)
        assert mine, "memtop loaded no BPF programs"
        assert perf_fds(pid) > 0, "no perf event fds (tracepoint attachments) in memtop"
        assert json.loads(ready.read_text())["probes"].get("procmem") == "attached"
        if how == "q":
            os.write(fd, b"q")
        elif how == "ctrl-c":
            os.write(fd, b"\x03")
        else:
            os.kill(pid, getattr(signal, how))
        wait_exit(pid, fd)
    finally:
        os.close(fd)
    time.sleep(0.3)
    assert not (mine & all_progs()), f"BPF programs left behind after {how}: {mine & all_progs()}"
    assert trace_events("uprobe_events") == uprobes_before
    assert "memtop" not in trace_events("kprobe_events")
