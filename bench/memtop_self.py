"""Case 4: memtop's own cost as a user runs it (issue 36, "Performance"): the TUI on a real
pseudo-terminal of 160x45 at 1 s refresh, beside htop (and atop, when installed) in the same run,
idle, watching 1,000 live processes (spawned sleepers) and in a fault storm.

    sudo .venv/bin/python bench/memtop_self.py [ROUNDS] [--window S] [--conditions A,B]
        [--against ROOT --label L]

Each round and condition starts memtop (the default probes) on its own terminal and waits for
every probe to be attached or failed (MEMTOP_READY_FILE, which also gives the time to the first
frame and to all probes attached, from memtop's process start), sampling its RssAnon every 50 ms
meanwhile (the peak is the compiler's), and the CPU time memtop had used by its first frame (what
the load stretches into that wall time). Then htop (``-d 10``: 1 s), atop (``1``) and memtop
``--no-bpf`` start, each on a terminal of the same size. Each one's CPU time (every thread's, the
dead ones' too, in nanoseconds: the process's CPU-time clock) is read 60 s after its own start (its first minute, memtop's including the BPF
compilation) and over a common window of ``--window`` seconds after that (steady state, given as
CPU seconds a minute); RssAnon and RssFile at the window's end. Nothing draws to a real screen;
the terminals are drained and their output dropped.

The targets are in bench/report.py; htop's and atop's figures are the same run's, so the load the
shared machine is under moves all of them alike. htop and atop are Debian's packages (`apt-get
install htop atop`, which the bench runs when they are missing); a tool that cannot be installed is
left out of the run and of the report."""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import select
import shutil
import signal
import statistics
import struct
import subprocess
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any

from harness import (
    CONDITIONS,
    QUIET_S,
    VENV_PYTHON,
    load_condition,
    machine,
    memtop_cmd,
    process_cpu_s,
    save,
    status_kb,
)

#: the terminal every program draws on (rows, columns)
SIZE = (45, 160)
#: seconds from a program's start that make its first minute
FIRST_MINUTE_S = 60.0


class OnTerminal:
    """``cmd`` on a pseudo-terminal of SIZE (its controlling terminal), its output drained and
    dropped (a full terminal would block it)."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[0], SIZE[1], 0, 0))
        pid = os.fork()
        if pid == 0:  # child: the program on the terminal
            try:
                os.setsid()
                fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
                for fd in (0, 1, 2):
                    os.dup2(slave, fd)
                os.closerange(3, 4096)
                os.execvpe(cmd[0], cmd, dict(env, TERM="xterm-256color"))
            finally:
                os._exit(127)
        os.close(slave)
        self.pid, self.master = pid, master
        self.status: int | None = None
        self.started = time.monotonic()
        self._done = threading.Event()
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        while not self._done.is_set():
            r, _, _ = select.select([self.master], [], [], 0.1)
            if r:
                try:
                    if not os.read(self.master, 65536):
                        return
                except OSError:
                    return

    def alive(self) -> bool:
        if self.status is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = status
        return self.status is None

    def stop(self) -> None:
        """SIGTERM (memtop detaches its probes on it), SIGKILL if it is still there 15 s later."""
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 15
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        self._done.set()
        self._drainer.join()
        os.close(self.master)


#: the programs run beside memtop: the report's name, Debian's package, the command
BESIDE = (("htop", "htop", ["htop", "-d", "10"]), ("atop", "atop", ["atop", "1"]))


def install_beside() -> None:
    """apt-get installs htop and atop when missing (as bench/export_cost.py does node_exporter);
    one that cannot be installed is left out of the run."""
    missing = [pkg for name, pkg, _ in BESIDE if shutil.which(name) is None]
    if missing:
        subprocess.run(["apt-get", "install", "-y", *missing], check=False, capture_output=True)


def others() -> dict[str, list[str]]:
    """The programs run beside memtop, by the name the report gives them (those installed)."""
    return {name: cmd for name, _, cmd in BESIDE if shutil.which(name)}


def start_memtop(*extra: str) -> tuple[OnTerminal, Path]:
    ready = Path(tempfile.mkdtemp(prefix="memtop-self-")) / "ready"
    env = dict(os.environ, MEMTOP_READY_FILE=str(ready))
    return OnTerminal([*memtop_cmd(), *extra], env), ready


def wait_ready(prog: OnTerminal, ready: Path, peak: list[int]) -> dict[str, Any]:
    """memtop's ready document once written; ``peak``: its largest RssAnon (kB) meanwhile."""
    deadline = time.monotonic() + 120
    while True:
        if not prog.alive():
            raise RuntimeError("memtop exited before it was ready")
        peak[0] = max(peak[0], status_kb(prog.pid, "RssAnon")["RssAnon"])
        try:
            text = ready.read_text()
            if text.endswith("\n"):
                doc: dict[str, Any] = json.loads(text)
                return doc
        except (OSError, ValueError):  # not written yet, or half written
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("memtop did not attach its probes within 120 s")
        time.sleep(0.05)


def sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.monotonic()))


#: ``--against ROOT --label L``: that checkout's memtop (this venv's Python) runs beside the others
#: as "memtop at L", for an A/B in the same run (its CPU and memory, its RssAnon once attached as
#: memtop's; its first frame is not timed)
AGAINST: tuple[str, str] | None = None


