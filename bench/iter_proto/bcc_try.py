"""Can BCC 0.26 (python3-bpfcc) build and attach a bpf_iter/task program here?

BCC's Python has no attach_iter, but libbcc exports bcc_iter_attach/bcc_iter_create and its
helpers.h has BPF_ITER(target); a function named bpf_iter__task loaded as BPF.TRACING gets
expected_attach_type BPF_TRACE_ITER and the attach BTF id of the iterator target.
Mode "standin": the stand-in headers (BCC_KERNEL_SOURCE); mode "vmlinux": vmlinux.h instead.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

from bcc import BPF
from bcc.libbcc import lib

TEXT = r"""
BPF_ITER(task)
{
    struct seq_file *seq = ctx->meta->seq;
    struct task_struct *t = ctx->task;
    u64 out[6] = {};
    if (!t)
        return 0;
    out[0] = t->tgid;
    out[1] = t->pid;
    out[2] = t->min_flt;
    out[3] = t->maj_flt;
    struct mm_struct *mm = t->mm;
    if (mm && t->pid == t->tgid) {
        out[4] = mm->rss_stat[1].count;   /* MM_ANONPAGES central count */
        out[5] = mm->rss_stat[0].count;   /* MM_FILEPAGES */
    }
    bpf_seq_write(seq, out, sizeof(out));
    return 0;
}
"""


def run(mode: str) -> None:
    if mode == "vmlinux":
        here = os.path.dirname(os.path.abspath(__file__))
        text = f'#include "{here}/vmlinux.h"\n' + TEXT
    else:
        # 6.1's headers: no struct bpf_iter__task (BTF-only), and mm->rss_stat is a
        # struct mm_rss_stat of atomic_long_t, not 6.18's percpu_counter[4]
        text = (
            "#include <linux/sched.h>\n#include <linux/mm_types.h>\n#include <linux/seq_file.h>\n"
            "struct bpf_iter_meta { struct seq_file *seq; u64 session_id; u64 seq_num; };\n"
            "struct bpf_iter__task { struct bpf_iter_meta *meta; struct task_struct *task; };\n"
            + TEXT.replace("rss_stat[1].count", "rss_stat.count[1].counter").replace(
                "rss_stat[0].count", "rss_stat.count[0].counter"
            )
        )
    # memtop's own compile path: the stand-in header tree, cwd set to it, one lock
    from memtop.linux import bcc_compat

    bcc_compat.ensure_headers()
    b = bcc_compat.compile_text_here(text)
    fn = b.load_func("bpf_iter__task", BPF.TRACING)
    lib.bcc_iter_attach.restype = ctypes.c_int
    lib.bcc_iter_attach.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint]
    lib.bcc_iter_create.restype = ctypes.c_int
    lib.bcc_iter_create.argtypes = [ctypes.c_int]
    link = lib.bcc_iter_attach(fn.fd, None, 0)
    print("bcc_iter_attach ->", link)
    if link < 0:
        return
    fd = lib.bcc_iter_create(link)
    print("bcc_iter_create ->", fd)
    data = b""
    while chunk := os.read(fd, 1 << 20):
        data += chunk
    os.close(fd)
    me = os.getpid()
    for row in struct.iter_unpack("<6Q", data):
        if row[0] == me and row[1] == me:
            with open("/proc/self/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
            print(
                f"self via iter: tgid {row[0]} minflt {row[2]} majflt {row[3]} anon(count) {row[4]} file(count) {row[5]}"
            )
            print(f"self via /proc/self/stat (just after): minflt {rest[7]} majflt {rest[9]}")
    print(f"{len(data) // 48} tasks")
    os.close(link)


if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "standin")
