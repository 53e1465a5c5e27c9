"""The compiler's process: BCC compiles and loads memtop's programs here, not in memtop.

Importing bcc loads libbcc and LLVM: ~14 MiB of RssAnon for their relocated data before anything
is compiled, and a few MiB of compiler heap after, for as long as the process runs. memtop (the
TUI, the exporter) runs for hours and needs none of it once its programs are loaded: the kernel
holds a program or a map as long as one fd refers to it. So :mod:`memtop.linux.bpfout` starts this
module in a fresh interpreter for each compilation; it compiles the text it is sent (memtop's own
bpf/*.bpf.c, built by memtop.probes.unit), loads every program as the type its hooks need, and
sends back the fds of the programs and maps with what memtop needs to read the maps (types, key and
value layouts as BCC describes them), then exits. Nothing here is attached: memtop attaches.

The protocol, over the socket on the fd given as the only argument (a socketpair's end):
request and reply are each an 8-byte little-endian length and a JSON document; after the reply,
the fds it indexes, in order, in messages of at most :data:`FDS_PER_MESSAGE` (SCM_RIGHTS).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import socket
import struct
import sys
from typing import Any

#: SCM_RIGHTS carries at most 253 fds a message (SCM_MAX_FD)
FDS_PER_MESSAGE = 200
#: the largest document either side accepts (a unit's text is ~200 KiB)
MAX_DOC = 64 << 20


def send_doc(sock: socket.socket, doc: dict[str, Any]) -> None:
    data = json.dumps(doc).encode()
    sock.sendall(struct.pack("<Q", len(data)) + data)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the socket")
        buf += chunk
    return bytes(buf)


def recv_doc(sock: socket.socket) -> dict[str, Any]:
    (n,) = struct.unpack("<Q", recv_exact(sock, 8))
    if n > MAX_DOC:
        raise ValueError(f"a document of {n} bytes")
    doc = json.loads(recv_exact(sock, n))
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return doc


def _tables(bpf: Any, lib: Any) -> list[dict[str, Any]]:
    """Every map of the module: name, fd, BPF map type, max entries, flags, key and value layouts
    (BCC's JSON descriptions)."""
    for fn, res, args in (
        ("bpf_num_tables", ctypes.c_ulonglong, [ctypes.c_void_p]),
        ("bpf_table_name", ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_ulonglong]),
        ("bpf_table_fd_id", ctypes.c_int, [ctypes.c_void_p, ctypes.c_ulonglong]),
        ("bpf_table_key_desc_id", ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_ulonglong]),
        ("bpf_table_leaf_desc_id", ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_ulonglong]),
    ):
        getattr(lib, fn).restype = res
        getattr(lib, fn).argtypes = args
    out = []
    for i in range(int(lib.bpf_num_tables(bpf.module))):
        name = lib.bpf_table_name(bpf.module, i)
        if not name:
            continue
        key = lib.bpf_table_key_desc_id(bpf.module, i)
        leaf = lib.bpf_table_leaf_desc_id(bpf.module, i)
        out.append(
            {
                "name": name.decode(),
                "fd": int(lib.bpf_table_fd_id(bpf.module, i)),
                "type": int(lib.bpf_table_type_id(bpf.module, i)),
                "max_entries": int(lib.bpf_table_max_entries_id(bpf.module, i)),
                "flags": int(lib.bpf_table_flags_id(bpf.module, i)),
                "key": json.loads(key) if key else None,
                "leaf": json.loads(leaf) if leaf else None,
            }
        )
    return out


_MULTI = re.compile(r"^#define UPROBE_MULTI 1$", re.M)


def compile_and_load(req: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
    from memtop.linux import bcc_compat
    from memtop.linux.bpfout import type_of

    bpf = bcc_compat.compile_text_here(str(req["text"]), [str(f) for f in req.get("cflags", [])])
    bcc = bcc_compat.bcc_module()
    lib = bcc.libbcc.lib
    names = bcc_compat.function_names(bpf)
    fds: list[int] = []
    programs = []
    by_ctx = {str(k): int(v) for k, v in dict(req.get("types", {})).items()}
    # a program built with UPROBE_MULTI=1 (the leaks probe on a budget) also gets each uprobe
    # program loaded for uprobe_multi links
    multi = "-DUPROBE_MULTI=1" in req.get("cflags", []) or bool(_MULTI.search(str(req["text"])))
    for fn in names:
        prog_type = type_of(fn, by_ctx)
        try:
            with bcc_compat.COMPILE_LOCK:
                f = bpf.load_func(fn.encode(), prog_type)
        except Exception as exc:  # noqa: BLE001 - said to memtop, which decides
            programs.append({"name": fn, "type": prog_type, "error": str(exc)})
            continue
        programs.append({"name": fn, "type": prog_type, "fd_index": len(fds)})
        fds.append(int(f.fd))
        if multi and prog_type == bcc_compat.UPROBE_MULTI_KEY & 0xFF:
            # its copy for uprobe_multi links (leaks on a budget): memtop asks for it by this key
            try:
                fd = bcc_compat.load_uprobe_multi(bpf, fn)
            except Exception as exc:  # noqa: BLE001 - a kernel before 6.6: memtop falls back
                programs.append({"name": fn, "type": bcc_compat.UPROBE_MULTI_KEY, "error": str(exc)})
                continue
            programs.append({"name": fn, "type": bcc_compat.UPROBE_MULTI_KEY, "fd_index": len(fds)})
            fds.append(fd)
    tables = _tables(bpf, lib)
    for t in tables:
        t["fd_index"] = len(fds)
        fds.append(t.pop("fd"))
    return {"ok": True, "functions": names, "programs": programs, "tables": tables}, fds


def _die_with_parent() -> None:
    """Killed when memtop goes (PR_SET_PDEATHSIG): no compiler outlives the process it works for,
    whatever way that one ends."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def main(fd: int) -> int:
    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent:  # gone before the line above took effect
        return 2
    sock = socket.socket(fileno=fd)
    try:
        req = recv_doc(sock)
    except (OSError, ValueError, EOFError):
        return 2
    try:
        doc, fds = compile_and_load(req)
    except Exception as exc:  # noqa: BLE001 - every failure goes back as a message
        hint = getattr(exc, "hint", "")
        send_doc(sock, {"ok": False, "class": type(exc).__name__, "error": str(exc), "hint": hint})
        return 1
    send_doc(sock, doc)
    for i in range(0, len(fds), FDS_PER_MESSAGE):
        socket.send_fds(sock, [b"f"], fds[i : i + FDS_PER_MESSAGE])
    # the parent holds its own references now; ours go with the process
    sock.shutdown(socket.SHUT_RDWR)
    return 0


if __name__ == "__main__":
    os._exit(main(int(sys.argv[1])))
