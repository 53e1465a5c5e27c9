"""Load task_rss.bpf.o with the distribution's libbpf (libbpf1) through ctypes: no bpftool,
no pin; the iterator fd is read directly. Prints the load+attach cost and one read's size."""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from iterread import libbpf, parse  # noqa: E402

OBJ = sys.argv[1] if len(sys.argv) > 1 else "/tmp/iterproto/task_rss.bpf.o"

lib = libbpf()


def main() -> None:
    a = time.perf_counter()
    obj = lib.bpf_object__open_file(OBJ.encode(), None)
    if not obj or lib.libbpf_get_error(obj):
        raise SystemExit("open failed")
    rc = lib.bpf_object__load(obj)
    if rc:
        raise SystemExit(f"load failed: {rc}")
    prog = lib.bpf_object__find_program_by_name(obj, b"dump_task")
    link = lib.bpf_program__attach_iter(prog, None)
    if not link or lib.libbpf_get_error(link):
        raise SystemExit("attach_iter failed")
    b = time.perf_counter()
    lfd = lib.bpf_link__fd(link)
    ifd = lib.bpf_iter_create(lfd)
    data = b""
    while chunk := os.read(ifd, 1 << 20):
        data += chunk
    os.close(ifd)
    procs = parse(data)
    print(f"libbpf1 via ctypes: open+load+attach {1e3 * (b - a):.1f} ms; one read {len(data)} bytes,")
    print(f"  {len(procs)} processes; self: {procs[os.getpid()]}")
    lib.bpf_link__destroy(link)
    lib.bpf_object__close(obj)


if __name__ == "__main__":
    main()
