"""Case: `memtop export`'s cost beside node_exporter, in the same run (issues 24 and 35). With
1,000 extra processes and 500 memcgs:

* bytes on the wire per scrape, plain and gzipped (``Accept-Encoding: gzip``, as Prometheus asks),
  and the number of series, of both; target: memtop's gzipped bytes <= node_exporter's gzipped
  size x 5;
* CPU of both at a 15 s scrape interval (memtop at ``--interval 15``, as a deployment sets it to
  its scrape interval; both scraped every 15 s with gzip), % of a core; target: memtop <= 2x
  node_exporter's. Beside it, in the same phase and scraped alike, memtop without ``--interval``
  (its default: the kernel read at the scrapes' pace), and memtop's at ``--interval 1``;
* RssAnon of both once BCC has compiled every program and a few scrapes are done; target: memtop
  <= 40 MiB;
* the same CPU and RssAnon, of both, scraped with Prometheus's own Accept header (OpenMetrics
  first, as Debian's Prometheus 2.42 sends it): what a real deployment pays (the rows above are
  scraped without Accept, the text format 0.0.4);
* scrape latency (HTTP round trip on loopback, gzip) at p50 and p99 of scrapes spaced a tick apart
  (memtop at ``--interval 1``: each tick's exposition is built in the background, and a scrape
  that lands during the tick gets the one before), and of back-to-back scrapes (served from the
  tick's cached exposition); node_exporter's in the same loops; target: p99 <= 25 ms;
* the fault-heavy workload (bench/fault_overhead.py's) bare vs with the exporter running,
  alternated (at least 5 rounds), by the workload's CPU time per fault (where a BPF program on
  the fault path would show: it runs in the faulting task) and by its wall clock; target
  <= 1.03x. And the hooks the exporter's programs are attached to (bpftool perf list).

node_exporter is Debian's ``prometheus-node-exporter`` (apt-get installs it when missing).

With ``--churn [MINUTES]`` instead: RssAnon of the exporter, scraped every second, under process
churn (~60 processes a second, each named anew) for MINUTES (default 7), sampled every 10 s
(results/export_churn.json).

With ``--against MEMTOP [--label NAME]``: another memtop executable's exporter (e.g. an earlier
revision's) runs beside this one's in the 15 s phase, scraped alike: its CPU, RssAnon and gzipped
bytes in the same run.

usage: sudo .venv/bin/python bench/export_cost.py [ROUNDS] [--no-fault] [--against MEMTOP [--label NAME]]
       sudo .venv/bin/python bench/export_cost.py --churn [MINUTES]"""

from __future__ import annotations

import gzip
import json
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from cgroups_cost import many_cgroups
from harness import alternate_all, build, machine, memtop_cmd, nothing, parse_kv, save, stop, summary
from harness import process_cpu_s as cpu_s

