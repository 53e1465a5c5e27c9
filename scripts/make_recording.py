#!/usr/bin/env python3
"""Make the recordings checked into tests/data/ (run as root, on a machine with swap):

* ``pressure.jsonl.gz`` (default): what ``make screenshots`` renders. A memory cgroup limited to
  100 MiB with swap, a workload touching 300 MiB in it (reclaim, swap-outs, swap-in waits), a
  leaking process, and a burst that hits the cgroup's limit without swap room (an OOM kill); the
  default probes plus the drill-in probes on the workload and the memleak probe on the leaker,
  whichever of those this memtop has.
* ``--cgroups``: ``cgroups.jsonl.gz``, the same workloads for 20 s, what the cgroups pane's
  snapshots and screenshot render (the workload's memcg also has a cgroup2 twin on a hybrid
  machine, so its PSI shows).
* ``--kernel``: ``kernel.jsonl.gz``, 20 s of the default probes with slab tracing and page
  allocation counting on, while a workload stats missing names (negative dentries: the dentry
  cache grows) and makes and holds pipes, what the Kernel pane's snapshots render.
* ``--shared``: ``shared.jsonl.gz``, what the Shared pane's snapshots render: System V segments
  (one orphaned), a /dev/shm file, memfds, a small hugetlb pool in use, a madvised THP region and
  a compaction run (tests/workloads/shmwork.c), for 15 s; everything is removed after.
* ``--pagecache``: ``pagecache.jsonl.gz``, what the Page cache pane's screenshot and snapshots
  render: the default probes with ``--cache-path`` a tree of its own under /var/tmp, 144 MiB of
  files read in a loop inside a 96 MiB memory cgroup (evictions, refaults, thrashing, an owner),
  a log written and left dirty, a file a process holds open, for 20 s; everything removed after.
* ``--compat``: ``recording-1.0.jsonl.gz``, a short recording kept forever to prove that every
  later memtop still loads schema 1.0 (do not regenerate it once released).

The workload pids go into the header (``"workloads"``) so the screenshot script knows whom to
drill into.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support import compile_c, memcg, swapfile  # noqa: E402

from memtop.probes.base import Probe  # noqa: E402
from memtop.probes.registry import default_probes  # noqa: E402
from memtop.stream.bridge import Bridge  # noqa: E402
from memtop.stream.recording import open_recorder  # noqa: E402

MiB = 1 << 20


def optional_probe(module: str, cls: str, *args: Any) -> Probe | None:
    """A probe from another pane's module if this memtop has it (the script outlives panes)."""
    try:
        mod = importlib.import_module(module)
        probe = getattr(mod, cls)(*args)
        if not isinstance(probe, Probe):
            raise TypeError("not a probe")
        return probe
    except (ImportError, AttributeError, TypeError) as exc:
        print(f"  (no {module}.{cls}: {exc})", file=sys.stderr)
        return None


def start(cmd: list[str], cg: Any) -> subprocess.Popen[str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, preexec_fn=lambda: cg.add(os.getpid()))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        raise SystemExit(f"{cmd[0]} did not start: {line!r}")
    return proc


async def session(
    out: Path,
    duration_s: float,
    interval_s: float,
    hog_pid: int,
    leak_pid: int,
    oom_at_s: float | None,
    oom_cg: Any,
) -> None:
    probes = default_probes()
    extra: list[Probe | None] = [
        optional_probe("memtop.probes.smaps", "SmapsProbe", hog_pid),
        optional_probe("memtop.probes.faultstack", "FaultStackProbe", hog_pid),
        optional_probe("memtop.probes.growth", "GrowthProbe", leak_pid),
        optional_probe("memtop.probes.leaks", "LeaksProbe", [leak_pid]),
    ]
    bridge = Bridge(probes + [p for p in extra if p is not None])
    await bridge.start()
    await bridge.wait_settled(300)
    for st in bridge.statuses().values():
        print(f"  {st.probe}: {st.state} {st.message}", file=sys.stderr)
    statuses = list(bridge.statuses().values())
    rec = open_recorder(
        out,
        statuses,
        force=True,
        interval_s=interval_s,
        mode=bridge.mode,
        prelude=statuses,
        extra={"workloads": {"hog": hog_pid, "leak": leak_pid}},
    )
    bridge.subscribe(rec)
    oom: subprocess.Popen[str] | None = None
    try:
        t0 = time.monotonic()
        ticks = 0
        while time.monotonic() - t0 < duration_s:
            await bridge.poll()
            ticks += 1
            if oom_at_s is not None and oom is None and time.monotonic() - t0 >= oom_at_s:
                # 200 MiB into a 64 MiB cgroup without swap: the kernel's OOM killer ends it
                oom = subprocess.Popen(
                    [str(compile_c("rec_hog")), "200"],
                    stdout=subprocess.DEVNULL,
                    text=True,
                    preexec_fn=lambda: oom_cg.add(os.getpid()),
                )
            await asyncio.sleep(max(0.0, t0 + ticks * interval_s - time.monotonic()))
    finally:
        rec.close("done")
        await bridge.stop()
        if oom is not None:
            oom.kill()
            oom.wait()
    print(f"{out}: {rec.batches} batches, {rec.records} records, {out.stat().st_size} bytes", file=sys.stderr)


