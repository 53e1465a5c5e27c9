"""Case: `memtop export`'s cost (issue 24). With 1,000 processes and 500 cgroups:

* a scrape's time (HTTP round trip on loopback, Prometheus text), p50 and p99 over 200 scrapes,
  target <= 50 ms at p99;
* the exporter's CPU at a 15 s scrape interval (memtop reading the kernel every 15 s too, as a
  deployment would set --interval to its scrape interval), target <= 1 % of a core; beside it the
  same at memtop's default 1 s;
* the fault-heavy workload (bench/fault_overhead.py's) bare vs with the exporter running,
  alternated, target <= 1.03x.

usage: sudo .venv/bin/python bench/export_cost.py [ROUNDS]"""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cgroups_cost import many_cgroups
from harness import alternate, build, machine, memtop_cmd, nothing, parse_kv, save, stop, summary
from memtop_self import cpu_s


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def exporter(interval: float) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    proc = subprocess.Popen(
        [*memtop_cmd(), "export", "--listen", f"127.0.0.1:{port}", "--interval", str(interval)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if b'probe="vmscan",reason="",state="attached"' in r.read():
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError("memtop export did not come up")
        time.sleep(0.2)
    try:
        yield proc, url
    finally:
        stop(proc)


def scrape_ms(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=10) as r:
        r.read()
    return (time.perf_counter() - t0) * 1e3


def main(rounds: int = 3) -> dict[str, Any]:
    result: dict[str, Any] = {"machine": machine(), "rounds": rounds}
    scrapes: list[float] = []
    cpu15: list[float] = []
    cpu1: list[float] = []
    series = 0
    with many_cgroups(500):  # 500 sleepers, each in a memcg of its own
        sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(500)]  # 1,000 processes
        try:
            for _ in range(rounds):
                with exporter(1.0) as (proc, url):
                    time.sleep(15)  # steady state (every row read)
                    for _ in range(200):
                        scrapes.append(scrape_ms(url))
                    with urllib.request.urlopen(url) as r:
                        series = sum(1 for line in r.read().decode().splitlines() if line and line[0] != "#")
                    c0, t0 = cpu_s(proc.pid), time.monotonic()
                    time.sleep(30)
                    cpu1.append(100 * (cpu_s(proc.pid) - c0) / (time.monotonic() - t0))
                with exporter(15.0) as (proc, url):
                    time.sleep(20)
                    c0, t0 = cpu_s(proc.pid), time.monotonic()
                    for _ in range(4):  # a Prometheus scraping every 15 s
                        scrape_ms(url)
                        time.sleep(15)
                    cpu15.append(100 * (cpu_s(proc.pid) - c0) / (time.monotonic() - t0))
        finally:
            for p in sleepers:
                p.kill()
                p.wait()
    scrapes.sort()
    result["scrape_ms_p50"] = statistics.median(scrapes)
    result["scrape_ms_p99"] = scrapes[int(len(scrapes) * 0.99) - 1]
    result["series"] = series
    result["cpu_pct_15s"] = statistics.median(cpu15)
    result["cpu_pct_1s"] = statistics.median(cpu1)

    exe = build("refault")

    def once() -> dict[str, float]:
        out = subprocess.run([str(exe), "64", "32"], capture_output=True, text=True, check=True).stdout
        return parse_kv(out)

    @contextmanager
    def running() -> Iterator[None]:
        with exporter(1.0):
            yield

    samples = alternate({"bare": nothing, "exporter": running}, once, "ns_per_fault", rounds=rounds)
    result["fault"] = summary(samples, "bare")
    save("export_cost", result)
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3), indent=1))
