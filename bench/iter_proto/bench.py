"""CPU of one bpf_iter/task read of every process vs memtop's /proc reads (one run, A/B).

Run as root with the iterator pinned (see README.md). Prints medians of 20 rounds of
time.thread_time() (user+sys of the reading thread) around each way.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from iterread import parse, read_raw  # noqa: E402

PIN = sys.argv[1] if len(sys.argv) > 1 else "/sys/fs/bpf/iterproto_task"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
ROUNDS = 20


def t(fn) -> float:  # type: ignore[no-untyped-def]
    a = time.thread_time()
    fn()
    return (time.thread_time() - a) * 1e6


def main() -> None:
    kids = [subprocess.Popen(["sleep", "3600"]) for _ in range(N)]
    pids = [k.pid for k in kids]
    held = [os.open(f"/proc/{p}/schedstat", os.O_RDONLY | os.O_CLOEXEC) for p in pids]
    try:
        time.sleep(0.5)

        def it_raw() -> None:
            read_raw(PIN)

        def it_parse() -> None:
            parse(read_raw(PIN))

        def schedstat() -> None:
            pread = os.pread
            for fd in held:
                pread(fd, 128, 0).split()

        def full() -> None:
            for p in pids:
                for name in ("stat", "status"):
                    fd = os.open(f"/proc/{p}/{name}", os.O_RDONLY | os.O_CLOEXEC)
                    try:
                        os.read(fd, 4096).split()
                    finally:
                        os.close(fd)

        ways = {
            "iter read (raw)": it_raw,
            "iter read + parse": it_parse,
            "held schedstat pread x N": schedstat,
            "open/read stat+status x N": full,
        }
        res: dict[str, list[float]] = {k: [] for k in ways}
        for _ in range(ROUNDS):  # interleaved so load drifts hit every way alike
            for k, fn in ways.items():
                res[k].append(t(fn))
        ntasks = len(read_raw(PIN)) // 96
        base = statistics.median(res["iter read + parse"])
        print(f"{N} sleepers, {ntasks} tasks in the iterator's walk, median of {ROUNDS}, thread_time us")
        for k, v in res.items():
            m = statistics.median(v)
            print(f"  {k:28s} {m:9.0f} us  ({m / N:5.2f} us/process, x{m / base:4.1f} of iter+parse)")
    finally:
        for fd in held:
            os.close(fd)
        for kid in kids:
            kid.kill()
        for kid in kids:
            kid.wait()


if __name__ == "__main__":
    main()