KERNEL_WORKLOAD = """
import os, sys, tempfile, time
d = tempfile.mkdtemp(prefix="memtop-rec-")
pipes = []
print("ready", d, flush=True)
i = 0
t0 = time.monotonic()
while time.monotonic() - t0 < float(sys.argv[1]):
    for _ in range(2000):
        try:
            os.stat(os.path.join(d, f"missing-{i}"))
        except FileNotFoundError:
            pass
        i += 1
    if len(pipes) < 2000:
        pipes += [os.pipe() for _ in range(100)]
    time.sleep(0.05)
os.rmdir(d)
"""


async def record_ticks(
    bridge: Bridge,
    out: Path,
    duration_s: float,
    interval_s: float,
    *,
    extra: dict[str, Any] | None = None,
    steps: Sequence[Callable[[], None]] = (),
) -> None:
    """Record ``bridge`` (started and settled) into ``out`` for ``duration_s``, a poll every
    ``interval_s``; ``steps[k]`` runs before the k-th poll. The bridge is stopped after."""
    statuses = list(bridge.statuses().values())
    for st in statuses:
        print(f"  {st.probe}: {st.state} {st.message}", file=sys.stderr)
    rec = open_recorder(
        out, statuses, force=True, interval_s=interval_s, mode=bridge.mode, prelude=statuses, extra=extra
    )
    bridge.subscribe(rec)
    try:
        t0 = time.monotonic()
        ticks = 0
        while time.monotonic() - t0 < duration_s:
            if ticks < len(steps):
                steps[ticks]()
            await bridge.poll()
            ticks += 1
            await asyncio.sleep(max(0.0, t0 + ticks * interval_s - time.monotonic()))
    finally:
        rec.close("done")
        await bridge.stop()
    print(f"{out}: {rec.batches} batches, {rec.records} records, {out.stat().st_size} bytes", file=sys.stderr)


async def kernel_session(out: Path, duration_s: float, interval_s: float) -> None:
    """The Kernel pane's recording: default probes, slab tracing and page allocations by order on,
    and a workload growing the dentry cache and holding pipes."""
    extra = [
        optional_probe("memtop.probes.slabtrace", "SlabTraceProbe"),
        optional_probe("memtop.probes.pagealloc", "PageAllocProbe"),
    ]
    bridge = Bridge(default_probes() + [p for p in extra if p is not None])
    await bridge.start()
    await bridge.wait_settled(300)
    work = subprocess.Popen(
        [sys.executable, "-c", KERNEL_WORKLOAD, str(duration_s + 5)], stdout=subprocess.PIPE, text=True
    )
    assert work.stdout is not None
    ready = work.stdout.readline().split()
    assert ready[0] == "ready"
    scratch = Path(ready[1])
    try:
        await record_ticks(bridge, out, duration_s, interval_s, extra={"workloads": {"kernel": work.pid}})
    finally:
        work.kill()
        work.wait()
        shutil.rmtree(scratch, ignore_errors=True)


PAGECACHE_READER = """
import os, sys, time
d, until = sys.argv[1], time.monotonic() + float(sys.argv[2])
print("ready", flush=True)
while time.monotonic() < until:
    for n in sorted(os.listdir(d)):
        with open(os.path.join(d, n), "rb", buffering=0) as f:
            while f.read(1 << 20):
                pass
    time.sleep(0.2)
"""

