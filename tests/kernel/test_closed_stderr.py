"""`memtop 2>&-`: LLVM and libbcc write to fd 2, and with fd 2 closed the first file memtop opened
took its place; LLVM aborted on a write error there (rc 134). Under the TUI, what they print goes
to the log file, never over the screen. Issue 19, item 8."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest
from support import PtyMemtop

pytestmark = pytest.mark.bpf


def test_tui_with_stderr_closed_compiles_and_quits() -> None:
    m = PtyMemtop([], close_stderr=True)
    try:
        doc = m.wait_ready()
        assert doc["probes"].get("vmscan") == "attached", doc  # compiled by LLVM meanwhile
        assert "Processes" in m.text()  # drawn on stdout: Textual's own output is fd 2
        fd2 = os.readlink(f"/proc/{m.pid}/fd/2")
        assert fd2.endswith("/memtop.log"), fd2  # where clang and libbcc print under the TUI
        m.send(b"q", 0)
        assert m.wait_gone(20)
    finally:
        m.kill()
    assert m.status == 0


def test_tui_sends_fd2_to_the_log_not_the_terminal() -> None:
    """Whatever is written on fd 2 while the TUI is up lands in the log, not on the screen."""
    m = PtyMemtop([])
    try:
        m.wait_ready()
        fd2 = os.readlink(f"/proc/{m.pid}/fd/2")
        assert fd2 == "/var/log/memtop/memtop.log", fd2
        st = os.stat(fd2)
        assert st.st_mode & 0o777 == 0o644 and st.st_uid == 0
        tty = os.readlink(f"/proc/{m.pid}/fd/1")
        assert tty.startswith("/dev/pts/"), tty
        m.send(b"q", 0)
        assert m.wait_gone(20)
    finally:
        m.kill()


#: clang warns about it ("division by zero is undefined"): LLVM writes to fd 2
WARNS = "int f(void *ctx) { return 1 / 0; }"


def with_stderr_closed(code: str) -> subprocess.CompletedProcess[str]:
    cmd = f"exec {shlex.quote(sys.executable)} -c {shlex.quote(code)} 2>&-"
    return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=120, check=False)


def test_a_warning_with_stderr_closed_does_not_abort_llvm() -> None:
    """What memtop's main does first (fds 0-2 opened), then BCC compiling as it would."""
    code = (
        "from memtop.linux import bcc_compat; from memtop.runtime import lifecycle; lifecycle.ensure_std_fds(); bcc_compat.ensure_headers();"
        f"import bcc; bcc.BPF(text={WARNS!r}); print('compiled')"
    )
    out = with_stderr_closed(code)
    assert (out.returncode, out.stdout) == (0, "compiled\n")


def test_compile_text_with_stderr_closed_does_not_abort_llvm() -> None:
    """memtop's one way to compile, whatever fd 2 is."""
    out = with_stderr_closed(
        f"from memtop.linux import bcc_compat; bcc_compat.compile_text({WARNS!r}); print('compiled')"
    )
    assert (out.returncode, out.stdout) == (0, "compiled\n")