NODE_EXPORTER = "prometheus-node-exporter"
MiB = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: what Prometheus 2.42 (Debian's) sends: OpenMetrics first
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def fetch(url: str, gz: bool = True, accept: str = "") -> bytes:
    """The body as sent (still compressed when ``gz``), for ``accept`` (none by default)."""
    headers = {"Accept-Encoding": "gzip"} if gz else {}
    if accept:
        headers["Accept"] = accept
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        return bytes(r.read())


def wait_up(url: str, proc: subprocess.Popen[bytes], marker: bytes, accept: str = "") -> None:
    deadline = time.monotonic() + 300
    body = b""
    while True:
        try:
            body = fetch(url, gz=False, accept=accept)
            if marker in body:
                return
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            stop(proc)
            probes = [line for line in body.splitlines() if line.startswith(b"memtop_probe_up")]
            raise RuntimeError(f"{url} did not come up (rc {proc.returncode}): {probes}")
        time.sleep(0.2)


@contextmanager
def exporter(
    interval: float | None, exe: str | None = None, accept: str = ""
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`memtop export` of this tree, or of the memtop executable ``exe`` (``--against``), waited
    for by scrapes with ``accept``: the phase's own format, so that an exporter only ever
    Prometheus scrapes (a deployment's: the DaemonSet's probes read /, not /metrics) is not also
    holding a text writer's memo for the readiness polls. ``interval`` None: no --interval (the
    kernel read at the scrapes' pace)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            *([exe] if exe else memtop_cmd()),
            "export",
            "--listen",
            f"127.0.0.1:{port}",
            *(("--interval", str(interval)) if interval is not None else ()),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_up(url, proc, b'probe="vmscan",reason="",state="attached"', accept)
        yield proc, url
    finally:
        stop(proc)


def node_exporter_path() -> str:
    path = shutil.which(NODE_EXPORTER)
    if path is None:  # the bench, not CI, may install it
        subprocess.run(["apt-get", "install", "-y", NODE_EXPORTER], check=True, capture_output=True)
        path = shutil.which(NODE_EXPORTER)
    if path is None:
        raise RuntimeError(f"{NODE_EXPORTER} not found")
    return path


@contextmanager
def node_exporter() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    proc = subprocess.Popen(
        [node_exporter_path(), f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_up(url, proc, b"node_memory_MemTotal_bytes")
        yield proc, url
    finally:
        proc.terminate()
        proc.wait()


def rss_anon_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no RssAnon")


def scrape_ms(url: str) -> float:
    t0 = time.perf_counter()
    fetch(url)
    return (time.perf_counter() - t0) * 1e3


def series(body: bytes) -> int:
    return sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(0, min(len(s) - 1, round(q * len(s)) - 1))]


def scraped_as_prometheus(
    out: dict[str, list[float]], node: subprocess.Popen[bytes], node_url: str, against: str | None
) -> None:
    """The 15 s phase again, every exporter scraped with Prometheus' own Accept header
    (OpenMetrics): the format a real deployment asks for, which the phase without Accept never
    builds. Rows ``*_om_*``."""
    with ExitStack() as other:
        them = other.enter_context(exporter(15.0, against, PROMETHEUS_ACCEPT)) if against else None
        with exporter(15.0, accept=PROMETHEUS_ACCEPT) as (proc, url):
            time.sleep(20)
            body = fetch(url, gz=False, accept=PROMETHEUS_ACCEPT)
            assert body.endswith(b"# EOF\n"), "not OpenMetrics"
            out["memtop_om_gzip_bytes"].append(len(fetch(url, accept=PROMETHEUS_ACCEPT)))
            for u in (node_url, *([them[1]] if them is not None else [])):
                fetch(u, accept=PROMETHEUS_ACCEPT)
            c0, n0, t0 = cpu_s(proc.pid), cpu_s(node.pid), time.monotonic()
            a0 = cpu_s(them[0].pid) if them is not None else 0.0
            for _ in range(8):
                fetch(url, accept=PROMETHEUS_ACCEPT)
                fetch(node_url, accept=PROMETHEUS_ACCEPT)
                if them is not None:
                    fetch(them[1], accept=PROMETHEUS_ACCEPT)
                time.sleep(15)
            dt = time.monotonic() - t0
            out["memtop_om_cpu_pct_15s"].append(100 * (cpu_s(proc.pid) - c0) / dt)
            out["node_om_cpu_pct_15s"].append(100 * (cpu_s(node.pid) - n0) / dt)
            out["memtop_om_rss_anon_mib"].append(rss_anon_mib(proc.pid))
            out["node_om_rss_anon_mib"].append(rss_anon_mib(node.pid))
            if them is not None:
                out["against_om_cpu_pct_15s"].append(100 * (cpu_s(them[0].pid) - a0) / dt)
                out["against_om_rss_anon_mib"].append(rss_anon_mib(them[0].pid))


def one_round(out: dict[str, list[float]], against: str | None = None) -> None:
    with node_exporter() as (node, node_url), ExitStack() as other:
        # with --against, the other memtop's exporter runs beside this one in the same 15 s
        # phase, scraped alike: the same machine, the same load, at the same time
        them = other.enter_context(exporter(15.0, against)) if against else None
        # and this tree's without --interval, reading at the scrapes' pace, scraped alike
        paced, paced_url = other.enter_context(exporter(None))
        with exporter(15.0) as (proc, url):
            time.sleep(20)  # steady state: every row read, BCC's compilations done
            for who, u in (("memtop", url), ("node", node_url)):
                plain = fetch(u, gz=False)
                out[f"{who}_bytes"].append(len(plain))
                out[f"{who}_gzip_bytes"].append(len(fetch(u)))
                assert gzip.decompress(fetch(u)).count(b"\n") > 0
                out[f"{who}_series"].append(series(plain))
            if them is not None:
                fetch(them[1])
            fetch(paced_url)
            c0, n0, t0 = cpu_s(proc.pid), cpu_s(node.pid), time.monotonic()
            a0 = cpu_s(them[0].pid) if them is not None else 0.0
            q0 = cpu_s(paced.pid)
            for _ in range(8):  # a Prometheus scraping both every 15 s
                fetch(url)
                fetch(node_url)
                if them is not None:
                    fetch(them[1])
                fetch(paced_url)
                time.sleep(15)
            dt = time.monotonic() - t0
            out["memtop_cpu_pct_15s"].append(100 * (cpu_s(proc.pid) - c0) / dt)
            out["node_cpu_pct_15s"].append(100 * (cpu_s(node.pid) - n0) / dt)
            out["memtop_paced_cpu_pct_15s"].append(100 * (cpu_s(paced.pid) - q0) / dt)
            out["memtop_paced_rss_anon_mib"].append(rss_anon_mib(paced.pid))
            out["memtop_rss_anon_mib"].append(rss_anon_mib(proc.pid))
            out["node_rss_anon_mib"].append(rss_anon_mib(node.pid))
            if them is not None:
                out["against_cpu_pct_15s"].append(100 * (cpu_s(them[0].pid) - a0) / dt)
                out["against_rss_anon_mib"].append(rss_anon_mib(them[0].pid))
                out["against_gzip_bytes"].append(len(fetch(them[1])))
        other.close()
        scraped_as_prometheus(out, node, node_url, against)
        with exporter(1.0) as (proc, url):
            time.sleep(10)
            for _ in range(60):  # a tick apart: each scrape has a new state to show
                out["memtop_scrape_ms"].append(scrape_ms(url))
                out["node_scrape_ms"].append(scrape_ms(node_url))
                time.sleep(1.0)
            for _ in range(200):  # back to back: most from the tick's cached exposition
                out["memtop_cached_scrape_ms"].append(scrape_ms(url))
            c0, t0 = cpu_s(proc.pid), time.monotonic()
            time.sleep(30)
            out["memtop_cpu_pct_1s"].append(100 * (cpu_s(proc.pid) - c0) / (time.monotonic() - t0))
            out["memtop_rss_anon_mib_1s"].append(rss_anon_mib(proc.pid))


def churn(minutes: float) -> dict[str, Any]:
    """RssAnon of `memtop export` (scraped every second) under process churn: ~60 short-lived
    processes a second, each with a name of its own, for ``minutes``; sampled every 10 s."""
    stop_at = time.monotonic() + minutes * 60
    samples: list[tuple[float, float]] = []
    with exporter(1.0) as (proc, url):
        t0 = time.monotonic()
        last = 0.0
        n = 0
        while time.monotonic() < stop_at:
            batch = [
                subprocess.Popen(["sh", "-c", f"printf churn{n}_{j} > /proc/$$/comm; sleep 0.2"])
                for j in range(15)
            ]
            n += 1
            fetch(url)
            for p in batch:
                p.wait()
            if time.monotonic() - last >= 10:
                last = time.monotonic()
                samples.append((round(last - t0, 1), rss_anon_mib(proc.pid)))
    first = samples[min(len(samples) - 1, 3)][1]  # after a warm-up of 30 s
    return {
        "minutes": minutes,
        "processes_started": n * 15,
        "rss_anon_mib": samples,
        "growth_after_warmup_mib": samples[-1][1] - first,
    }


def hooks_of(pid: int) -> list[str]:
    """The kernel hooks process ``pid``'s BPF programs are attached to (bpftool's perf list:
    tracepoints, kprobes, uprobes; a perf event's program shows as its event's fd only)."""
    try:
        out = subprocess.run(["bpftool", "-j", "perf", "list"], capture_output=True, timeout=30, check=True)
        rows = json.loads(out.stdout or b"[]")
    except (OSError, ValueError, subprocess.SubprocessError):
        return []
    return sorted(
        f"{r.get('fd_type', '?')}:{r.get('tracepoint') or r.get('func') or r.get('filename') or '?'}"
        for r in rows
        if r.get("pid") == pid
    )


def fault_case(rounds: int) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """bench/fault_overhead.py's workload, bare and with `memtop export` running, alternated:
    ns per fault by the workload's wall clock and by its own CPU time (user + system, from
    rusage). A BPF program on the fault path runs in the faulting task, so it shows in its CPU
    time; the wall clock also moves with whatever else the shared machine runs (the exporter's
    own ticks among them). And which hooks the exporter's programs are on."""
    exe = build("refault")
    hooks: list[str] = []

    def once() -> dict[str, float]:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        text = subprocess.run([str(exe), "64", "32"], capture_output=True, text=True, check=True).stdout
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        kv = parse_kv(text)
        cpu_s = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
        kv["cpu_ns_per_fault"] = cpu_s * 1e9 / max(1.0, kv.get("faults", 1.0))
        return kv

    @contextmanager
    def running() -> Iterator[None]:
        with exporter(1.0) as (proc, _url):
            if not hooks:
                hooks.extend(hooks_of(proc.pid))
            yield

    samples = alternate_all({"bare": nothing, "exporter": running}, once, rounds=rounds)
    return summary(samples["ns_per_fault"], "bare"), summary(samples["cpu_ns_per_fault"], "bare"), hooks


def main(rounds: int = 3, fault: bool = True, against: str | None = None, label: str = "") -> dict[str, Any]:
    result: dict[str, Any] = {"machine": machine(), "rounds": rounds}
    if against:
        result["against"] = label or against
    out: dict[str, list[float]] = {
        k: []
        for k in (
            "memtop_bytes",
            "memtop_gzip_bytes",
            "memtop_series",
            "node_bytes",
            "node_gzip_bytes",
            "node_series",
            "memtop_cpu_pct_15s",
            "node_cpu_pct_15s",
            "memtop_cpu_pct_1s",
            "memtop_paced_cpu_pct_15s",
            "memtop_paced_rss_anon_mib",
            "memtop_rss_anon_mib",
            "memtop_rss_anon_mib_1s",
            "node_rss_anon_mib",
            "memtop_scrape_ms",
            "node_scrape_ms",
            "memtop_cached_scrape_ms",
            "memtop_om_gzip_bytes",
            "memtop_om_cpu_pct_15s",
            "memtop_om_rss_anon_mib",
            "node_om_cpu_pct_15s",
            "node_om_rss_anon_mib",
            *(("against_cpu_pct_15s", "against_rss_anon_mib", "against_gzip_bytes") if against else ()),
            *(("against_om_cpu_pct_15s", "against_om_rss_anon_mib") if against else ()),
        )
    }
    with many_cgroups(500):  # 500 sleepers, each in a memcg of its own
        sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(500)]  # 1,000 processes
        try:
            for _ in range(rounds):
                one_round(out, against)
        finally:
            for p in sleepers:
                p.kill()
                p.wait()
    for k, v in out.items():
        if k.endswith("scrape_ms"):
            result[f"{k}_p50"] = statistics.median(v)
            result[f"{k}_p99"] = pct(v, 0.99)
        else:
            result[k] = statistics.median(v)
    # the names the report read before issue 35
    result["scrape_ms_p50"] = result["memtop_scrape_ms_p50"]
    result["scrape_ms_p99"] = result["memtop_scrape_ms_p99"]
    result["series"] = int(result["memtop_series"])
    result["cpu_pct_15s"] = result["memtop_cpu_pct_15s"]
    result["cpu_pct_1s"] = result["memtop_cpu_pct_1s"]

    if fault:
        result["fault"], result["fault_cpu"], result["fault_hooks"] = fault_case(max(rounds, 5))
    save("export_cost", result)
    return result


if __name__ == "__main__":
    argv = sys.argv[1:]
    opts: dict[str, str] = {}
    for flag in ("--against", "--label"):  # --against MEMTOP [--label NAME]
        if flag in argv:
            i = argv.index(flag)
            opts[flag] = argv[i + 1]
            del argv[i : i + 2]
    args = [a for a in argv if not a.startswith("--")]
    if "--churn" in argv:  # alone: minutes (default 7, as the report that RssAnon grew)
        res = churn(float(args[0]) if args else 7.0)
        save("export_churn", {"machine": machine(), **res})
        print(json.dumps(res, indent=1))
    else:
        res = main(
            int(args[0]) if args else 3,
            fault="--no-fault" not in argv,
            against=opts.get("--against"),
            label=opts.get("--label", ""),
        )
        print(json.dumps(res, indent=1))