PAGECACHE_HOLDER = """
import os, sys, time
f = open(sys.argv[1], "rb")
f.read()
log = open(sys.argv[2], "ab")
print("ready", flush=True)
until = time.monotonic() + float(sys.argv[3])
while time.monotonic() < until:
    log.write(os.urandom(256 << 10))  # left dirty until the flusher writes it
    log.flush()
    time.sleep(0.5)
"""


def pagecache_recording(out: Path, duration_s: float, interval_s: float) -> int:
    """The Page cache pane's recording (see the module's doc)."""
    tree = Path("/var/tmp") / f"memtop-rec-pagecache-{os.getpid()}"
    (tree / "data").mkdir(parents=True)
    try:
        chunk = os.urandom(MiB)
        for i in range(6):
            with open(tree / "data" / f"part-{i}.bin", "wb") as f:
                for _ in range(24):
                    f.write(chunk)
        (tree / "index.db").write_bytes(os.urandom(8 * MiB))
        subprocess.run(["sync"], check=True)
        for p in tree.rglob("*.bin"):
            fd = os.open(p, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        py = sys.executable
        with memcg(96 * MiB, swap=False) as cg:
            reader = start([py, "-c", PAGECACHE_READER, str(tree / "data"), str(duration_s + 10)], cg)
            holder = subprocess.Popen(
                [
                    py,
                    "-c",
                    PAGECACHE_HOLDER,
                    str(tree / "index.db"),
                    str(tree / "app.log"),
                    str(duration_s + 10),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert holder.stdout is not None and holder.stdout.readline().startswith("ready")
            try:
                asyncio.run(pagecache_session(out, duration_s, interval_s, tree, reader.pid))
            finally:
                for proc in (reader, holder):
                    proc.kill()
                    proc.wait()
                for p in tree.rglob("*"):
                    if p.is_file():  # no page left charged to the memcg being removed
                        fd = os.open(p, os.O_RDONLY)
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                        os.close(fd)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    return 0


async def pagecache_session(out: Path, duration_s: float, interval_s: float, tree: Path, reader: int) -> None:
    from memtop.probes.pagecache import PagecacheinfoProbe

    probes = default_probes()
    for p in probes:
        if isinstance(p, PagecacheinfoProbe):
            p.configure((str(tree),))
    bridge = Bridge(probes)
    await bridge.start()
    await bridge.wait_settled(300)
    await record_ticks(bridge, out, duration_s, interval_s, extra={"workloads": {"pagecache": reader}})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compat", action="store_true", help="make tests/data/recording-1.0.jsonl.gz")
    ap.add_argument("--cgroups", action="store_true", help="make tests/data/cgroups.jsonl.gz")
    ap.add_argument("--kernel", action="store_true", help="make tests/data/kernel.jsonl.gz")
    ap.add_argument("--shared", action="store_true", help="make tests/data/shared.jsonl.gz")
    ap.add_argument("--pagecache", action="store_true", help="make tests/data/pagecache.jsonl.gz")
    ap.add_argument("--output")
    ap.add_argument("--duration", type=float)
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("make_recording.py needs root (BPF, cgroups)")
    if args.pagecache:
        return pagecache_recording(
            Path(args.output or ROOT / "tests/data/pagecache.jsonl.gz"), args.duration or 20.0, args.interval
        )
    if args.shared:
        return shared_recording(
            Path(args.output or ROOT / "tests/data/shared.jsonl.gz"), args.duration or 15.0
        )
    out = Path(
        args.output
        or ROOT
        / "tests/data"
        / (
            "recording-1.0.jsonl.gz"
            if args.compat
            else "cgroups.jsonl.gz"
            if args.cgroups
            else "pressure.jsonl.gz"
        )
    )
    duration = args.duration or (6.0 if args.compat else 20.0 if args.cgroups or args.kernel else 40.0)
    interval = args.interval if not args.compat else 0.5
    if args.kernel:
        asyncio.run(
            kernel_session(Path(args.output or ROOT / "tests/data/kernel.jsonl.gz"), duration, interval)
        )
        return 0
    hog_exe, leak_exe = compile_c("rec_hog"), compile_c("rec_leak")
    with swapfile(), memcg(100 * MiB, swap=True) as cg, memcg(64 * MiB, swap=False) as oom_cg:
        hog = start([str(hog_exe), "300"], cg)
        leak = start([str(leak_exe), "65536"], cg)
        twin = unified_twin(cg.name) if args.cgroups else None
        if twin is not None:
            for p in (hog, leak):
                (twin / "cgroup.procs").write_text(str(p.pid))
        try:
            asyncio.run(
                session(
                    out,
                    duration,
                    interval,
                    hog.pid,
                    leak.pid,
                    None if args.compat else duration * 0.6,
                    oom_cg,
                )
            )
        finally:
            for p in (hog, leak):
                p.kill()
                p.wait()
            if twin is not None:
                for _ in range(50):
                    try:
                        twin.rmdir()
                        break
                    except OSError:
                        time.sleep(0.1)
    return 0


def shared_recording(out: Path, duration_s: float) -> int:
    """The Shared pane's recording: the default probes while shmwork creates, attaches, detaches
    and removes segments (one left orphaned), memfds, a /dev/shm file, hugetlb pages and a THP
    region, and the machine compacts memory. The pool, THP mode and files are restored after."""
    import ctypes

    work = subprocess.Popen(
        [str(compile_c("shmwork"))], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert work.stdin is not None and work.stdout is not None
    assert work.stdout.readline().startswith("ready")

    def do(cmd: str) -> list[str]:
        assert work.stdin is not None and work.stdout is not None
        work.stdin.write(cmd + "\n")
        work.stdin.flush()
        answer = work.stdout.readline().split()
        if not answer or answer[0] != "ok":
            raise SystemExit(f"shmwork {cmd!r}: {answer}")
        return answer[1:]

    nr = Path("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    nr_before, thp_before = nr.read_text().strip(), thp.read_text()
    shm_file = Path("/dev/shm/memtop-recording")
    segments: list[int] = []
    steps = [
        lambda: segments.append(int(do("get 0x6d656d01 8388608")[0])),
        lambda: segments.append(int(do("get 0x6d656d02 4194304")[0])),
        lambda: segments.append(int(do("get 0x6d656d03 2097152")[0])),
        lambda: [do(f"at {s}") for s in segments],
        lambda: do(f"dt {segments[1]}"),
        lambda: (do(f"dt {segments[2]}"), do(f"rm {segments[2]}")),
        lambda: (do("memfd wayland-buffer 6291456 1"), do("memfd jit-code 1048576 0")),
        lambda: shm_file.write_bytes(b"\x01" * (3 * MiB)),
        lambda: os.chown(shm_file, 65534, 65534),
        lambda: (nr.write_text(str(int(nr_before) + 4)), do("huge 2")),
        lambda: "[never]" in thp_before and thp.write_text("madvise"),
        lambda: do("thp 8"),
        lambda: do("frag 64"),
        lambda: Path("/proc/sys/vm/compact_memory").write_text("1"),
    ]
    try:
        asyncio.run(shared_session(out, duration_s, steps))
    finally:
        work.kill()
        work.wait()
        libc = ctypes.CDLL(None, use_errno=True)
        for s in segments:
            libc.shmctl(s, 0, None)  # IPC_RMID
        shm_file.unlink(missing_ok=True)
        nr.write_text(nr_before)
        if "[never]" in thp_before:
            thp.write_text("never")
    return 0


async def shared_session(out: Path, duration_s: float, steps: list[Any]) -> None:
    probes = default_probes()
    for p in probes:
        if p.name == "sharedinfo":
            # /dev/shm only: the machine's other tmpfs mounts are its own business, not a fixture's
            p.mounts = ("/dev/shm",)  # type: ignore[attr-defined]
    bridge = Bridge(probes)
    await bridge.start()
    bridge.trace_kernel("shmsnoop", True)  # as the pane shown does: its calls are in the pictures
    await bridge.wait_settled(300)
    await record_ticks(bridge, out, duration_s, 1.0, steps=steps)


def unified_twin(name: str) -> Path | None:
    """On a hybrid machine, the cgroup2 directory of the same name as a v1 memcg (where its PSI is
    measured), created; None elsewhere."""
    from memtop.linux import cgroupfs

    lay = cgroupfs.layout()
    if lay.mode != "hybrid" or lay.unified is None:
        return None
    d = Path(lay.unified.mountpoint) / name
    d.mkdir()
    return d


if __name__ == "__main__":
    raise SystemExit(main())
