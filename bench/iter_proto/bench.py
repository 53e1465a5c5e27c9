"""CPU of one bpf_iter/task read of every process vs memtop's /proc reads (one run, A/B).

Run as root with the iterator pinned (see README.md). Prints medians of 20 rounds of
time.thread_time() (user+sys of the reading thread) around each way.
"""

from __future__ import annotations

import functools
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(__file__))
from iterread import REC, parse, read_raw  # noqa: E402

PINS = (sys.argv[1] if len(sys.argv) > 1 else "/sys/fs/bpf/iterproto_task").split(",")
PIN = PINS[0]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
ROUNDS = 20


LEADERS = "/sys/fs/bpf/iterproto_task_leaders"


def leaders() -> None:
    {r[0]: r for r in REC.iter_unpack(read_raw(LEADERS))}


def read_raw_only(path: str) -> None:
    read_raw(path)


def t(fn) -> float:  # type: ignore[no-untyped-def]
    a = time.thread_time()
    fn()
    return (time.thread_time() - a) * 1e6


def build_ways(pids: list[int], held: list[int]) -> dict[str, Callable[[], None]]:
    def it_raw() -> None:
        read_raw(PIN)

    def it_parse() -> None:
        parse(read_raw(PIN))

    def schedstat() -> None:
        pread = os.pread
        for fd in held:
            try:
                pread(fd, 128, 0).split()
            except OSError:
                pass

    def full() -> None:
        for p in pids:
            for name in ("stat", "status"):
                try:
                    fd = os.open(f"/proc/{p}/{name}", os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    os.read(fd, 4096).split()
                finally:
                    os.close(fd)

    ways: dict[str, Callable[[], None]] = {"iter read (raw)": it_raw, "iter read + parse": it_parse}
    for extra in PINS[1:]:
        ways[f"raw {os.path.basename(extra)}"] = functools.partial(read_raw_only, extra)
    if os.path.exists(LEADERS):  # one row per process, threads summed in the kernel
        ways["leaders read + tuples"] = leaders
    ways |= {"held schedstat pread x P": schedstat, "open/read stat+status x P": full}
    return ways


def main() -> None:
    kids = [subprocess.Popen(["sleep", "3600"]) for _ in range(N)]
    time.sleep(0.5)
    # every process of the system, as memtop reads them all (other people's too)
    pids, held = [], []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                held.append(os.open(f"/proc/{name}/schedstat", os.O_RDONLY | os.O_CLOEXEC))
                pids.append(int(name))
            except OSError:
                pass
    try:
        time.sleep(0.5)

        ways = build_ways(pids, held)
        res: dict[str, list[float]] = {k: [] for k in ways}
        order = list(ways)
        for _ in range(ROUNDS):  # interleaved, in a shuffled order: drifts and cache hit all alike
            random.shuffle(order)
            for k in order:
                res[k].append(t(ways[k]))
        ntasks = len(read_raw(PIN)) // 96
        P = len(pids)
        base = statistics.median(res["iter read + parse"])
        print(
            f"{N} sleepers of ours, P={P} processes on the system, {ntasks} tasks (threads) in the"
            f" iterator's walk; median of {ROUNDS}, thread_time us"
        )
        for k, v in res.items():
            m = statistics.median(v)
            print(f"  {k:28s} {m:9.0f} us  ({m / P:5.2f} us/process, x{m / base:4.1f} of iter+parse)")
    finally:
        for fd in held:
            os.close(fd)
        for kid in kids:
            kid.kill()
        for kid in kids:
            kid.wait()


if __name__ == "__main__":
    main()
