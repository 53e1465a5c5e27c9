"""clang's text while compiling (issue 19, item 8): caught, passed on to fd 2 (the log file under
the TUI, never the screen), and its errors are what the pane's status line says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memtop.core.errors import ProbeError
from memtop.linux import bcc_compat
from memtop.probes.base import bcc_errors

pytestmark = pytest.mark.bpf


def test_clang_errors_name_the_failure_and_reach_fd2(tmp_path: Path) -> None:
    err = tmp_path / "fd2"
    saved = os.dup(2)
    with err.open("w+b") as f:
        os.dup2(f.fileno(), 2)
        try:
            with pytest.raises(ProbeError) as failed, bcc_errors("broken.bpf.c"):
                bcc_compat.compile_text("int f(void *ctx) { return not_declared_here; }\n")
            good = bcc_compat.compile_text("int g(void *ctx) { return 0; }\n")  # and a good one after
            bcc_compat.cleanup(good)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    message = failed.value.message
    assert message.startswith("broken.bpf.c failed to load: ")
    assert "error: use of undeclared identifier 'not_declared_here'" in message, message
    text = err.read_text()
    assert "error: use of undeclared identifier 'not_declared_here'" in text
    assert "1 error generated." in text
