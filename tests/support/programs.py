"""What this machine has: the programs the suite calls, BPF, and a C compiler for the workloads."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from support.paths import PROGRAMS, WORKLOADS


def missing_programs(listing: Path = PROGRAMS) -> list[tuple[str, str]]:
    """(program, Debian package) for each line of tests/programs.txt not found on this machine."""
    out = []
    for line in listing.read_text().splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        prog, package = fields[0], fields[1]
        found = Path(prog).exists() if prog.startswith("/") else shutil.which(prog) is not None
        if not found:
            out.append((prog, package))
    return out


def bpf_unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "not root"
    try:
        import bcc  # noqa: F401
    except ImportError as exc:
        return f"bcc not importable: {exc}"
    from memtop.linux import headers

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
