"""Accuracy: the iterator's figures against /proc/PID/status and /proc/PID/stat."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from iterread import parse, read_raw  # noqa: E402

PIN = sys.argv[1] if len(sys.argv) > 1 else "/sys/fs/bpf/iterproto_task"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
FIELDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmSwap")


def proc_view(pid: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in FIELDS:
                out[k] = int(v.split()[0])
            elif k == "Name":
                out["comm"] = v.strip()
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    out["minflt"], out["majflt"] = int(rest[7]), int(rest[9])
    return out


def iter_view(p) -> dict[str, int]:  # type: ignore[no-untyped-def]
    kb = os.sysconf("SC_PAGESIZE") // 1024
    return {
        "VmRSS": (p.rss_anon + p.rss_file + p.rss_shmem) * kb,
        "RssAnon": p.rss_anon * kb,
        "RssFile": p.rss_file * kb,
        "RssShmem": p.rss_shmem * kb,
        "VmSwap": p.swap * kb,
        "minflt": p.min_flt,
        "majflt": p.maj_flt,
    }


FAULTER = r"""
import mmap, threading, time
def churn():
    while True:
        m = mmap.mmap(-1, 8 << 20)
        for i in range(0, 8 << 20, 4096):
            m[i] = 1
        m.close()
threading.Thread(target=churn, daemon=True).start()
churn()
"""


def main() -> None:
    kids = [subprocess.Popen(["sleep", "3600"]) for _ in range(N)]
    faulter = subprocess.Popen([sys.executable, "-c", FAULTER])
    try:
        time.sleep(1.0)
        # sleepers: one iterator read, then /proc for each
        procs = parse(read_raw(PIN))
        bad = 0
        for kid in kids:
            it, pv = iter_view(procs[kid.pid]), proc_view(kid.pid)
            diff = {f: (it[f], pv[f]) for f in it if it[f] != pv[f]}
            if diff or procs[kid.pid].comm != pv["comm"]:
                bad += 1
                if bad <= 3:
                    print("mismatch", kid.pid, diff)
        print(f"sleepers: {N} compared, {bad} mismatches")
        # the whole system, all processes still there
        procs = parse(read_raw(PIN))
        allbad = tot = 0
        for pid, p in procs.items():
            try:
                pv = proc_view(pid)
            except (FileNotFoundError, ProcessLookupError):
                continue
            if pid in (faulter.pid, os.getpid()) or "VmRSS" not in pv:
                continue  # the faulter and this reader move; kernel threads have no mm
            tot += 1
            it = iter_view(p)
            diff = {f: (it[f], pv[f]) for f in it if it[f] != pv[f]}
            if diff:
                allbad += 1
                print("  system mismatch", pid, p.comm, diff)
        print(f"whole system: {tot} processes compared (faulter excluded), {allbad} mismatches")
        # the faulter (2 threads churning): iter, proc, iter
        fp = faulter.pid
        for _ in range(5):
            a = iter_view(parse(read_raw(PIN))[fp])
            pv = proc_view(fp)
            b = iter_view(parse(read_raw(PIN))[fp])
            ok = a["minflt"] <= pv["minflt"] <= b["minflt"]
            print(
                f"faulter minflt iter {a['minflt']} <= proc {pv['minflt']} <= iter {b['minflt']}: {ok};"
                f" RssAnon kB iter {a['RssAnon']} proc {pv['RssAnon']} iter {b['RssAnon']}"
            )
        faulter.send_signal(19)  # SIGSTOP: now it must match exactly
        time.sleep(0.2)
        a, pv = iter_view(parse(read_raw(PIN))[fp]), proc_view(fp)
        print(
            "faulter stopped: iter == proc:",
            a == {k: pv[k] for k in a},
            a if a != {k: pv[k] for k in a} else "",
        )
        memcgs = {p.memcg_ino for p in procs.values()}
        print(f"distinct memcg inos: {len(memcgs)}; sleeper memcg ino {procs[kids[0].pid].memcg_ino}")
        with open(f"/proc/{kids[0].pid}/cgroup") as f:
            mline = [ln for ln in f.read().splitlines() if ":memory:" in ln]
        print(
            "sleeper /proc/PID/cgroup memory line:",
            mline,
            "st_ino:",
            os.stat("/sys/fs/cgroup/memory" + mline[0].split(":", 2)[2]).st_ino,
        )
    finally:
        faulter.kill()
        for kid in kids:
            kid.kill()
        for kid in kids + [faulter]:
            kid.wait()


if __name__ == "__main__":
    main()
