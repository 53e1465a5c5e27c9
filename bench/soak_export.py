"""Soak of `memtop export` (issue 35, "a week in a day"): the exporter left running under process
churn, memcgs coming and going (some named with ESC/OSC sequences and with a \\xff byte), a scrape
every second, and the cgroups probe made to fail and recover, cycle after cycle. Hours, not CI:
``--minutes`` (default 240).

Each minute is one cycle: plain and ESC-named memcgs come and go all the time; from 20 to 30 s a
memcg named with a byte that is not UTF-8 exists (it broke the cgroups probe before issue 35's
string fixes; whether it still does is reported), from 40 to 50 s a container memcg whose runtime
config is nested too deeply to parse (a real cause of a failing poll, from a file under a runtime
root of the soak's own). Reported: the exporter's RssAnon every 10 s (growth after warm-up), every
scrape (served or not, its time), each probe state seen, for each cause how often the probe was
seen erroring and how long it took to be attached again once the cause was gone, and scrapes that
served ``container_*`` while the cgroups probe was not measuring (must be none).

usage: sudo .venv/bin/python bench/soak_export.py [--minutes N] [--warmup-minutes M]
writes bench/results/soak_export.json"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from harness import BENCH, VENV_PYTHON, machine, save, status_kb  # noqa: E402

from memtop.probes.cgroups import CgroupsProbe  # noqa: E402

CG1 = Path("/sys/fs/cgroup/memory")
RUNTIME_ENV = "MEMTOP_SOAK_RUNTIME_ROOT"
#: set: the exporter runs under tracemalloc and writes heap reports there (bench/tracemem.py)
PROFILE_ENV = "MEMTOP_SOAK_PROFILE"
#: a container id of this run's own
CID = f"{os.getpid():08x}".rjust(64, "d")
CYCLE_S = 60.0
#: (cause, from, to) within each cycle, in seconds
WINDOWS = (("name_xff", 20.0, 30.0), ("runtime_json", 40.0, 50.0))
#: other labels (the exporter's `node`) may come before, between and after these three
UP = re.compile(
    r'^memtop_probe_up\{(?:[a-z_]+="(?:[^"\\]|\\.)*",)*probe="([^"]+)",reason="((?:[^"\\]|\\.)*)",'
    r'state="([^"]+)"(?:,[a-z_]+="(?:[^"\\]|\\.)*")*\} (\S+)$',
    re.M,
)


class SoakCgroupsProbe(CgroupsProbe):
    """The cgroups probe reading container names from the soak's runtime root (where its
    unparsable config lives) instead of /: the one knob the soak changes in the exporter."""

    @classmethod
    def at_start(cls, proc_root: str | os.PathLike[str]) -> SoakCgroupsProbe:
        return cls(str(proc_root), runtime_root=os.environ[RUNTIME_ENV])


def child(argv: list[str]) -> int:
    """The exporter, as `memtop export` runs, with the cgroups probe above."""
    from memtop.cli import main
    from memtop.probes import registry

    registry.PROBES["cgroups"] = ("soak_export:SoakCgroupsProbe", registry.AT_START)
    profile = os.environ.get(PROFILE_ENV)
    if profile:
        import tracemalloc

        from tracemem import reporter

        Path(profile).mkdir(parents=True, exist_ok=True)
        tracemalloc.start(12)
        threading.Thread(target=reporter, args=(Path(profile), 30.0, 60.0), daemon=True).start()
    return main(argv)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Churn:
    """Processes coming and going (about ``alive`` at a time, each living 1-6 s, plus a burst of
    short-lived forks every 10 s) and memcgs coming and going (one every 3 s, each living 15 s;
    a third named with an OSC title sequence)."""

    def __init__(self, alive: int = 40) -> None:
        self.alive = alive
        self.stop = threading.Event()
        self.spawned = 0
        self.memcgs_made = 0
        self.memcgs_removed = 0
        self._procs: list[tuple[float, subprocess.Popen[bytes]]] = []
        self._memcgs: list[tuple[float, bytes]] = []
        self._threads = [threading.Thread(target=self._run, daemon=True)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _run(self) -> None:
        rng = random.Random(35)
        next_memcg = next_burst = 0.0
        i = 0
        while not self.stop.is_set():
            now = time.monotonic()
            self._procs = [(end, p) for end, p in self._procs if p.poll() is None]
            while len(self._procs) < self.alive:
                life = rng.uniform(1.0, 6.0)
                self._procs.append((now + life, subprocess.Popen(["sleep", f"{life:.3f}"])))
                self.spawned += 1
            if now >= next_burst:
                next_burst = now + 10.0
                for _ in range(200):
                    subprocess.Popen(["true"]).wait()
                    self.spawned += 1
            if now >= next_memcg:
                next_memcg = now + 3.0
                i += 1
                name = f"memtop-soakx-{os.getpid()}-{i}".encode()
                if i % 3 == 0:
                    name += b"-\x1b]0;owned\x07\x1b[31m"
                path = bytes(CG1) + b"/" + name
                try:
                    os.mkdir(path)
                    self._memcgs.append((now + 15.0, path))
                    self.memcgs_made += 1
                except OSError:
                    pass
            for end, path in [m for m in self._memcgs if m[0] <= now]:
                if rmdir(path):
                    self._memcgs.remove((end, path))
                    self.memcgs_removed += 1
            self.stop.wait(0.2)

    def close(self) -> None:
        self.stop.set()
        for t in self._threads:
            # never started when the exporter failed to come up
            if t.is_alive():
                t.join(timeout=10)
        for _, p in self._procs:
            p.kill()
            p.wait()
        self._procs = []
        left = []
        for end, path in self._memcgs:
            if rmdir(path):
                self.memcgs_removed += 1
            else:
                left.append((end, path))
        self._memcgs = left


def rmdir(path: bytes | Path) -> bool:
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


class Causes:
    """The two causes of a failing cgroups poll, switched on and off on the cycle's windows."""

    def __init__(self, runtime: Path) -> None:
        self.base = CG1 / f"memtop-soakx-{os.getpid()}-causes"
        self.base.mkdir()
        self.xff = bytes(self.base) + b"/x\xff"
        self.docker = self.base / f"docker-{CID}.scope"
        cfg = runtime / "var/lib/docker/containers" / CID / "config.v2.json"
        cfg.parent.mkdir(parents=True)
        cfg.write_text("[" * 200_000)
        self.on: dict[str, bool] = {"name_xff": False, "runtime_json": False}

    def set(self, cause: str, on: bool) -> None:
        if self.on[cause] == on:
            return
        path: bytes | Path = self.xff if cause == "name_xff" else self.docker
        if on:
            os.mkdir(path)
        else:
            for _ in range(100):  # a memcg just left by a process may be busy a moment
                if rmdir(path):
                    break
                time.sleep(0.1)
        self.on[cause] = on

    def close(self) -> None:
        for cause in self.on:
            self.set(cause, False)
        rmdir(self.base)


