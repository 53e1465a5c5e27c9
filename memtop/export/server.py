"""`memtop export`: the Runner headless with the default probes, its state served as Prometheus
text or OpenMetrics (by the scraper's Accept header) on /metrics, and/or written atomically to a
textfile for node_exporter's textfile collector every interval.

Scrapes run in the HTTP server's threads and read the state under the Runner's lock, so a scrape
never sees half a batch; one scrape builds families at a time (they share running sums). The
server is bounded: at most ``MAX_CLIENTS`` requests in flight (more get 503 at once), a client
that sends nothing or never reads is dropped after ``CLIENT_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socket import AF_INET6
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from memtop import files
from memtop.errors import MemtopError
from memtop.export.metrics import Accumulators, Budget, Options, families
from memtop.runner import Runner
from memtop.source import Source

MAX_CLIENTS = 16
CLIENT_TIMEOUT_S = 10.0
DEFAULT_LISTEN = "127.0.0.1:9479"


def parse_listen(text: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` -> (host, port); MemtopError (exit 2) when malformed."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise MemtopError(f"--listen {text!r}: expected HOST:PORT", "e.g. --listen 127.0.0.1:9479")
    host = host.strip("[]") or "127.0.0.1"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if host != "localhost":
            raise MemtopError(
                f"--listen {text!r}: not an IP address", "give the address to bind, e.g. 0.0.0.0:9479"
            ) from None
    return host, int(port)


class BpfRunTime:
    """Run time per BPF program of this process, from /proc/self/fdinfo, when the kernel counts it
    (``kernel.bpf_stats_enabled=1``); names from bpftool, once per program id."""

    def __init__(self) -> None:
        self._names: dict[int, str] = {}

    @staticmethod
    def enabled() -> bool:
        try:
            return Path("/proc/sys/kernel/bpf_stats_enabled").read_text().strip() == "1"
        except OSError:
            return False

    def _name(self, prog_id: int) -> str:
        if prog_id not in self._names and len(self._names) < 4096:
            name = ""
            tool = shutil.which("bpftool")
            if tool:
                try:
                    out = subprocess.run(
                        [tool, "-j", "prog", "show", "id", str(prog_id)],
                        capture_output=True,
                        timeout=2,
                        check=False,
                    ).stdout
                    name = str(json.loads(out or b"{}").get("name", ""))
                except (OSError, ValueError, subprocess.TimeoutExpired):
                    name = ""
            self._names[prog_id] = name
        return self._names.get(prog_id, "")

    def read(self) -> Iterator[tuple[int, str, int, int]]:
        """(prog id, name, run_time_ns, run_cnt) of each program this process holds."""
        seen: set[int] = set()
        try:
            fds = os.listdir("/proc/self/fd")
        except OSError:
            return
        for fd in fds:
            try:
                if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:bpf-prog":
                    continue
                info = dict(
                    line.split(":", 1)
                    for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines()
                    if ":" in line
                )
                prog_id = int(info["prog_id"])
                if prog_id in seen:
                    continue
                seen.add(prog_id)
                yield (
                    prog_id,
                    self._name(prog_id),
                    int(info.get("run_time_ns", 0)),
                    int(info.get("run_cnt", 0)),
                )
            except (OSError, KeyError, ValueError):
                continue


class Exporter(Collector):
    """The collector the registry asks at each scrape."""

    def __init__(self, runner: Runner, opts: Options) -> None:
        self.runner = runner
        self.opts = opts
        self.acc = Accumulators()
        self._lock = threading.Lock()  # one scrape builds at a time: they share running sums
        self.scrapes = 0
        self.dropped_total = 0
        self.last_duration_s = 0.0
        self.bpf = BpfRunTime()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            t0 = time.perf_counter()
            budget = Budget(self.opts.max_series)
            with self.runner.lock:
                out = [budget.take(f) for f in families(self.runner.state, self.opts, self.acc)]
            self.dropped_total += budget.dropped
            self.scrapes += 1
            out += list(self._self_metrics(budget))
            self.last_duration_s = time.perf_counter() - t0
        yield from out

    def _self_metrics(self, budget: Budget) -> Iterator[Metric]:
        g = GaugeMetricFamily(
            "memtop_exporter_scrape_duration_seconds", "How long building the previous scrape took"
        )
        g.add_metric([], self.last_duration_s)
        yield g
        g = GaugeMetricFamily("memtop_exporter_series", "Series in this scrape (before the self-metrics)")
        g.add_metric([], float(budget.series))
        yield g
        c = CounterMetricFamily(
            "memtop_exporter_series_dropped", "Series left out because the scrape exceeded --max-series"
        )
        c.add_metric([], float(self.dropped_total))
        yield c
        c = CounterMetricFamily("memtop_exporter_scrapes", "Scrapes served")
        c.add_metric([], float(self.scrapes))
        yield c
        if BpfRunTime.enabled():
            run = CounterMetricFamily(
                "memtop_bpf_prog_run_seconds",
                "Time spent running each of memtop's BPF programs (kernel.bpf_stats_enabled=1)",
                labels=["prog", "id"],
            )
            cnt = CounterMetricFamily(
                "memtop_bpf_prog_runs", "Runs of each of memtop's BPF programs", labels=["prog", "id"]
            )
            for prog_id, name, ns, n in self.bpf.read():
                run.add_metric([name, str(prog_id)], ns * 1e-9)
                cnt.add_metric([name, str(prog_id)], float(n))
            yield run
            yield cnt


def registry_for(exporter: Exporter) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(exporter)
    return reg


class _Handler(BaseHTTPRequestHandler):
    server: MetricsServer
    timeout = CLIENT_TIMEOUT_S
    server_version = "memtop-exporter"
    protocol_version = "HTTP/1.0"  # one request per connection: a scraper cannot hold a thread

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        path = urlsplit(self.path).path
        if path == "/metrics":
            encoder, ctype = choose_encoder(self.headers.get("Accept", ""))
            body = encoder(self.server.registry)
            status = 200
        elif path == "/":
            body = (
                b"<html><body><h1>memtop exporter</h1><p><a href='/metrics'>/metrics</a></p></body></html>\n"
            )
            ctype, status = "text/html; charset=utf-8", 200
        else:
            body, ctype, status = b"not found\n", "text/plain; charset=utf-8", 404
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the http.server API
        pass  # a scrape a second is not news


class MetricsServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], registry: CollectorRegistry) -> None:
        if ":" in address[0]:
            self.address_family = AF_INET6
        self.registry = registry
        self._slots = threading.BoundedSemaphore(MAX_CLIENTS)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            try:  # too many in flight: say so at once rather than queue a thread per client
                request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def serve(address: tuple[str, int], registry: CollectorRegistry) -> MetricsServer:
    """Bind (a MemtopError when the address is taken or not ours) and serve in a daemon thread."""
    try:
        server = MetricsServer(address, registry)
    except OSError as exc:
        raise MemtopError(
            f"cannot listen on {address[0]}:{address[1]}: {exc.strerror or exc}",
            "choose another --listen address or port",
        ) from exc
    threading.Thread(target=server.serve_forever, name="memtop-export-http", daemon=True).start()
    return server


async def export(
    source: Source,
    opts: Options,
    *,
    listen: tuple[str, int] | None,
    textfile: str | None,
    interval_s: float = 1.0,
    duration_s: float | None = None,
    force: bool = False,
) -> int:
    """Run until SIGINT/SIGTERM (or ``duration_s``): serve /metrics and/or write ``textfile``
    every interval. A textfile that cannot be written is an error (exit 2)."""
    from memtop.headless import _begin, _stop_on_signals

    if textfile is not None:
        files.check_target(textfile, force=True)
    stop = asyncio.Event()
    undo = _stop_on_signals(stop)
    runner = Runner(source, interval_s=interval_s, checkpoints=False)
    exporter = Exporter(runner, opts)
    registry = registry_for(exporter)
    server = serve(listen, registry) if listen is not None else None
    if server is not None:
        host, port = listen if listen is not None else ("", 0)
        where = f"[{host}]" if ":" in host else host
        sys.stderr.write(f"memtop: serving http://{where}:{port}/metrics\n")
    if textfile is not None:
        sys.stderr.write(f"memtop: writing {textfile} every {interval_s:g} s\n")
    try:
        await _begin(runner, stop, None, ())
        async for n in runner.ticks(stop):
            if textfile is not None:
                files.write_atomic(textfile, generate_latest(registry), force=True)
            if duration_s is not None and (n + 1) * interval_s > duration_s + 1e-9:
                break
    finally:
        undo()
        if server is not None:
            server.shutdown()
            server.server_close()
        await runner.stop()
    return 0
