"""memtop as a user runs it: the command, `memtop snapshot`, memtop on a pseudo-terminal, and the
BPF a memtop process holds or leaves behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from support.waits import BOUND_S, WaitTimeout, readable, wait_until


def memtop_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "memtop"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "memtop"]


def run_snapshot(
    pane: str, after_s: float, *extra: str, fmt: str = "json", timeout: float = 120, raw: bool = False
) -> Any:
    """Run `memtop snapshot` as a user would and return the parsed document (or text; the file's
    bytes with ``raw``, as for pprof's gzipped profiles)."""
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
        if raw:
            return out.read_bytes()
        text = out.read_text()
        return json.loads(text) if fmt == "json" else text
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


def bpftool(*args: str) -> Any:
    """``bpftool -j ARGS`` parsed (bpftool is installed by setup)."""
    out = subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True, check=True).stdout
    return json.loads(out or "[]")


def prog_ids_of(pid: int) -> set[int]:
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


def bpf_left_behind(pid: int, progs: set[int], timeout_s: float = BOUND_S) -> dict[str, Any]:
    """What the kernel still has of a memtop that was ``pid`` and held ``progs``: its programs
    (bpftool prog), and perf events (tracepoint, perf, uprobe attachments) of that pid or running
    those programs (bpftool perf). Waits (bounded) for the kernel to free them; {} when none."""
    left: dict[str, Any] = {}

    def freed() -> bool:
        live = {p["id"] for p in bpftool("prog", "show")} & progs
        perf = [e for e in bpftool("perf") if e.get("pid") == pid or e.get("prog_id") in progs]
        left.clear()
        if live or perf:
            left.update(progs=sorted(live), perf=perf)
        return not left

    try:
        wait_until(freed, "the kernel to free memtop's programs", timeout_s)
    except WaitTimeout:
        pass
    return left


def exit_deadline_hit(pid: int) -> bool:
    """Whether memtop ``pid`` was ended by its exit deadline (it logs every thread's stack then)
    rather than by its own exit path."""
    log = Path("/var/log/memtop/memtop.log")
    try:
        return f"memtop {pid}: exit deadline reached" in log.read_text(errors="replace")
    except OSError:
        return False


class PtyMemtop:
    """memtop as a user runs it, on a real pseudo-terminal. ``controlling``: the pty is its
    controlling terminal (closing the master then sends it SIGHUP and SIGCONT, as a terminal
    window closing does); else the pty is only its stdin/stdout/stderr (closing the master is then
    end of file and EIO alone, no signal). Output is drained in a thread (a full pty would block
    it) and kept in ``output``."""

    def __init__(
        self,
        args: list[str],
        *,
        controlling: bool = True,
        close_stderr: bool = False,
        size: tuple[int, int] = (40, 140),
    ) -> None:
        import fcntl
        import pty
        import struct
        import termios

        self.ready = Path(tempfile.mkdtemp(prefix="memtop-pty-")) / "ready"
        self.output = bytearray()
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
        env = dict(os.environ, MEMTOP_READY_FILE=str(self.ready), TERM="xterm-256color")
        cmd = memtop_cmd() + args
        pid = os.fork()
        if pid == 0:  # child: memtop on the pty
            try:
                os.setsid()
                if controlling:
                    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
                for fd in (0, 1, 2):
                    os.dup2(slave, fd)
                if close_stderr:
                    os.close(2)
                os.closerange(3, 4096)
                os.execve(cmd[0], cmd, env)
            finally:
                os._exit(127)
        os.close(slave)
        self.pid = pid
        self.master = master
        self.status: int | None = None
        self._closing = False
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        while not self._closing:
            if readable(self.master, 0.05):
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    return
                if not data:
                    return
                self.output += data
        os.close(self.master)

    def wait_ready(self, timeout_s: float = 90) -> dict[str, Any]:
        """The ready document memtop writes once every probe attached or failed."""

        def written() -> bool:  # memtop writes it in one go, ending with a newline
            assert self.alive(), f"memtop exited before it was ready ({self.status}): {self.text()[-2000:]}"
            return self.ready.exists() and self.ready.read_text().endswith("\n")

        wait_until(written, "memtop's ready file", timeout_s)
        doc: dict[str, Any] = json.loads(self.ready.read_text())
        return doc

    def send(self, keys: bytes, settle_s: float = 0.0) -> None:
        """Type ``keys``; ``settle_s``: a window for what must *not* happen after them (a
        thread started, a file opened) to show; what must happen is awaited with wait_text."""
        os.write(self.master, keys)
        time.sleep(settle_s)

    def wait_text(self, text: str, timeout_s: float = BOUND_S) -> None:
        """Return once memtop has drawn ``text`` (WaitTimeout after ``timeout_s``)."""
        wait_until(lambda: text in self.text(), f"{text!r} on memtop's screen", timeout_s)

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def close_terminal(self) -> None:
        """Close the master side: the terminal is gone (no signal is sent by the test)."""
        self._closing = True
        self._drainer.join()

    def alive(self) -> bool:
        if self.status is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status is None

    def wait_gone(self, timeout_s: float) -> bool:
        """True once memtop has exited (and been reaped) within ``timeout_s``."""
        try:
            wait_until(lambda: not self.alive(), "memtop gone", timeout_s)
        except WaitTimeout:
            return False
        return True

    def kill(self) -> None:
        if self.alive():
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        if not self._closing:
            self.close_terminal()
        # the ready file's directory: each run left one in /tmp
        shutil.rmtree(self.ready.parent, ignore_errors=True)