def scrape(url: str) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            body = r.read().decode("utf-8", "replace")
            return r.status, body, (time.perf_counter() - t0) * 1e3
    except urllib.error.HTTPError as exc:
        return exc.code, "", (time.perf_counter() - t0) * 1e3
    except OSError as exc:
        return 0, str(exc), (time.perf_counter() - t0) * 1e3


def probe_states(body: str) -> dict[str, tuple[str, float, str]]:
    """probe -> (state, up, reason) from a scrape."""
    return {m.group(1): (m.group(3), float(m.group(4)), m.group(2)) for m in UP.finditer(body)}


def wait_up(url: str, exporter: subprocess.Popen[bytes]) -> None:
    """Until the exporter answers with its cgroups and vmscan probes attached (3 minutes at most)."""
    deadline = time.monotonic() + 180
    while True:
        status, body, _ = scrape(url)
        st = probe_states(body)
        if (
            status == 200
            and st.get("cgroups", ("",))[0] == "attached"
            and st.get("vmscan", ("",))[0] == "attached"
        ):
            return
        if exporter.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("memtop export did not come up")
        time.sleep(0.5)


def observe(
    body: str,
    causes: Causes,
    states_seen: dict[str, dict[str, int]],
    per_cause: dict[str, dict[str, Any]],
    cycle_seen: dict[str, bool],
    pending: dict[str, float],
) -> int:
    """Note what one served scrape says of the probes (the states seen, each cause's erroring
    and recovery); 1 when it served container_* while the cgroups probe was not measuring."""
    st = probe_states(body)
    for probe, (state, _, _) in st.items():
        states_seen.setdefault(probe, {})
        states_seen[probe][state] = states_seen[probe].get(state, 0) + 1
    cg_state, _, reason = st.get("cgroups", ("absent", 0.0, ""))
    for name in causes.on:
        if causes.on[name] and cg_state == "erroring":
            cycle_seen[name] = True
            if len(per_cause[name]["reasons"]) < 3 and reason not in per_cause[name]["reasons"]:
                per_cause[name]["reasons"].append(reason)
    for name, off_at in list(pending.items()):
        if cg_state == "attached":
            per_cause[name]["recovered_s"].append(round(time.monotonic() - off_at, 1))
            del pending[name]
    return int(cg_state != "attached" and re.search(r"^container_\w+\{", body, re.M) is not None)


