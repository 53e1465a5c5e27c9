"""Where bpf/ and styles/ live: inside the installed package (wheel) or at the repository top."""

from __future__ import annotations

from pathlib import Path

# this module is memtop/runtime/resources.py: the package is its parent's parent
_PKG = Path(__file__).resolve().parent.parent


def _find(name: str) -> Path:
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"memtop resource directory {name!r} not found (broken install?)")


def bpf_dir() -> Path:
    return _find("bpf")


def styles_dir() -> Path:
    return _find("styles")


def bpf_source(name: str) -> Path:
    """Path of ``bpf/<name>.bpf.c``."""
    path = bpf_dir() / f"{name}.bpf.c"
    if not path.is_file():
        raise FileNotFoundError(f"BPF program {path} missing")
    return path
