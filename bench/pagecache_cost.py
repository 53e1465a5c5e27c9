"""Case: the Page cache pane's cost (issue 37: with 10,000 open files and 100,000 files under
--cache-path, a full refresh <= 1 s of CPU and <= 2 % of a core at steady state; a read-heavy
workload <= 1.03x with the default probes).

* in process, the pane's work: a child holds 10,000 open files (4 KiB each, cached) and 100,000
  more lie under a --cache-path directory; the pagecacheinfo probe's first poll (the scan of every
  process's fds and maps, the walk, cachestat of every file), in a PID namespace with its own
  /proc (this case's processes only, not the shared machine's), with the state's apply and the view's
  document is the full refresh (CPU seconds of this process); then 30 ticks at steady state (the
  mean CPU ms per tick is the share of a core at a 1 s refresh); beside it, the floor: the
  same files opened, cachestat'ed and closed in a bare loop (what the system calls alone cost
  on this machine now: the refresh's ratio to it holds when the machine is busy);
* a read-heavy workload: ``cat`` of a tree of 256 cached files of 1 MiB, 8 times (the CPU time
  of the children: user + system), bare and with the pagecache probe (filemap tracepoints)
  attached; and the same tree read cold (dropped with posix_fadvise(DONTNEED) first), where every
  page read fires the add tracepoint and every drop the delete one (ns per page).

usage: sudo .venv/bin/python bench/pagecache_cost.py [ROUNDS]"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import alternate, machine, nothing, save, summary

from memtop.probes.pagecache import PagecacheinfoProbe, PagecacheProbe, cachestat
from memtop.records import Batch, ProbeStatus
from memtop.state import State
from memtop.views import get_view

OPEN_FILES = 10_000
PATH_FILES = 100_000
TREE_FILES = 256
MiB = 1 << 20
BASE = Path("/var/tmp") / f"memtop-pcache-bench-{os.getpid()}"


def make_files(d: Path, n: int, size: int, per_dir: int = 1000) -> list[Path]:
    out = []
    data = os.urandom(size)
    for i in range(n):
        sub = d / f"d{i // per_dir:04d}"
        if i % per_dir == 0:
            sub.mkdir(parents=True, exist_ok=True)
        p = sub / f"f{i:06d}"
        p.write_bytes(data)
        out.append(p)
    return out


@contextmanager
def holder(files: list[Path]) -> Iterator[subprocess.Popen[str]]:
    """A child holding every file of ``files`` open (its fd limit raised first)."""
    listing = BASE / "open-list"
    listing.write_text("\n".join(map(str, files)))
    code = (
        "import resource,sys\n"
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({len(files) + 256}, {len(files) + 256}))\n"
        f"fs=[open(p,'rb') for p in open({str(listing)!r}).read().split()]\n"
        "print('ready', flush=True); sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    try:
        yield child
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()


def pane_cpu(paths: tuple[str, ...], ticks: int = 30) -> dict[str, float]:
    probe = PagecacheinfoProbe(paths=paths)
    probe.load()
    state = State(mode="bpf")
    view = get_view("pagecache")
    opts = view.default_options()
    ts = time.monotonic_ns()
    c0 = time.process_time()
    recs = probe.poll()
    c1 = time.process_time()
    state.apply(Batch(ts, (ProbeStatus("pagecacheinfo", "attached"), *recs)))
    c2 = time.process_time()
    doc = view.document(state, opts)
    c3 = time.process_time()
    per: list[float] = []
    for i in range(1, ticks + 1):
        t0 = time.process_time()
        recs = probe.poll()
        state.apply(Batch(ts + i * 1_000_000_000, tuple(recs)))
        view.document(state, opts)
        per.append((time.process_time() - t0) * 1e3)
        time.sleep(0.02)
    return {
        "full_refresh_cpu_s": c3 - c0,
        "full_poll_cpu_s": c1 - c0,
        "full_apply_cpu_s": c2 - c1,
        "full_document_cpu_s": c3 - c2,
        "files_known": float(doc["scope"]["files_known"] or 0),
        # every process's fds are scanned: on a shared machine others' can outnumber the bench's
        "fds_seen": float(doc["scope"]["fds_seen"] or 0),
        "processes": float(doc["scope"]["processes"] or 0),
        "scan_s": probe.last_scan_s,
        "walk_s": probe.last_walk_s,
        "steady_tick_ms_mean": statistics.fmean(per),
        "steady_tick_ms_max": max(per),
        "per_file_us": probe.per_file_s * 1e6,
    }


def files(d: Path, n: int, per_dir: int = 1000) -> list[Path]:
    """The names :func:`make_files` gave."""
    return [d / f"d{i // per_dir:04d}" / f"f{i:06d}" for i in range(n)]


def pane_rounds(rounds: int) -> list[dict[str, float]]:
    """The pane's full refresh and steady ticks ``rounds`` times (the figures are medians: the
    machine is shared), each beside the bare loop's floor, the files held by a child."""
    opened, walked = files(BASE / "open", OPEN_FILES), files(BASE / "walk", PATH_FILES)
    ticks = []
    with holder(opened):
        for _ in range(rounds):
            ticks.append(pane_cpu((str(BASE / "walk"),)))
            ticks[-1]["syscall_floor_cpu_s"] = syscall_floor(opened + walked)
    return ticks


