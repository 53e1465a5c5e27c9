"""Helpers shared by the tests: real pressure (memory cgroup + swap file), C workloads, memtop CLI,
and the records and documents more than one test file builds or compares."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memtop.errors import MemtopError
from memtop.records import Batch, Lost, ProbeStatus
from memtop.records.host import HostFacts, VmStat
from memtop.records.oom import OomKill
from memtop.records.reclaim import ReclaimEvent, ReclaimTotals
from memtop.records.vmscan import VmscanTotals
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


def dashboard_expressions() -> list[tuple[str, str]]:
    """(where, PromQL) for every target of the shipped Grafana dashboard and every shipped
    alerting rule, as written (Grafana's variables left in)."""
    import re

    root = Path(__file__).resolve().parents[1]
    dash = json.loads((root / "contrib/grafana/memtop-dashboard.json").read_text())
    out = [
        (f"panel {p['id']} {p['title']!r}", t["expr"]) for p in dash["panels"] for t in p.get("targets", [])
    ]
    rules = (root / "contrib/prometheus/memtop-alerts.yml").read_text()
    for name, expr in re.findall(r"- alert: (\S+)\n(?:\s+#.*\n)*\s+expr: (\|\n(?:\s{10}.*\n)+|.*\n)", rules):
        out.append((f"rule {name}", expr.removeprefix("|").strip()))
    return out


def rated_metrics(expr: str) -> set[str]:
    """Metric names inside rate(), irate(), increase() or resets(): each must be a counter."""
    import re

    return set(re.findall(r"(?:rate|irate|increase|resets)\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)", expr))


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


def case_lines(lines: Iterable[str]) -> dict[str, tuple[int, int]]:
    """A leaker workload's report (allocfamily, stackwalk): one "<tag> NAME COUNT BYTES" line a
    case up to "done"; NAME -> (COUNT, BYTES)."""
    cases: dict[str, tuple[int, int]] = {}
    for line in lines:
        if line.startswith("done"):
            break
        _, name, n, b = line.split()
        cases[name] = (int(n), int(b))
    return cases


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


# -- memtop on a pseudo-terminal, and the BPF it leaves behind ---------------------------------------


def bpftool(*args: str) -> Any:
    """``bpftool -j ARGS`` parsed (bpftool is installed by setup)."""
    out = subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True, check=True).stdout
    return json.loads(out or "[]")


def prog_ids_of(pid: int) -> set[int]:
    """Ids of the BPF programs ``pid`` holds open (from its fds' fdinfo)."""
    ids: set[int] = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) != "anon_inode:bpf-prog":
                continue
            info = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
        except OSError:
            continue
        for line in info.splitlines():
            if line.startswith("prog_id:"):
                ids.add(int(line.split()[1]))
    return ids


def bpf_left_behind(pid: int, progs: set[int], timeout_s: float = 5.0) -> dict[str, Any]:
    """What the kernel still has of a memtop that was ``pid`` and held ``progs``: its programs
    (bpftool prog), and perf events (tracepoint, perf, uprobe attachments) of that pid or running
    those programs (bpftool perf). Waits (bounded) for the kernel to free them; {} when none."""
    end = time.monotonic() + timeout_s
    while True:
        live = {p["id"] for p in bpftool("prog", "show")} & progs
        perf = [e for e in bpftool("perf") if e.get("pid") == pid or e.get("prog_id") in progs]
        if not live and not perf:
            return {}
        if time.monotonic() > end:
            return {"progs": sorted(live), "perf": perf}
        time.sleep(0.1)


def function_address(pid: int, lib_pattern: str, name: str) -> int:
    """Where ``pid`` has the dynamic symbol ``name`` of its mapped library matching
    ``lib_pattern`` (nm -D: an oracle independent of memtop's own ELF reader). A process just
    started maps its libraries a moment after the fork returns: waited for, up to 10 s."""
    lib, base = "", 0
    deadline = time.monotonic() + 10
    while not lib and time.monotonic() < deadline:
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 6 and lib_pattern in parts[5] and int(parts[2], 16) == 0:
                lib, base = parts[5], int(parts[0].split("-")[0], 16)
                break
        else:
            time.sleep(0.02)
    assert lib, f"{lib_pattern} not mapped by {pid}"
    out = subprocess.run(
        ["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True
    ).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].split("@")[0] == name:
            return base + int(parts[0], 16)
    raise AssertionError(f"{name} not in {lib}")


def code_byte(pid: int, addr: int) -> int:
    """The byte at ``addr`` in ``pid``'s memory: 0xcc (int3) where a uprobe is attached."""
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(addr)
        return f.read(1)[0]


def exit_deadline_hit(pid: int) -> bool:
    """Whether memtop ``pid`` was ended by its exit deadline (it logs every thread's stack then)
    rather than by its own exit path."""
    log = Path("/var/log/memtop/memtop.log")
    try:
        return f"memtop {pid}: exit deadline reached" in log.read_text(errors="replace")
    except OSError:
        return False


