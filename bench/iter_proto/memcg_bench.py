"""CPU of one cgroup-iterator read of N v1 memcgs vs N held memory.usage_in_bytes preads
(what memtop does every reading), median of 20 rounds, one run."""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from memcg_check import ROOT, attach, read  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500


def main() -> None:
    made = [f"{ROOT}/iterproto_b{i}" for i in range(N)]
    for d in made:
        os.makedirs(d, exist_ok=True)
    held = [os.open(f"{d}/memory.usage_in_bytes", os.O_RDONLY | os.O_CLOEXEC) for d in made]
    try:
        lfd = attach()
        res: dict[str, list[float]] = {"iter read + parse": [], "held usage pread x N": []}
        for _ in range(20):
            a = time.thread_time()
            read(lfd)
            b = time.thread_time()
            for fd in held:
                int(os.pread(fd, 64, 0))
            c = time.thread_time()
            res["iter read + parse"].append((b - a) * 1e6)
            res["held usage pread x N"].append((c - b) * 1e6)
        total = len(read(lfd))
        print(f"{N} memcgs made ({total} in the walk), median of 20, thread_time us")
        for k, v in res.items():
            m = statistics.median(v)
            print(f"  {k:24s} {m:8.0f} us ({m / N:5.2f} us/memcg)")
    finally:
        for fd in held:
            os.close(fd)
        for d in made:
            os.rmdir(d)


if __name__ == "__main__":
    main()
