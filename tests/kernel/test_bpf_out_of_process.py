"""Programs compiled in memtop.linux.bpfchild's process, their maps read here through libbcc_bpf:
the same figures as BCC's own objects give for the same program and workload, and memtop's
process never maps libbcc or LLVM."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.bpf

#: counts execs by pid (hash), execs on slot 0 (array and per-CPU array), and sends each exec's
#: pid on a ring buffer: what memtop's probes use of BCC's tables
PROGRAM = r"""
BPF_HASH(by_pid, u32, u64);
BPF_ARRAY(total, u64, 2);
BPF_PERCPU_ARRAY(per_cpu, u64, 2);
BPF_RINGBUF_OUTPUT(events, 8);
struct ev_t { u32 pid; u32 pad; };
int memtop__tp__sched__sched_process_exec(void *ctx) {
    u32 pid = bpf_get_current_pid_tgid() >> 32;
    by_pid.increment(pid);
    int k = 0;
    total.increment(k);
    per_cpu.increment(k);
    struct ev_t *e = events.ringbuf_reserve(sizeof(*e));
    if (e) { e->pid = pid; e->pad = 0; events.ringbuf_submit(e, 0); }
    return 0;
}
"""

CHILD = textwrap.dedent("""
    import ctypes, json, os, subprocess, sys
    from memtop.linux import bcc_compat
    b = bcc_compat.compile_text(sys.argv[1])
    fd = bcc_compat.attach_tracepoint_fd(b, "memtop__tp__sched__sched_process_exec", "sched:sched_process_exec")
    seen = []
    b["events"].open_ring_buffer(lambda c, d, s: seen.append(ctypes.cast(d, ctypes.POINTER(ctypes.c_uint32))[0]))
    pids = []
    for _ in range(int(sys.argv[2])):
        p = subprocess.Popen(["/bin/true"])
        p.wait()
        pids.append(p.pid)
    b.ring_buffer_consume()
    by_pid = {k.value: v.value for k, v in b["by_pid"].items()}
    out = {
        "mine": [by_pid.get(p, 0) for p in pids],
        "events": sorted(p for p in seen if p in pids) == sorted(pids),
        "total_ge": b["total"][0].value >= len(pids),
        "per_cpu_sum": sum(bcc_compat.percpu_sums(b, "per_cpu")[:1]) == b["per_cpu"].sum(0).value,
        "dump_n": bcc_compat.map_dump(b, "by_pid")[2] == len(by_pid),
    }
    b["total"].clear()
    del b["by_pid"][b["by_pid"].Key(pids[0])]
    out["cleared"] = b["total"][0].value == 0 and pids[0] not in {k.value for k in b["by_pid"].keys()}
    out["get"] = b["by_pid"].get(b["by_pid"].Key(pids[0])) is None
    bcc_compat.close_perf_event_fd(fd)
    b.cleanup()
    out["bcc"] = "bcc" in sys.modules
    out["llvm"] = any(n in open("/proc/self/maps").read() for n in ("libLLVM", "libclang", "libbcc.so"))
    print(json.dumps(out))
""")


def run(n: int, in_process: bool) -> dict[str, object]:
    import json
    import os

    env = dict(os.environ, MEMTOP_BPF_IN_PROCESS="1" if in_process else "0")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, PROGRAM, str(n)], capture_output=True, text=True, timeout=180, env=env
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(doc, dict)
    return doc


def test_maps_read_without_llvm_match_the_kernels_events() -> None:
    n = 12
    got = run(n, in_process=False)
    # the kernel ran the program once per exec of each child: each pid counted once, and each
    # pid's event came through the ring buffer
    assert got["mine"] == [1] * n, got
    assert got["events"] and got["total_ge"] and got["per_cpu_sum"] and got["dump_n"], got
    assert got["cleared"] and got["get"], got
    assert got["bcc"] is False and got["llvm"] is False, "memtop's process loaded BCC's compiler"


def test_the_same_program_in_process_gives_the_same_figures() -> None:
    """MEMTOP_BPF_IN_PROCESS=1 (BCC's own objects): the same answers, with LLVM mapped."""
    got = run(5, in_process=True)
    assert got["mine"] == [1] * 5, got
    assert got["events"] and got["total_ge"] and got["per_cpu_sum"] and got["dump_n"], got
    assert got["cleared"] and got["get"], got
    assert got["llvm"] is True
