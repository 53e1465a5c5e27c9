"""The one module that imports bcc (untyped). Everything BCC-shaped goes through here.

libbcc is not thread-safe: two ``BPF()`` compilations at once crash the process. Every program is
compiled through :func:`compile_program`, which holds one process-wide lock.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from memtop import headers
from memtop.errors import NoBcc, NoHeaders, NoPrivilege

COMPILE_LOCK = threading.Lock()
_header_info: headers.HeaderInfo | None = None


def bcc_module() -> Any:
    try:
        import bcc  # type: ignore[import-untyped]
    except ImportError as exc:
        raise NoBcc(
            f"BCC's Python bindings are not importable ({exc})",
            "apt-get install python3-bpfcc, and run memtop from a venv made with "
            "--system-site-packages (make run does this)",
        ) from exc
    return bcc


def bcc_version() -> str:
    try:
        return str(getattr(bcc_module(), "__version__", "unknown"))
    except NoBcc:
        return ""


def have_privilege() -> bool:
    if os.geteuid() == 0:
        return True
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("CapEff:"):
            caps = int(line.split()[1], 16)
            cap_bpf, cap_perfmon, cap_sys_admin = 39, 38, 21
            if caps & (1 << cap_sys_admin):
                return True
            return bool(caps & (1 << cap_bpf)) and bool(caps & (1 << cap_perfmon))
    return False


def ensure_headers() -> headers.HeaderInfo:
    """Find headers once per process and point BCC at them."""
    global _header_info
    if _header_info is None:
        info = headers.find_headers()
        if info.kind == "missing":
            raise NoHeaders(f"no kernel headers for {info.release}", info.hint)
        headers.apply(info)
        _header_info = info
    return _header_info


def header_info() -> headers.HeaderInfo | None:
    return _header_info


def check_can_load() -> None:
    """Raise the user-facing reason why BPF cannot load at all, if there is one."""
    if not have_privilege():
        raise NoPrivilege(
            "not running as root (BPF needs root or CAP_BPF+CAP_PERFMON)",
            "run: sudo memtop  (showing the /proc view meanwhile)",
        )
    bcc_module()
    ensure_headers()


def compile_program(source: Path, cflags: list[str] | None = None) -> Any:
    """Compile and load ``source`` (a bpf/*.bpf.c file) under the global compile lock."""
    check_can_load()
    bcc = bcc_module()
    with COMPILE_LOCK:
        return bcc.BPF(src_file=str(source).encode(), cflags=list(cflags or []))


def attach_tracepoint(bpf: Any, tp: str, fn: str) -> None:
    with COMPILE_LOCK:
        bpf.attach_tracepoint(tp=tp, fn_name=fn)


def cleanup(bpf: Any) -> None:
    """Detach everything and close the program's fds (idempotent)."""
    with COMPILE_LOCK:
        try:
            bpf.cleanup()
        except Exception:  # noqa: BLE001 - best-effort on every exit path
            pass


def perf_sw_event_ids() -> tuple[int, int]:
    """(PerfType.SOFTWARE, PerfSWConfig.PAGE_FAULT_MAJ) without leaking bcc types."""
    bcc = bcc_module()
    return int(bcc.PerfType.SOFTWARE), int(bcc.PerfSWConfig.PAGE_FAULT_MAJ)


def sym(bpf: Any, addr: int, pid: int) -> str:
    """``function+offset [module]`` for a user address (``[unknown]`` when unresolved)."""
    bcc = bcc_module()
    with COMPILE_LOCK:
        text = bcc.BPF.sym(addr, pid, show_module=True, show_offset=True)
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return str(text)
