"""Read a pinned bpf_iter/task (task_rss.bpf.c) and fold threads into processes."""

from __future__ import annotations

import ctypes
import os
import struct
from dataclasses import dataclass

REC = struct.Struct("<II qq 4q qq Q 16s")
assert REC.size == 96


@dataclass(slots=True)
class Proc:
    tgid: int
    comm: str
    rss_file: int  # pages
    rss_anon: int
    swap: int
    rss_shmem: int
    min_flt: int
    maj_flt: int
    memcg_ino: int


def read_raw(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        parts = []
        while chunk := os.read(fd, 1 << 20):
            parts.append(chunk)
    finally:
        os.close(fd)
    return b"".join(parts)


def parse(raw: bytes) -> dict[int, Proc]:
    procs: dict[int, Proc] = {}
    extra: list[tuple[int, int, int]] = []
    for tgid, pid, mn, mj, f, a, s, sh, smn, smj, ino, comm in REC.iter_unpack(raw):
        if pid == tgid:
            p = procs.get(tgid)
            if p is None:
                procs[tgid] = Proc(
                    tgid,
                    comm.split(b"\0", 1)[0].decode(errors="replace"),
                    f,
                    a,
                    s,
                    sh,
                    mn + smn,
                    mj + smj,
                    ino,
                )
            else:  # a thread row came first
                p.comm = comm.split(b"\0", 1)[0].decode(errors="replace")
                p.rss_file, p.rss_anon, p.swap, p.rss_shmem = f, a, s, sh
                p.min_flt += mn + smn
                p.maj_flt += mj + smj
                p.memcg_ino = ino
        else:
            extra.append((tgid, mn, mj))
    for tgid, mn, mj in extra:
        p = procs.get(tgid)
        if p is not None:
            p.min_flt += mn
            p.maj_flt += mj
    return procs


def libbpf() -> ctypes.CDLL:
    """The distribution's libbpf1 with the signatures the prototypes call."""
    lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
    p, i = ctypes.c_void_p, ctypes.c_int
    for name, res, args in (
        ("bpf_object__open_file", p, [ctypes.c_char_p, p]),
        ("bpf_object__load", i, [p]),
        ("bpf_object__find_program_by_name", p, [p, ctypes.c_char_p]),
        ("bpf_program__attach_iter", p, [p, p]),
        ("bpf_link__fd", i, [p]),
        ("bpf_iter_create", i, [i]),
        ("bpf_link__destroy", i, [p]),
        ("bpf_object__close", None, [p]),
        ("libbpf_get_error", ctypes.c_long, [p]),
    ):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib
