"""Helpers shared by the tests: real pressure (memory cgroup + swap file), C workloads, memtop CLI,
and the records and documents more than one test file builds or compares."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memtop.errors import MemtopError
from memtop.records import Batch, Lost, ProbeStatus
from memtop.records.oom import OomKill
from memtop.records.system import VmStat
from memtop.records.vmscan import ReclaimEvent, ReclaimTotals, VmscanTotals
from memtop.state import State
from memtop.text import clean
from memtop.views import Options, views

if TYPE_CHECKING:
    from memtop.ui.app import MemtopApp

K = TypeVar("K")
V = TypeVar("V")

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = Path(__file__).resolve().parent / "workloads"
DATA = Path(__file__).resolve().parent / "data"
PROGRAMS = Path(__file__).resolve().parent / "programs.txt"
CG1 = Path("/sys/fs/cgroup/memory")
CG2 = Path("/sys/fs/cgroup")


def missing_programs(listing: Path = PROGRAMS) -> list[tuple[str, str]]:
    """(program, Debian package) for each line of tests/programs.txt not found on this machine."""
    out = []
    for line in listing.read_text().splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        prog, package = fields[0], fields[1]
        found = Path(prog).exists() if prog.startswith("/") else shutil.which(prog) is not None
        if not found:
            out.append((prog, package))
    return out


def bpf_unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "not root"
    try:
        import bcc  # noqa: F401
    except ImportError as exc:
        return f"bcc not importable: {exc}"
    from memtop import headers

    if headers.find_headers().kind == "missing":
        return "no kernel headers"
    return None


def compile_c(name: str, extra: list[str] | None = None) -> Path:
    """Build tests/workloads/<name>.c with frame pointers and debug info; cached per source."""
    src = WORKLOADS / f"{name}.c"
    out_dir = Path(tempfile.gettempdir()) / "memtop-test-bin"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / name
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(
            ["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline", "-o", str(out), str(src)]
            + (extra or []),
            check=True,
        )
    return out


class MemCgroup:
    """A memory cgroup with a limit (v1 where mounted, else v2). Processes join via ``add``."""

    def __init__(self, limit_bytes: int, swap: bool = True) -> None:
        self.name = f"memtop-test-{uuid.uuid4().hex[:8]}"
        self.v1 = (CG1 / "memory.limit_in_bytes").exists()
        self.path = (CG1 if self.v1 else CG2) / self.name
        self.path.mkdir()
        if self.v1:
            (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
            if not swap:
                try:
                    (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
                except OSError:
                    (self.path / "memory.swappiness").write_text("0")
        else:
            (self.path / "memory.max").write_text(str(limit_bytes))
            if not swap:
                (self.path / "memory.swap.max").write_text("0")

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def stat(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for line in (self.path / "memory.stat").read_text().splitlines():
            k, _, v = line.partition(" ")
            out[k] = int(v)
        return out

    def events(self) -> dict[str, int]:
        p = self.path / "memory.events"
        if not p.exists():
            return {}
        return {k: int(v) for k, v in (line.split() for line in p.read_text().splitlines())}

    def remove(self) -> None:
        for _ in range(50):
            try:
                procs = (self.path / "cgroup.procs").read_text().split()
            except OSError:
                return
            for pid in procs:
                try:
                    os.kill(int(pid), 9)
                except ProcessLookupError:
                    pass
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


@contextmanager
def memcg(limit_bytes: int, swap: bool = True) -> Iterator[MemCgroup]:
    cg = MemCgroup(limit_bytes, swap)
    try:
        yield cg
    finally:
        cg.remove()


@contextmanager
def swapfile(size_mib: int = 1024) -> Iterator[Path]:
    """A swap file, on for the duration. Reuses an active swap if the machine already has one."""
    swaps = Path("/proc/swaps").read_text().splitlines()[1:]
    if swaps:
        yield Path(swaps[0].split()[0])
        return
    path = Path(tempfile.gettempdir()) / f"memtop-test-swap-{uuid.uuid4().hex[:6]}"
    subprocess.run(["fallocate", "-l", f"{size_mib}M", str(path)], check=True)
    path.chmod(0o600)
    subprocess.run(["mkswap", str(path)], check=True, capture_output=True)
    subprocess.run(["swapon", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["swapoff", str(path)], check=False)
        path.unlink(missing_ok=True)


@contextmanager
def zram_filesystem(size_mib: int = 128) -> Iterator[Path | None]:
    """An ext4 file system on a new zram device (a synchronous block device: a page read from it
    is there before the reader would sleep), mounted for the duration; None when this kernel has
    no zram-control (mkfs.ext4 is in tests/programs.txt: always here)."""
    control = Path("/sys/class/zram-control")
    if not (control / "hot_add").exists():
        yield None
        return
    num = int((control / "hot_add").read_text())
    dev = Path(f"/sys/block/zram{num}")
    mnt = Path(tempfile.mkdtemp(prefix="memtop-zram-"))
    mounted = False
    try:
        (dev / "disksize").write_text(f"{size_mib}M")
        subprocess.run(["mkfs.ext4", "-q", f"/dev/zram{num}"], check=True, capture_output=True)
        subprocess.run(["mount", f"/dev/zram{num}", str(mnt)], check=True)
        mounted = True
        yield mnt
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], check=False)
        mnt.rmdir()
        (dev / "reset").write_text("1")
        (control / "hot_remove").write_text(str(num))


def memtop_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "memtop"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "memtop"]


def run_snapshot(pane: str, after_s: float, *extra: str, fmt: str = "json", timeout: float = 120) -> Any:
    """Run `memtop snapshot` as a user would and return the parsed document (or text)."""
    out = Path(tempfile.mkdtemp(prefix="memtop-snap-")) / f"snap.{fmt}"
    try:
        proc = subprocess.run(
            memtop_cmd()
            + [
                "snapshot",
                "--pane",
                pane,
                "--format",
                fmt,
                "--output",
                str(out),
                "--after",
                str(after_s),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert proc.returncode == 0, f"memtop snapshot failed ({proc.returncode}): {proc.stderr}"
        text = out.read_text()
        return json.loads(text) if fmt == "json" else text
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


def proc_status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def kb(status: dict[str, str], key: str) -> int:
    return int(status.get(key, "0 kB").split()[0]) * 1024


def proc_stat_faults(pid: int) -> tuple[int, int]:
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[7]), int(fields[9])


def vmstat() -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in Path("/proc/vmstat").read_text().splitlines())}


class PausedWorkload:
    """A test workload started paused ("ready PID"), released with a line on stdin, finished when
    it prints "done", kept alive until closed so its /proc counters can be read."""

    def __init__(self, *cmd: str) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().startswith("ready")
        self.pid = self.proc.pid

    def run(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.startswith("done"), f"workload failed: {line!r} rc={self.proc.poll()}"

    def close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write("bye\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def within(value: float, expected: float, tol: float = 0.05) -> bool:
    """``value`` is within ``tol`` (relative) of ``expected``."""
    return abs(value - expected) <= tol * max(expected, 1)


OOM_KILL = OomKill(
    ts_ns=5_000_000_000,
    victim_pid=4242,
    victim_comm=clean("[red]evil\x07"),
    trigger_pid=99,
    trigger_comm="alloc",
    scope="global",
    total_vm_bytes=3 << 30,
    anon_rss_bytes=2 << 30,
    file_rss_bytes=1 << 20,
    shmem_rss_bytes=0,
    uid=1000,
    oom_score_adj=300,
    pgtables_bytes=4 << 20,
    loadavg=(1.5, 1.0, 0.5),
)


def vmscan_batches() -> list[Batch]:
    """Two ticks of vmscan data as the probe would send them."""
    base = 1_000_000_000_000
    vm = [
        VmStat(
            counters=(
                ("pgscan_kswapd", 0),
                ("pgscan_direct", 0),
                ("pgsteal_kswapd", 0),
                ("pgsteal_direct", 0),
                ("pgscan_anon", 0),
                ("pgsteal_anon", 0),
                ("workingset_refault_anon", 0),
            )
        ),
        VmStat(
            counters=(
                ("pgscan_kswapd", 1000),
                ("pgscan_direct", 200),
                ("pgsteal_kswapd", 600),
                ("pgsteal_direct", 100),
                ("pgscan_anon", 3000),
                ("pgsteal_anon", 1500),
                ("workingset_refault_anon", 40),
            )
        ),
    ]
    t0 = VmscanTotals(
        origins=(("kswapd", 0, 0, 0), ("direct", 0, 0, 0), ("memcg", 0, 0, 0)),
        kswapd_wakes=0,
        kswapd_sleeps=0,
        kcompactd_wakes=0,
        compaction_count=0,
        compaction_total_ns=0,
    )
    t1 = VmscanTotals(
        origins=(("kswapd", 1000, 600, 10), ("direct", 200, 100, 4), ("memcg", 1800, 800, 30)),
        kswapd_wakes=3,
        kswapd_sleeps=2,
        kcompactd_wakes=1,
        compaction_count=2,
        compaction_total_ns=3_000_000,
        compaction_hist=((20, 2),),
        slab=(("super_cache_scan", 5, 50_000, 900), ("deferred_split_scan", 2, 900_000, 0)),
    )
    r1 = ReclaimTotals(
        histogram=(("memcg", 14, 3), ("direct", 20, 1)),
        pids=(
            (4242, "hog\x1b[31m", "memcg", 3, 90_000, 40_000, 96),
            (77, "[bold]x", "direct", 1, 1_500_000, 1_500_000, 32),
        ),
    )
    events = [ReclaimEvent(base + i, 4242, 4242, "hog\x1b[31m", "memcg", 30_000, 32) for i in range(3)]
    events.append(ReclaimEvent(base + 9, 77, 78, "[bold]x", "direct", 1_500_000, 32))
    return [
        Batch(
            base,
            (
                ProbeStatus("vmscan", "attached", "attached in 0.5s"),
                vm[0],
                t0,
                ReclaimTotals(histogram=(), pids=()),
                Lost("vmscan", "events", 0),
            ),
        ),
        Batch(base + 1_000_000_000, (vm[1], t1, r1, *events, Lost("vmscan", "events", 0))),
    ]


def documents(state: State, *pids: int | None) -> dict[str, Any]:
    """Every registered pane's JSON document, as it would be written (JSON round trip): for the
    whole system and for each of ``pids`` (the drill-in needs one; other panes narrow to it). The
    ``source`` field says live or replay by design, so it is left out of the comparison."""
    out: dict[str, Any] = {}
    for name, cls in views().items():
        for pid in (None, *pids):
            try:
                doc = cls().document(state, Options(pid=pid))
            except MemtopError:
                continue  # e.g. the drill-in without a pid
            doc = json.loads(json.dumps(doc))
            doc.pop("source", None)
            out[name if pid is None else f"{name}@{pid}"] = doc
    return out


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two documents differ (paths), for a readable failure."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'replay' if k in a else 'live'}")
            else:
                out += differences(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def force_tick(app: MemtopApp) -> None:
    """One poll of every probe regardless of cadence, applied and drawn as the timer would."""
    from memtop.bridge import Bridge

    source = app.source
    assert isinstance(source, Bridge)
    source.publish(source.poll_sync(force=True))
    if not app.paused:
        app.redraw()


def bracket(kernel: Callable[[], K], ours: Callable[[], V], tries: int = 5) -> tuple[K, V, K]:
    """The kernel's figure, memtop's, and the kernel's again: (before, memtop's, after).

    A value that moves (RSS, PSS, swap, counters of a running process) read once by memtop and
    once by the test is two moments compared as one. Read around memtop's read instead, again
    while the kernel's moved in between (at most ``tries`` times), then check with
    :func:`between`: exact when the kernel's figure held still, bounded by it when it did not."""
    for _ in range(tries):
        before = kernel()
        value = ours()
        after = kernel()
        if before == after:
            break
    return before, value, after


def between(value: float, before: float, after: float) -> bool:
    """``value`` lies between two readings of the kernel's figure (either order)."""
    return min(before, after) <= value <= max(before, after)
