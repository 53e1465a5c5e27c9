"""The exporter's side of a test: the shipped dashboard and alert rules as a test reads them
(every PromQL expression, and the metrics each takes a rate of), and a real Prometheus (the
distribution's server) run on a configuration a test writes."""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from memtop.export.metrics import Options
from memtop.export.server import Exporter
from memtop.stream.runner import Runner
from support.fakes import FakeSource, vmscan_batches
from support.paths import ROOT
from support.waits import wait_until

#: seconds Prometheus may take to be ready on a loaded machine (a bound, never asserted)
PROMETHEUS_READY_S = 60.0


def free_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, accept: str = "", timeout: float = 10) -> tuple[int, str, str]:
    """(status, Content-Type, body) of a GET of ``url``."""
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


def scrape_config(target_port: int, rule_files: Sequence[Path] = ()) -> str:
    """prometheus.yml scraping memtop at 127.0.0.1:``target_port`` every second (job ``memtop``),
    evaluating ``rule_files`` every second."""
    rules = "".join(f"  - {r}\n" for r in rule_files)
    return (
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        + (f"rule_files:\n{rules}" if rules else "")
        + "scrape_configs:\n  - job_name: memtop\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
    )


def _ready(api: str) -> bool:
    try:
        return get(f"{api}/-/ready")[0] == 200
    except OSError:  # not listening yet, or still starting (URLError is an OSError)
        return False


@contextmanager
def prometheus(config: str) -> Iterator[str]:
    """A real Prometheus on ``config`` (prometheus.yml's text; files it names are the caller's),
    its storage in a temporary directory: the base URL of its HTTP API once it is ready. Stopped
    and its directory removed on the way out."""
    with tempfile.TemporaryDirectory(prefix="memtop-prom-") as tmp:
        cfg = Path(tmp) / "prometheus.yml"
        cfg.write_text(config)
        port = free_port()
        proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={cfg}",
                f"--storage.tsdb.path={tmp}/data",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        api = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: _ready(api), "prometheus ready", PROMETHEUS_READY_S)
            yield api
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def dashboard_expressions() -> list[tuple[str, str]]:
    """(where, PromQL) for every target of the shipped Grafana dashboard and every shipped
    alerting rule, as written (Grafana's variables left in)."""
    dash = json.loads((ROOT / "contrib/grafana/memtop-dashboard.json").read_text())
    out = [
        (f"panel {p['id']} {p['title']!r}", t["expr"]) for p in dash["panels"] for t in p.get("targets", [])
    ]
    rules = (ROOT / "contrib/prometheus/memtop-alerts.yml").read_text()
    for name, expr in re.findall(r"- alert: (\S+)\n(?:\s+#.*\n)*\s+expr: (\|\n(?:\s{10}.*\n)+|.*\n)", rules):
        out.append((f"rule {name}", expr.removeprefix("|").strip()))
    return out


def rated_metrics(expr: str) -> set[str]:
    """Metric names inside rate(), irate(), increase() or resets(): each must be a counter."""
    return set(re.findall(r"(?:rate|irate|increase|resets)\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)", expr))


def clocked_exporter(ticks: int) -> tuple[Exporter, list[float]]:
    """A served (background) exporter over ``ticks`` batches a second apart, alternating the two
    of ``vmscan_batches`` (a state that moves at every tick), and its clock (``now[0]``, from
    1000 s, moved by the caller)."""
    two = vmscan_batches()
    batches = [dataclasses.replace(two[i % 2], ts_ns=two[0].ts_ns + i * 10**9) for i in range(ticks)]
    runner = Runner(FakeSource(batches), interval_s=1.0, checkpoints=False)
    ex = Exporter(runner, Options(), background=True)
    now = [1000.0]
    ex.clock = lambda: now[0]
    return ex, now