def syscall_floor(paths: list[Path]) -> float:
    """CPU seconds of a bare loop opening, cachestat'ing and closing every file of ``paths``."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOATIME
    names = [str(p) for p in paths]
    t0 = time.process_time()
    for name in names:
        fd = os.open(name, flags)
        cachestat(fd)
        os.close(fd)
    return time.process_time() - t0


def child_cpu_ms(cmd: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1e3


@contextmanager
def activity_probe() -> Iterator[PagecacheProbe]:
    probe = PagecacheProbe()
    probe.load()
    try:
        yield probe
    finally:
        probe.poll()
        probe.close()


def main(rounds: int = 5) -> dict[str, Any]:
    BASE.mkdir()
    try:
        tree = BASE / "tree"
        tree_files = make_files(tree, TREE_FILES, MiB, per_dir=64)
        cat = ["sh", "-c", f"for i in 1 2 3 4 5 6 7 8; do find {tree} -type f -exec cat {{}} + ; done"]

        def warm() -> dict[str, float]:
            return {"cpu_ms": child_cpu_ms(cat)}

        drop = [sys.executable, "-c", DROP, str(tree)]

        def cold() -> dict[str, float]:
            # 8 times: the tree dropped, then read (adds) and dropped again next round (deletes)
            total = 0.0
            for _ in range(4):
                child_cpu_ms(drop)
                total += child_cpu_ms(["sh", "-c", f"find {tree} -type f -exec cat {{}} + > /dev/null"])
            pages = 4 * TREE_FILES * MiB // os.sysconf("SC_PAGE_SIZE")
            return {"ns_per_page": total * 1e6 / pages}

        child_cpu_ms(cat)  # cached before the first round
        variants = {"bare": nothing, "pagecache probe": activity_probe}
        warm_s = alternate(variants, warm, "cpu_ms", rounds=rounds)
        cold_s = alternate(variants, cold, "ns_per_page", rounds=rounds)
        shutil.rmtree(tree)
        del tree_files

        make_files(BASE / "open", OPEN_FILES, 4096)
        make_files(BASE / "walk", PATH_FILES, 4096)
        # in a PID namespace with a /proc of its own: the scan sees this case's processes only,
        # not what else the shared machine runs (other users' 30,000 fds were most of a figure)
        pane = subprocess.run(
            [
                "unshare",
                "--pid",
                "--fork",
                "--mount-proc",
                sys.executable,
                __file__,
                "--pane",
                str(BASE),
                str(rounds),
            ],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        ticks: list[dict[str, float]] = json.loads(pane.stdout.splitlines()[-1])
        tick = {k: statistics.median(t[k] for t in ticks) for k in ticks[0]}
    finally:
        shutil.rmtree(BASE, ignore_errors=True)
    result: dict[str, Any] = {
        "machine": machine(),
        "rounds": rounds,
        "open_files": OPEN_FILES,
        "path_files": PATH_FILES,
        "tree_files": TREE_FILES,
        "pane": tick,
        #: the scan saw this case's processes only (a PID namespace with its own /proc)
        "pane_own_pid_namespace": True,
        "steady_cpu_pct": tick["steady_tick_ms_mean"] / 10,
        "read_warm": summary(warm_s, "bare"),
        "read_cold": summary(cold_s, "bare"),
    }
    save("pagecache_cost", result)
    return result


#: drops every file under a directory from the page cache
DROP = """
import os, sys
for d, _, names in os.walk(sys.argv[1]):
    for n in names:
        fd = os.open(os.path.join(d, n), os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
"""


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--pane":  # main's child, in its PID namespace
        BASE = Path(sys.argv[2])
        print(json.dumps(pane_rounds(int(sys.argv[3]))))
    else:
        print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5), indent=1))
