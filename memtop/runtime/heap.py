"""memtop's own heap under glibc: tuned once at start (a long session's heap must not creep up)
and trimmed after compilations and once a minute (LLVM's heap given back). A no-op elsewhere."""

from __future__ import annotations

import ctypes

M_ARENA_MAX = -8
M_MMAP_THRESHOLD = -3


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def release_heap() -> None:
    """Give back to the OS the heap LLVM used while compiling (glibc keeps freed memory)."""
    libc = _libc()
    try:
        if libc is not None:
            libc.malloc_trim(0)
    except AttributeError:  # not glibc
        pass


def tune_heap() -> None:
    """Keep a long session's heap from creeping up (measured in bench/soak.py): glibc raises its
    mmap threshold after large blocks are freed (map dumps are megabytes), after which such blocks
    come from the heap and fragment it; and every polling thread gets its own arena. A fixed
    threshold returns large blocks to the OS on free; two arenas are plenty for memtop."""
    libc = _libc()
    try:
        if libc is not None:
            libc.mallopt(M_MMAP_THRESHOLD, 256 * 1024)
            libc.mallopt(M_ARENA_MAX, 2)
    except AttributeError:  # not glibc
        pass
