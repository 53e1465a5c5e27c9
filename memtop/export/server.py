"""`memtop export`: the Runner headless with the default probes, its state served as Prometheus
text or OpenMetrics (by the scraper's Accept header, gzip-compressed when it accepts that) on
/metrics, and/or written atomically to a textfile for node_exporter's textfile collector every
interval.

The exposition is built at most once per batch the Runner applies (under the Runner's lock, so
never half a batch) and served as the same bytes to every scrape until the next: Prometheus
replicas, a dashboard and a curl cost one build. Only the exporter's own counters are fresh at
each scrape. The HTTP side (deadlines, connection limits, client errors) is ``memtop.export.http``.
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
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from memtop.core.errors import MemtopError
from memtop.export.http import HttpServer, Request, Response, Stats, accepts_gzip
from memtop.export.metrics import Accumulators, Budget, Options, families
from memtop.export.node import with_node
from memtop.export.textfile import Textfile
from memtop.stream.runner import Runner
from memtop.stream.source import Source

DEFAULT_LISTEN = "127.0.0.1:9479"
EOF = b"# EOF\n"
#: zlib's level 6 (gzip's default) costs ~3x level 1 for ~10 % fewer bytes; the text is
#: compressed once per state change, so the smaller answer wins
GZIP_LEVEL = 6
INDEX = b"<html><body><h1>memtop exporter</h1><p><a href='/metrics'>/metrics</a></p></body></html>\n"


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


class _Fixed(Collector):
    """Families already built, for an encoder that wants a registry."""

    def __init__(self, fams: list[Metric]) -> None:
        self.fams = fams

    def collect(self) -> Iterator[Metric]:
        yield from self.fams


def _encode(encoder: Callable[[CollectorRegistry], bytes], fams: list[Metric], node: str = "") -> bytes:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed(with_node(fams, node)))
    return encoder(reg)


@dataclass
class _Built:
    """One exposition, built once per state change and served to every scrape until the next:
    the text of memtop's families (without the per-scrape self-metrics) and, once a scraper asked
    for gzip, its compressed prefix and the compressor's state after it (so each scrape appends
    only its few self-metric lines to a copy: one gzip member, not the whole text recompressed)."""

    key: tuple[int, str]
    text: bytes
    gz_prefix: bytes = b""
    gz_state: Any = None


class Exporter(Collector):
    """The collector a textfile write or a scrape asks: memtop's families, built at most once per
    batch the Runner applied, plus the exporter's own counters, fresh at every scrape."""

    def __init__(self, runner: Runner, opts: Options) -> None:
        self.runner = runner
        self.opts = opts
        self.acc = Accumulators()
        self._lock = threading.Lock()  # one build at a time: builds share running sums
        self.scrapes = 0
        self.builds = 0
        self.dropped_total = 0
        self.last_duration_s = 0.0
        self.bpf = BpfRunTime()
        self.stats = Stats()  # the HTTP server's, once it serves
        #: bumped by every batch the Runner applies: a cached exposition of an older one is stale
        self.generation = 0
        self._built: dict[str, _Built] = {}
        #: (content type, gzip) scraped since the last prebuild, with an Accept that asks for it
        #: (keyed by what it asks, not by the header's text: a few entries whatever clients send)
        self._wanted: dict[tuple[str, bool], str] = {}
        runner.subscribe(self._changed)

    def _changed(self, _batch: object) -> None:
        self.generation += 1

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            out = self._build()
            self.scrapes += 1
        yield from out
        yield from self._live_metrics()

    def _build(self) -> list[Metric]:
        """memtop's families now and the build's own figures (the caller holds ``_lock``)."""
        t0 = time.perf_counter()
        budget = Budget(self.opts.max_series)
        with self.runner.lock:
            out = [budget.take(f) for f in families(self.runner.state, self.opts, self.acc)]
        self.dropped_total += budget.dropped
        self.builds += 1
        out += list(self._build_metrics(budget))
        self.last_duration_s = time.perf_counter() - t0
        return out

    def exposition(self, accept: str = "", gzip: bool = False) -> tuple[bytes, str]:
        """(body, content type) for a scraper's ``Accept``, gzip-compressed when asked."""
        encoder, ctype = choose_encoder(accept)
        openmetrics = ctype.startswith("application/openmetrics-text")
        with self._lock:
            built = self._fresh(accept, gzip)
            self._wanted[(ctype, gzip)] = accept
            self.scrapes += 1
            live = _encode(encoder, list(self._live_metrics()), self.opts.node)
            if openmetrics and not live.endswith(EOF):
                live += EOF
            if not gzip:
                return built.text + live, ctype
            comp = built.gz_state.copy()
            return built.gz_prefix + comp.compress(live) + comp.flush(), ctype

    def _fresh(self, accept: str, gzip: bool) -> _Built:
        """The exposition of the state now for ``accept``, built unless the cache has it (the
        caller holds ``_lock``)."""
        encoder, ctype = choose_encoder(accept)
        key = (self.generation, ctype)
        built = self._built.get(ctype)
        if built is None or built.key != key:
            text = _encode(encoder, self._build(), self.opts.node)
            if ctype.startswith("application/openmetrics-text") and text.endswith(EOF):
                text = text[: -len(EOF)]  # the self-metrics go before the end marker
            built = self._built[ctype] = _Built(key, text)
        if gzip and built.gz_state is None:
            comp = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: a gzip header
            built.gz_prefix = comp.compress(built.text)
            built.gz_state = comp
        return built

    def prebuild(self) -> None:
        """After a tick: build what the last scrapes asked for (their Accept, gzip), so the next
        scrape is answered from the cache instead of waiting for a build. Only what was scraped
        since the previous prebuild: a scraper far slower than the tick costs one build per
        scrape plus one, not one per tick."""
        with self._lock:
            wanted, self._wanted = self._wanted, {}
            for (_, gzip), accept in wanted.items():
                self._fresh(accept, gzip)

    def respond(self, request: Request) -> Response:
        """The HTTP server's handler (its worker thread)."""
        path = urlsplit(request.path).path
        if path == "/metrics":
            gz = accepts_gzip(request.headers.get("accept-encoding", ""))
            body, ctype = self.exposition(request.headers.get("accept", ""), gzip=gz)
            extra = (("Content-Encoding", "gzip"),) if gz else ()
            return Response(200, ctype, body, (*extra, ("Vary", "Accept, Accept-Encoding")))
        if path == "/":
            return Response(200, "text/html; charset=utf-8", INDEX)
        return Response(404, "text/plain; charset=utf-8", b"not found\n")

    def _build_metrics(self, budget: Budget) -> Iterator[Metric]:
        g = GaugeMetricFamily(
            "memtop_exporter_scrape_duration_seconds", "How long building the previous exposition took"
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

    def _live_metrics(self) -> Iterator[Metric]:
        """The exporter's own counters, as of this scrape."""
        c = CounterMetricFamily("memtop_exporter_scrapes", "Scrapes served (and textfile writes)")
        c.add_metric([], float(self.scrapes))
        yield c
        client, server, _ = self.stats.snapshot()
        c = CounterMetricFamily(
            "memtop_exporter_client_errors",
            "Connections that ended without a full exchange, by reason: deadline (the request and "
            "answer took longer than the per-request deadline), disconnect (closed or reset early), "
            "bad_request (malformed), refused (over the connection limits)",
            labels=["reason"],
        )
        for reason, n in client.items():
            c.add_metric([reason], float(n))
        yield c
        c = CounterMetricFamily(
            "memtop_exporter_server_errors", "Requests that failed on memtop's side (the first one is logged)"
        )
        c.add_metric([], float(server))
        yield c


def registry_for(exporter: Exporter) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(exporter)
    return reg


def serve(address: tuple[str, int], exporter: Exporter) -> HttpServer:
    """Bind (a MemtopError when the address is taken or not ours) and serve in a thread."""
    try:
        server = HttpServer(address, exporter.respond)
    except OSError as exc:
        raise MemtopError(
            f"cannot listen on {address[0]}:{address[1]}: {exc.strerror or exc}",
            "choose another --listen address or port",
        ) from exc
    exporter.stats = server.stats
    return server


async def export(
    source: Source,
    opts: Options,
    *,
    listen: tuple[str, int] | None,
    textfile: str | None,
    interval_s: float = 1.0,
    duration_s: float | None = None,
) -> int:
    """Run until SIGINT/SIGTERM (or ``duration_s``): serve /metrics and/or write ``textfile``
    every interval. A textfile that cannot be written is an error (exit 2)."""
    from memtop.headless.frontends import _begin, _stop_on_signals

    # the textfile's directory is opened and checked once, before anything else starts, and its
    # earlier runs' temporary files removed
    out = Textfile(textfile) if textfile is not None else None
    server: HttpServer | None = None
    runner: Runner | None = None
    stop = asyncio.Event()
    undo = _stop_on_signals(stop)
    try:
        runner = Runner(source, interval_s=interval_s, checkpoints=False)
        exporter = Exporter(runner, opts)
        if listen is not None:
            server = serve(listen, exporter)
            host, port = listen
            where = f"[{host}]" if ":" in host else host
            sys.stderr.write(f"memtop: serving http://{where}:{port}/metrics\n")
        if out is not None:
            sys.stderr.write(f"memtop: writing {out.path} every {interval_s:g} s\n")
        await _begin(runner, stop, None, ())
        async for n in runner.ticks(stop):
            if server is not None:  # off the loop: a build must not delay the signals' handling
                await asyncio.to_thread(exporter.prebuild)
            if out is not None:
                out.write(exporter.exposition()[0])
            if duration_s is not None and (n + 1) * interval_s > duration_s + 1e-9:
                break
    finally:
        undo()
        if server is not None:
            server.close()
        if out is not None:
            out.close()  # its temporary file too, if a write was cut short
        if runner is not None:
            await runner.stop()
    return 0
