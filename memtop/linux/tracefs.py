"""tracefs: where it is, mounting it when needed, and which tracepoints exist."""

from __future__ import annotations

import subprocess
from pathlib import Path

CANDIDATES = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # e.g. EACCES on tracefs for an unprivileged user
        return False


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def root(mount: bool = True) -> Path | None:
    """The tracefs mount point; mounts it at /sys/kernel/tracing when it is not mounted and we
    may (root). None when it cannot be had."""
    for path in CANDIDATES:
        if _is_dir(path / "events"):
            return path
    if mount:
        try:
            subprocess.run(
                ["mount", "-t", "tracefs", "tracefs", str(CANDIDATES[0])],
                capture_output=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        if _is_dir(CANDIDATES[0] / "events"):
            return CANDIDATES[0]
    return None


def tracepoint_exists(name: str) -> bool:
    """``name`` is ``category:event``."""
    base = root()
    if base is None:
        return False
    cat, _, event = name.partition(":")
    return _is_file(base / "events" / cat / event / "format")


def tracepoint_fields(name: str) -> set[str]:
    base = root()
    if base is None:
        return set()
    cat, _, event = name.partition(":")
    try:
        text = (base / "events" / cat / event / "format").read_text()
    except OSError:
        return set()
    fields: set[str] = set()
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("field:"):
            decl = line.split(";", 1)[0].removeprefix("field:").strip()
            fields.add(decl.replace("[", " [").split()[-2 if decl.endswith("]") else -1].strip("*"))
    return fields