def run_condition(window_s: float) -> dict[str, dict[str, float]]:
    """One run of every program in the current condition: {program: figures}."""
    memtop, ready = start_memtop()
    progs: dict[str, OnTerminal] = {"memtop": memtop}
    dirs = [ready.parent]
    out: dict[str, dict[str, float]] = {}
    try:
        peak = [0]
        doc = wait_ready(memtop, ready, peak)
        # the compiler's heap is given back once the probes are attached: a few ticks later
        for _ in range(40):
            peak[0] = max(peak[0], status_kb(memtop.pid, "RssAnon")["RssAnon"])
            time.sleep(0.05)
        out["memtop"] = {
            "first_frame_s": float(doc.get("first_frame_s") or 0),
            # the CPU memtop had used by then: the part of the wall time that is memtop's own
            "first_frame_cpu_s": float(doc.get("first_frame_cpu_s") or 0),
            "all_probes_s": float(doc.get("settled_s") or 0),
            "rss_anon_peak_mib": peak[0] / 1024,
            "rss_anon_attached_mib": status_kb(memtop.pid, "RssAnon")["RssAnon"] / 1024,
        }
        # the others start once memtop's compilations are done, so they do not slow them
        for name, cmd in others().items():
            progs[name] = OnTerminal(cmd, dict(os.environ))
        progs["memtop --no-bpf"], ready_nobpf = start_memtop("--no-bpf")
        dirs.append(ready_nobpf.parent)
        if AGAINST is not None:
            root, label = AGAINST
            # that checkout first on the path (``-m`` would put the working directory, this
            # checkout when run from it, before PYTHONPATH), as bench/startup_ab.py runs it
            code = f"import sys; sys.path.insert(0, {root!r}); from memtop.cli import entry; raise SystemExit(entry())"
            ready_against = Path(tempfile.mkdtemp(prefix="memtop-self-")) / "ready"
            dirs.append(ready_against.parent)
            env = dict(os.environ, PYTHONPATH=root, MEMTOP_READY_FILE=str(ready_against))
            name = f"memtop at {label}"
            progs[name] = OnTerminal([str(VENV_PYTHON), "-c", code], env)
            # its RssAnon once every probe is attached, taken as memtop's is (a few ticks after)
            wait_ready(progs[name], ready_against, [0])
            time.sleep(2.0)
            out[name] = {"rss_anon_attached_mib": status_kb(progs[name].pid, "RssAnon")["RssAnon"] / 1024}
        first: dict[str, float] = {}
        for name, p in sorted(progs.items(), key=lambda kv: kv[1].started):
            sleep_until(p.started + FIRST_MINUTE_S)
            first[name] = process_cpu_s(p.pid)
        c0 = {name: process_cpu_s(p.pid) for name, p in progs.items()}
        t0 = time.monotonic()
        time.sleep(window_s)
        c1 = {name: process_cpu_s(p.pid) for name, p in progs.items()}
        t1 = time.monotonic()
        for name, p in progs.items():
            if not p.alive():
                raise RuntimeError(f"{name} exited during the run")
            mem = status_kb(p.pid, "RssAnon", "RssFile")
            out.setdefault(name, {}).update(
                first_minute_cpu_s=first[name],
                cpu_s_per_min=60 * (c1[name] - c0[name]) / (t1 - t0),
                rss_anon_mib=mem["RssAnon"] / 1024,
                rss_file_mib=mem["RssFile"] / 1024,
            )
        return out
    finally:
        for p in progs.values():
            p.stop()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def main(rounds: int = 3, window_s: float = 60.0, conditions: tuple[str, ...] = CONDITIONS) -> dict[str, Any]:
    install_beside()
    samples: dict[str, dict[str, list[dict[str, float]]]] = {c: {} for c in conditions}
    for _ in range(rounds):
        for condition in conditions:
            # memtop starts 1 s into the condition (as in bench/startup_ab.py): a storm in progress,
            # not its first second; and not right after the previous condition ended (QUIET_S)
            time.sleep(QUIET_S)
            with load_condition(condition, settle_s=1):
                for prog, figures in run_condition(window_s).items():
                    samples[condition].setdefault(prog, []).append(figures)
            print(
                condition,
                {p: {k: round(v, 3) for k, v in s[-1].items()} for p, s in samples[condition].items()},
            )
    summary = {
        cond: {
            prog: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for prog, runs in progs.items()
        }
        for cond, progs in samples.items()
    }
    result: dict[str, Any] = {
        "case": "memtop itself, TUI at 160x45 beside htop and atop",
        "machine": machine(),
        "size": f"{SIZE[1]}x{SIZE[0]}",
        "window_s": window_s,
        "against": AGAINST[1] if AGAINST else None,
        "summary": summary,
        "samples": samples,
    }
    save("memtop_self", result)
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rounds", nargs="?", type=int, default=3)
    ap.add_argument("--window", type=float, default=60.0, help="seconds of the steady window")
    ap.add_argument("--conditions", default=",".join(CONDITIONS), help="of: " + ", ".join(CONDITIONS))
    ap.add_argument("--against", metavar="ROOT", help="another checkout's memtop beside, in the same run")
    ap.add_argument("--label", help="its name in the report (default: ROOT)")
    a = ap.parse_args()
    if a.against:
        AGAINST = (str(Path(a.against).resolve()), a.label or a.against)
    main(a.rounds, a.window, tuple(c.strip() for c in a.conditions.split(",")))
