"""The run time the kernel measures for BPF programs (BPF_ENABLE_STATS, Linux 5.8+), so the pane shows
what an on-demand tracer costs as the kernel counted it (run_time_ns and run_cnt of each program,
bpf_prog_info). Stats cost two clock reads per program run, for every BPF program on the machine,
while held: on a hot path that is a fifth of the tracer's cost (bench/kernel_cost.py), so
:class:`Windows` holds them one poll in ``every`` only; the counters only grow while held, and
their ratio is the programs' ns per run."""

from __future__ import annotations

import ctypes
import os
import platform
from typing import Any

_NR_BPF = {"x86_64": 321, "aarch64": 280}.get(platform.machine(), -1)
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0
#: offsets of run_time_ns and run_cnt in struct bpf_prog_info (uapi/linux/bpf.h, stable uAPI)
_RUN_TIME_OFF, _RUN_CNT_OFF, _INFO_LEN = 192, 200, 256

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _bpf(cmd: int, attr: ctypes.Array[ctypes.c_char]) -> int:
    if _NR_BPF < 0:
        return -1
    return int(_libc.syscall(ctypes.c_long(_NR_BPF), ctypes.c_int(cmd), attr, ctypes.c_uint(len(attr))))


def enable() -> int | None:
    """An fd that keeps BPF run-time stats on while open; None when the kernel refuses."""
    attr = ctypes.create_string_buffer(8)
    ctypes.c_uint32.from_buffer(attr, 0).value = BPF_STATS_RUN_TIME
    fd = _bpf(BPF_ENABLE_STATS, attr)
    return fd if fd >= 0 else None


def disable(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def run_stats(prog_fd: int) -> tuple[int, int] | None:
    """(run_time_ns, run_cnt) of the program behind ``prog_fd``."""
    info = ctypes.create_string_buffer(_INFO_LEN)
    attr = ctypes.create_string_buffer(16)
    ctypes.c_uint32.from_buffer(attr, 0).value = prog_fd
    ctypes.c_uint32.from_buffer(attr, 4).value = _INFO_LEN
    ctypes.c_uint64.from_buffer(attr, 8).value = ctypes.addressof(info)
    if _bpf(BPF_OBJ_GET_INFO_BY_FD, attr) < 0:
        return None
    return (
        ctypes.c_uint64.from_buffer(info, _RUN_TIME_OFF).value,
        ctypes.c_uint64.from_buffer(info, _RUN_CNT_OFF).value,
    )


def program_stats(bpf: Any, owner: str) -> tuple[int, int]:
    """Summed (run_time_ns, run_cnt) of the tracepoint functions probe ``owner`` loaded (memtop's
    compiled units name them ``<owner>__tp__<category>__<event>`` and ``<owner>__raw__<event>``);
    (0, 0) when unknown."""
    ns = runs = 0
    funcs: dict[Any, Any] = getattr(bpf, "funcs", None) or {}
    for key, fn in funcs.items():
        name = key.decode() if isinstance(key, bytes) else str(key)
        if name.startswith((f"{owner}__tp__", f"{owner}__raw__")):
            st = run_stats(int(fn.fd))
            if st is not None:
                ns, runs = ns + st[0], runs + st[1]
    return ns, runs


class Windows:
    """BPF stats held during one poll interval in ``every``: :meth:`tick` once per poll."""

    def __init__(self, every: int = 10) -> None:
        self.every = every
        self._n = 0
        self._fd: int | None = None

    def tick(self) -> None:
        self._n += 1
        if self._fd is not None:
            disable(self._fd)
            self._fd = None
        elif self._n % self.every == 1 or self.every <= 1:
            self._fd = enable()

    def close(self) -> None:
        disable(self._fd)
        self._fd = None