class PtyMemtop:
    """memtop as a user runs it, on a real pseudo-terminal. ``controlling``: the pty is its
    controlling terminal (closing the master then sends it SIGHUP and SIGCONT, as a terminal
    window closing does); else the pty is only its stdin/stdout/stderr (closing the master is then
    end of file and EIO alone, no signal). Output is drained in a thread (a full pty would block
    it) and kept in ``output``."""

    def __init__(
        self,
        args: list[str],
        *,
        controlling: bool = True,
        close_stderr: bool = False,
        size: tuple[int, int] = (40, 140),
    ) -> None:
        import fcntl
        import pty
        import struct
        import termios

        self.ready = Path(tempfile.mkdtemp(prefix="memtop-pty-")) / "ready"
        self.output = bytearray()
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
        env = dict(os.environ, MEMTOP_READY_FILE=str(self.ready), TERM="xterm-256color")
        cmd = memtop_cmd() + args
        pid = os.fork()
        if pid == 0:  # child: memtop on the pty
            try:
                os.setsid()
                if controlling:
                    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
                for fd in (0, 1, 2):
                    os.dup2(slave, fd)
                if close_stderr:
                    os.close(2)
                os.closerange(3, 4096)
                os.execve(cmd[0], cmd, env)
            finally:
                os._exit(127)
        os.close(slave)
        self.pid = pid
        self.master = master
        self.status: int | None = None
        self._closing = False
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        import select

        while not self._closing:
            r, _, _ = select.select([self.master], [], [], 0.05)
            if r:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    return
                if not data:
                    return
                self.output += data
        os.close(self.master)

    def wait_ready(self, timeout_s: float = 90) -> dict[str, Any]:
        """The ready document memtop writes once every probe attached or failed."""
        end = time.monotonic() + timeout_s
        while not self.ready.exists():
            assert self.alive(), f"memtop exited before it was ready ({self.status}): {self.text()[-2000:]}"
            assert time.monotonic() < end, "memtop did not attach its probes"
            time.sleep(0.05)
        time.sleep(0.2)
        doc: dict[str, Any] = json.loads(self.ready.read_text())
        return doc

    def send(self, keys: bytes, settle_s: float = 1.0) -> None:
        os.write(self.master, keys)
        time.sleep(settle_s)

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def close_terminal(self) -> None:
        """Close the master side: the terminal is gone (no signal is sent by the test)."""
        self._closing = True
        self._drainer.join()

    def alive(self) -> bool:
        if self.status is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status is None

    def wait_gone(self, timeout_s: float) -> bool:
        """True once memtop has exited (and been reaped) within ``timeout_s``."""
        end = time.monotonic() + timeout_s
        while self.alive():
            if time.monotonic() > end:
                return False
            time.sleep(0.02)
        return True

    def kill(self) -> None:
        if self.alive():
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        if not self._closing:
            self.close_terminal()


@contextmanager
def small_tmpfs(size: str = "64k") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on a fresh directory for the duration (root: skips without):
    a real full disk for the write-failure tests."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    mnt = Path(tempfile.mkdtemp(prefix="memtop-small-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        mnt.rmdir()


def fill(directory: Path, leave_bytes: int = 0, name: str = "filler") -> None:
    """Fill the file system of ``directory`` up to ``leave_bytes`` free, with the file ``name``."""
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    with open(directory / name, "wb") as f:
        f.write(b"\0" * max(0, free - leave_bytes))


class FakeSource:
    """A source for UI tests (memtop.source.Source): hands out the given batches one per poll,
    attaches nothing, and notes the intents it gets. ``mode`` is what the header shows."""

    def __init__(self, batches: list[Batch] | None = None, mode: str = "bpf") -> None:
        self.batches = list(batches or [])
        self._mode = mode
        self.subs: list[Callable[[Batch], None]] = []
        self.focused: list[int] = []
        self.traced: list[list[int]] = []
        self.measured: list[list[int]] = []
        self.declined: list[list[int]] = []
        self.trace_choices: list[int | None] = []
        self.kernel_traced: list[tuple[str, bool]] = []
        #: what watch() was told, in order
        self.watched: list[frozenset[str] | None] = []
        self.closed = False

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def replay(self) -> None:
        return None

    def subscribe(self, fn: Callable[[Batch], None]) -> None:
        self.subs.append(fn)

    async def start(self) -> None:
        return None

    async def poll(self) -> Batch | None:
        if not self.batches:
            return None
        b = self.batches.pop(0)
        for fn in self.subs:
            fn(b)
        return b

    def settled(self) -> bool:
        return True

    async def wait_settled(self, timeout_s: float = 60.0) -> bool:
        return True

    def statuses(self) -> dict[str, ProbeStatus]:
        return {}

    def begin_bpf(self) -> None:
        return None

    def focus(self, pid: int) -> None:
        self.focused.append(pid)

    def unfocus(self, pid: int) -> None:
        if pid in self.focused:
            self.focused.remove(pid)

    def trace_allocations(self, pids: Sequence[int], sample_bytes: int | None = None) -> bool:
        self.traced.append(list(pids))
        self.trace_choices.append(sample_bytes)
        return False

    def measure_allocations(self, pids: Sequence[int]) -> bool:
        self.measured.append(list(pids))
        return False

    def decline_allocations(self, pids: Sequence[int]) -> None:
        self.declined.append(list(pids))

    def trace_kernel(self, tracer: str, on: bool) -> bool:
        self.kernel_traced.append((tracer, on))
        return False

    def watch(self, probes: Collection[str] | None) -> None:
        self.watched.append(None if probes is None else frozenset(probes))

    def stop_attaching(self) -> None:
        return None

    def close(self, wait_s: float = 5.0) -> None:
        self.closed = True

    async def stop(self) -> None:
        self.closed = True


#: host facts of a machine that is not this one (a replay must show these, never the viewer's)
RECORDED_FACTS = HostFacts(
    kernel_release="5.10.0-recorded",
    hostname="recorded-host",
    boot_time_ns=1_700_000_000 * 10**9,
    headers_kind="standin",
    headers_version="5.10.0-99-amd64",
    bpf_error="no BPF on the recorded host",
    bpf_hint="it was a test",
)