def main(minutes: float = 240.0, warmup_minutes: float = 2.0, profile: str | None = None) -> dict[str, Any]:
    duration = minutes * 60.0
    tmp = Path(tempfile.mkdtemp(prefix="memtop-soak-export-"))
    runtime = tmp / "runtime"
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    env = dict(os.environ, **{RUNTIME_ENV: str(runtime)})
    if profile:
        env[PROFILE_ENV] = profile
    python = str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable
    # its stderr to a file: a pipe nobody reads for hours would fill and block it
    err_path = tmp / "stderr"
    with err_path.open("wb") as err:
        exporter = subprocess.Popen(
            [python, str(BENCH / "soak_export.py"), "--child", "export", "--listen", f"127.0.0.1:{port}"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    churn = Churn()
    causes: Causes | None = None
    scrapes: list[tuple[float, int, float]] = []  # (t, status, ms)
    failures: list[str] = []
    rss: list[tuple[float, dict[str, int]]] = []
    states_seen: dict[str, dict[str, int]] = {}
    stale_served = 0
    # per cause: cycles it was on, cycles the probe was seen erroring, seconds from off to attached
    per_cause: dict[str, dict[str, Any]] = {
        c: {"cycles": 0, "seen_erroring": 0, "recovered_s": [], "not_recovered": 0, "reasons": []}
        for c, _, _ in WINDOWS
    }
    pending: dict[str, float] = {}  # cause -> when it went off, until the probe is attached again
    try:
        wait_up(url, exporter)
        causes = Causes(runtime)
        churn.start()
        t0 = time.monotonic()
        next_rss = 0.0
        cycle_seen: dict[str, bool] = {}
        while (t := time.monotonic() - t0) < duration and exporter.poll() is None:
            phase = t % CYCLE_S
            for cause, start, end in WINDOWS:
                on = start <= phase < end
                if on and not causes.on[cause]:
                    per_cause[cause]["cycles"] += 1
                    cycle_seen[cause] = False
                    pending.pop(cause, None)
                if not on and causes.on[cause]:
                    pending[cause] = time.monotonic()
                    if cycle_seen.get(cause):
                        per_cause[cause]["seen_erroring"] += 1
                causes.set(cause, on)
            status, body, ms = scrape(url)
            scrapes.append((t, status, ms))
            if status != 200:
                failures.append(f"{t:.0f}s: {status} {body[:120]}")
            else:
                stale_served += observe(body, causes, states_seen, per_cause, cycle_seen, pending)
            if t >= next_rss:
                next_rss += 10.0
                sample = status_kb(exporter.pid, "RssAnon", "RssFile", "VmRSS")
                # what the machine held then (other work shares it: a step in RssAnon with a
                # step here is the exporter holding more rows, not a leak)
                sample["memcgs"] = sum(len(dirs) for _, dirs, _ in os.walk(CG1))
                sample["processes"] = sum(1 for d in os.listdir("/proc") if d.isdigit())
                rss.append((round(t, 1), sample))
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t0 - t)))
        # the causes are gone: every probe attached again (the backoff is at most a minute)
        if causes is not None:
            for name in causes.on:
                if causes.on[name]:
                    pending[name] = time.monotonic()
                causes.set(name, False)
        churn.close()
        end_states: dict[str, tuple[str, float, str]] = {}
        settle = time.monotonic() + 130
        while time.monotonic() < settle:
            status, body, _ = scrape(url)
            end_states = probe_states(body)
            if status == 200 and all(s == "attached" for s, _, _ in end_states.values() if s != "detached"):
                break
            time.sleep(1.0)
        for name in pending:
            if end_states.get("cgroups", ("",))[0] == "attached":
                per_cause[name]["recovered_s"].append(round(time.monotonic() - pending[name], 1))
            else:
                per_cause[name]["not_recovered"] += 1
        exporter.send_signal(signal.SIGTERM)
        code = exporter.wait(timeout=30)
    finally:
        churn.close()
        if causes is not None:
            causes.close()
        if exporter.poll() is None:
            exporter.kill()
            exporter.wait()
        stderr = err_path.read_text("utf-8", "replace") if err_path.exists() else ""
        shutil.rmtree(tmp, ignore_errors=True)
    warm = [s["RssAnon"] for t, s in rss if t >= warmup_minutes * 60]
    head, tail = warm[:3], warm[-3:]
    growth_mib = (statistics.median(tail) - statistics.median(head)) / 1024 if len(warm) >= 6 else 0.0
    served = [ms for _, status, ms in scrapes if status == 200]
    served.sort()
    result: dict[str, Any] = {
        "case": "soak_export",
        "machine": machine(),
        "minutes": minutes,
        "warmup_minutes": warmup_minutes,
        "exit_code": code,
        "scrapes": len(scrapes),
        "scrapes_served": len(served),
        "scrape_failures": failures[:20],
        "scrape_ms_p50": statistics.median(served) if served else None,
        "scrape_ms_p99": served[max(0, int(len(served) * 0.99) - 1)] if served else None,
        "stale_container_scrapes": stale_served,
        "rss_anon_after_warmup_kib": warm[0] if warm else None,
        "rss_anon_end_kib": warm[-1] if warm else None,
        "rss_anon_max_kib": max(warm) if warm else None,
        "rss_anon_growth_after_warmup_mib": round(growth_mib, 2),
        "causes": per_cause,
        "probe_states_seen": states_seen,
        "end_states": {p: s for p, (s, _, _) in end_states.items()},
        "processes_spawned": churn.spawned,
        "memcgs_made": churn.memcgs_made,
        "memcgs_removed": churn.memcgs_removed,
        "stderr_lines": len(stderr.splitlines()),
        "stderr_tail": stderr.splitlines()[-40:],
        "rss_samples": rss,
    }
    save("soak_export", result)
    return result


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2:]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=240.0)
    ap.add_argument("--warmup-minutes", type=float, default=2.0)
    ap.add_argument("--profile", metavar="DIR", help="run the exporter under tracemalloc, reports in DIR")
    args = ap.parse_args()
    r = main(args.minutes, args.warmup_minutes, args.profile)
    print({k: v for k, v in r.items() if k != "rss_samples"})
