"""Load memcg_iter.bpf.o (libbpf1 via ctypes), attach a cgroup iterator at the v1 memory
hierarchy's root (descendants, pre-order), compare with memory.usage_in_bytes and memory.stat."""

from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from iterread import libbpf  # noqa: E402

OBJ = os.environ.get("MEMCG_OBJ", "/tmp/iterproto/memcg_noflush.bpf.o")
ROOT = "/sys/fs/cgroup/memory"
NSTATE = int(os.environ.get("MEMCG_NSTATE", "40"))
REC = struct.Struct(f"<Qqq{NSTATE}q")
PAGE = os.sysconf("SC_PAGESIZE")

lib = libbpf()


class CgroupInfo(ctypes.Structure):  # union bpf_iter_link_info, its cgroup member
    _fields_ = [("order", ctypes.c_uint32), ("cgroup_fd", ctypes.c_uint32), ("cgroup_id", ctypes.c_uint64)]


class IterOpts(ctypes.Structure):  # struct bpf_iter_attach_opts
    _fields_ = [("sz", ctypes.c_size_t), ("link_info", ctypes.c_void_p), ("link_info_len", ctypes.c_uint32)]


def attach() -> int:
    obj = lib.bpf_object__open_file(OBJ.encode(), None)
    if not obj or lib.libbpf_get_error(obj) or lib.bpf_object__load(obj):
        raise SystemExit("open/load failed")
    prog = lib.bpf_object__find_program_by_name(obj, b"dump_memcg")
    rfd = os.open(ROOT, os.O_RDONLY | os.O_DIRECTORY)
    info = CgroupInfo(2, rfd, 0)  # BPF_CGROUP_ITER_DESCENDANTS_PRE
    opts = IterOpts(ctypes.sizeof(IterOpts), ctypes.addressof(info), ctypes.sizeof(info))
    link = lib.bpf_program__attach_iter(prog, ctypes.byref(opts))
    if not link or lib.libbpf_get_error(link):
        raise SystemExit(f"attach_iter failed: errno {ctypes.get_errno()}")
    return int(lib.bpf_link__fd(link))


def read(lfd: int) -> dict[int, tuple[int, ...]]:
    fd = lib.bpf_iter_create(lfd)
    data = b""
    while chunk := os.read(fd, 1 << 20):
        data += chunk
    os.close(fd)
    return {r[0]: r for r in REC.iter_unpack(data)}


def main() -> None:
    made = []
    kids = []
    for i in range(3):
        d = f"{ROOT}/iterproto_{i}"
        os.makedirs(d, exist_ok=True)
        made.append(d)
        p = subprocess.Popen(
            [sys.executable, "-c", f"b = bytearray({(i + 1) * 8} << 20); import time; time.sleep(60)"]
        )
        with open(f"{d}/cgroup.procs", "w") as f:
            f.write(str(p.pid))
        kids.append(p)
    try:
        time.sleep(1.0)
        lfd = attach()
        a = time.thread_time()
        rows = read(lfd)
        cost = (time.thread_time() - a) * 1e6
        print(f"{len(rows)} memcgs in one read, {cost:.0f} us thread_time")
        for d in made:
            ino = os.stat(d).st_ino
            r = rows[ino]
            with open(f"{d}/memory.usage_in_bytes") as f:
                usage = int(f.read())
            with open(f"{d}/memory.stat") as f:
                stat = dict((k, int(v)) for k, v in (ln.split() for ln in f))
            print(
                f"{d}: usage iter {r[1] * PAGE} file {usage}; memsw iter {r[2] * PAGE};"
                f" memory.stat rss {stat['rss']} cache {stat['cache']} mapped_file {stat['mapped_file']}"
            )
            nz = [(i, v * PAGE) for i, v in enumerate(r[3:]) if v]
            print(f"   raw vmstats->state[] nonzero (idx, x PAGE): {nz[:12]}")
    finally:
        for p in kids:
            p.kill()
            p.wait()
        time.sleep(0.2)
        for d in made:
            os.rmdir(d)


if __name__ == "__main__":
    main()
