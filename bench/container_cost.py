"""memtop export in its container image beside memtop export on the host, in the same run (issue
41): the image's size, and the containerised exporter's CPU and memory against the host-run one's,
both at the DaemonSet's interval, both scraped every 15 s as Prometheus would. The container runs
with the DaemonSet's own capabilities and mounts (tests/support/daemonset.py reads them from
contrib/kubernetes). Also the container's cgroup's peak memory (BCC's compile included), which the
DaemonSet's memory limit must stay above.

    sudo .venv/bin/python bench/container_cost.py [--minutes 5] [--image TAG]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import ROOT, machine, memtop_cmd, save, status_kb  # noqa: E402
from support.daemonset import PODMAN, daemonset, pod_options  # noqa: E402

SCRAPE_S = 15.0
WINDOWS = 5
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            return 'probe="vmscan",reason="",state="attached"' in r.read().decode()
    except OSError:
        return False


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def wait_attached(port: int, what: str) -> None:
    deadline = time.monotonic() + 180
    while not scrape(port):
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: probes not attached within 180 s")
        time.sleep(1)


def image_size(tag: str) -> int:
    out = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Size}}", tag],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--image", help="an image already built (default: build one now)")
    args = ap.parse_args()
    tag = args.image or f"localhost/memtop-bench:{uuid.uuid4().hex[:8]}"
    if not args.image:
        subprocess.run(["bash", str(ROOT / "scripts" / "container_image.sh"), "--base", tag], check=True)
    size = image_size(tag)
    ds = daemonset()
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    name = f"memtop-bench-{uuid.uuid4().hex[:8]}"
    host_port, ctr_port = free_port(), free_port()
    host = subprocess.Popen(
        [*memtop_cmd(), "export", "--listen", f"127.0.0.1:{host_port}", *c["args"][2:]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with tempfile.TemporaryDirectory(prefix="memtop-bench-") as empty:
            subprocess.run(
                [
                    "podman",
                    "run",
                    "-d",
                    *PODMAN,
                    "--name",
                    name,
                    *pod_options(ds, Path(empty)),
                    "-p",
                    f"127.0.0.1:{ctr_port}:9479",
                    tag,
                    *c["args"],
                ],
                check=True,
                capture_output=True,
            )
            try:
                cid = subprocess.run(
                    ["podman", "inspect", "-f", "{{.Id}}", name], capture_output=True, text=True, check=True
                ).stdout.strip()
                ctr_pid = int(
                    subprocess.run(
                        ["podman", "inspect", "-f", "{{.State.Pid}}", name],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                )
                wait_attached(host_port, "host exporter")
                wait_attached(ctr_port, "container exporter")
                time.sleep(SCRAPE_S)  # past start-up: BCC's compiles, the first walks
                window_s = args.minutes * 60 / WINDOWS
                host_s, ctr_s, host_pct, ctr_pct = [], [], [], []
                for _ in range(WINDOWS):
                    h0, c0, t0 = cpu_s(host.pid), cpu_s(ctr_pid), time.monotonic()
                    while time.monotonic() - t0 < window_s:
                        scrape(host_port)
                        scrape(ctr_port)
                        time.sleep(SCRAPE_S)
                    dt = time.monotonic() - t0
                    h, c_ = cpu_s(host.pid) - h0, cpu_s(ctr_pid) - c0
                    host_pct.append(100 * h / dt)
                    ctr_pct.append(100 * c_ / dt)
                    host_s.append(h)
                    ctr_s.append(c_)
                hk = status_kb(host.pid, "VmRSS", "RssAnon")
                ck = status_kb(ctr_pid, "VmRSS", "RssAnon")
                peak = Path(f"/sys/fs/cgroup/memory/libpod_parent/libpod-{cid}/memory.max_usage_in_bytes")
                peak_bytes = int(peak.read_text()) if peak.exists() else None
            finally:
                subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True)
    finally:
        host.terminate()
        host.wait(timeout=30)
        if not args.image:
            subprocess.run(["podman", "rmi", "-f", tag], capture_output=True)
    result: dict[str, object] = {
        "case": "container_cost",
        "machine": machine(),
        "minutes": args.minutes,
        "interval_args": c["args"][2:],
        "image_bytes": size,
        "host_cpu_pct": statistics.mean(host_pct),
        "container_cpu_pct": statistics.mean(ctr_pct),
        # the whole run's CPU time, not a median of per-window ratios: a window's figure is a few
        # dozen clock ticks, too coarse for a 5 % comparison
        "cpu_ratio": sum(ctr_s) / sum(host_s),
        "host_cpu_s": host_s,
        "container_cpu_s": ctr_s,
        "host_rss_kib": hk["VmRSS"],
        "container_rss_kib": ck["VmRSS"],
        "host_rss_anon_kib": hk["RssAnon"],
        "container_rss_anon_kib": ck["RssAnon"],
        "rss_ratio": ck["VmRSS"] / hk["VmRSS"],
        "rss_anon_ratio": ck["RssAnon"] / hk["RssAnon"],
        "container_peak_bytes": peak_bytes,
    }
    print(result)
    save("container_cost", result)


if __name__ == "__main__":
    main()
