"""`memtop export`'s HTTP server against clients that misbehave, on loopback (no BPF: the server is
the same whatever feeds it): a slowloris, one address opening every connection, clients that
disconnect or reset early, malformed requests; and gzip when the scraper asks for it."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import json
import math
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.registry import CollectorRegistry
from support import FakeSource, memtop_cmd, vmscan_batches
from support.exporter import clocked_exporter

from memtop.export.families import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from memtop.export.http import MAX_PER_ADDRESS, REQUEST_DEADLINE_S, accepts_gzip, parse_head
from memtop.export.metrics import Accumulators, Options, families
from memtop.export.node import with_node
from memtop.export.server import Exporter as ServedExporter
from memtop.export.server import TextMemo, _encode, _Fixed, negotiate, text_format
from memtop.state import State
from memtop.state.cgroups import CgroupsState
from memtop.stream.recfile import Recording
from memtop.stream.runner import Runner

#: a bound on waits for the server; generous (the machine is shared), never asserted
WAIT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def until(what: str, ok: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


def get(
    url: str, headers: dict[str, str] | None = None, source: str = ""
) -> tuple[int, dict[str, str], bytes]:
    """One GET (from ``source``, a loopback address, when given): status, headers, raw body."""
    host, port = url.split("/")[2].split(":")
    with socket.create_connection(
        (host, int(port)), timeout=30, source_address=(source, 0) if source else None
    ) as s:
        lines = [f"GET {url.split(host + ':' + port, 1)[1]} HTTP/1.1", f"Host: {host}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *hdrs = head.decode("latin-1").split("\r\n")
    parsed = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in hdrs)}
    return int(status_line.split()[1]), parsed, body


class Exporter:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, stderr: Path) -> None:
        self.proc, self.port, self.stderr = proc, port, stderr
        self.url = f"http://127.0.0.1:{port}/metrics"

    def metric(self, line_start: str) -> float:
        text = get(self.url)[2].decode()
        m = re.search(rf"^{re.escape(line_start)} (\S+)$", text, re.M)
        assert m is not None, line_start
        return float(m.group(1))


@contextmanager
def exporter(*extra: str) -> Iterator[Exporter]:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix=f"memtop-server-{os.getpid()}-") as tmp:
        err = Path(tmp) / "stderr"
        with err.open("wb") as f:
            proc = subprocess.Popen(
                # no node label: these tests read series by their text
                [
                    *memtop_cmd(),
                    "export",
                    "--no-bpf",
                    "--node-name=",
                    "--listen",
                    f"127.0.0.1:{port}",
                    *extra,
                ],
                stdout=subprocess.DEVNULL,
                stderr=f,
            )
        ex = Exporter(proc, port, err)
        try:

            def up() -> bool:
                try:
                    return get(ex.url)[0] == 200
                except OSError:
                    return False

            until("memtop export serving", up)
            yield ex
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def closed_by_server(s: socket.socket) -> bool:
    """Whether the server ended this connection (an answer and EOF, or a reset)."""
    s.setblocking(False)
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_slowloris_does_not_starve_scrapes() -> None:
    """20 loopback clients each sending a header byte every 2 s: a normal scrape from the same
    address still gets 200, and each trickler is dropped by the request's deadline, not kept
    alive by its bytes."""
    with exporter() as ex:
        stop = threading.Event()
        conns: list[socket.socket] = []
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", ex.port))
            s.sendall(b"GET /metrics HTTP/1.1\r\n")
            conns.append(s)
        ended: set[int] = set()

        def trickle() -> None:
            while not stop.wait(2.0):
                for i, s in enumerate(conns):
                    if i in ended:
                        continue
                    try:
                        s.sendall(b"X")
                    except OSError:
                        ended.add(i)

        t = threading.Thread(target=trickle)
        t.start()
        try:
            codes = [get(ex.url)[0] for _ in range(10)]
            assert codes == [200] * 10, codes
            # still trickling, yet every one of them is dropped (the deadline is 10 s)
            until("every trickler dropped", lambda: all(closed_by_server(s) for s in conns))
            assert ex.metric('memtop_exporter_client_errors_total{reason="deadline"}') >= 1
        finally:
            stop.set()
            t.join()
            for s in conns:
                s.close()
        assert ex.proc.poll() is None


def test_one_address_cannot_take_every_connection() -> None:
    """40 idle connections from 127.0.0.2: at most MAX_PER_ADDRESS stay open, and another
    address is served."""
    with exporter() as ex:
        conns = [
            socket.create_connection(("127.0.0.1", ex.port), source_address=("127.0.0.2", 0))
            for _ in range(40)
        ]
        try:
            assert get(ex.url, source="127.0.0.3")[0] == 200
            until(
                "the connections over the per-address limit closed",
                lambda: sum(closed_by_server(s) for s in conns) >= 40 - MAX_PER_ADDRESS,
            )
            assert ex.metric('memtop_exporter_client_errors_total{reason="refused"}') >= 40 - MAX_PER_ADDRESS
        finally:
            for s in conns:
                s.close()


def test_early_disconnects_are_counted_not_printed() -> None:
    """300 clients that reset after sending a request, hang up before sending one, or send
    garbage: no traceback on stderr, each counted by reason."""
    with exporter() as ex:
        reasons = ("disconnect", "bad_request", "refused", "deadline")

        def errors() -> float:
            return sum(ex.metric(f'memtop_exporter_client_errors_total{{reason="{r}"}}') for r in reasons)

        before = errors()
        linger_rst = struct.pack("ii", 1, 0)
        for i in range(300):
            s = socket.create_connection(("127.0.0.1", ex.port))
            if i % 3 == 0:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger_rst)  # close = RST
            elif i % 3 == 1:
                s.sendall(b"GET /metr")
            else:
                s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n")  # TLS at a plain port
            s.close()
        # each one counted (a burst from one address also displaces connections still sending
        # their request: "refused"); a reset that came after the whole answer is no error
        until("the early disconnects counted", lambda: errors() - before >= 250)
        assert ex.metric('memtop_exporter_client_errors_total{reason="disconnect"}') >= 50
        assert ex.metric('memtop_exporter_client_errors_total{reason="bad_request"}') >= 1
        assert ex.metric("memtop_exporter_server_errors_total") == 0
        assert get(ex.url)[0] == 200 and ex.proc.poll() is None
        err = ex.stderr.read_text(errors="replace")
        assert "Traceback" not in err and len(err.splitlines()) <= 2, err


def test_gzip_decodes_to_the_same_exposition() -> None:
    """Accept-Encoding: gzip (as Prometheus sends it) gets gzip, which decodes to the text a
    plain scrape gets (the state does not change between the two: --interval 600, once the
    start's polls are in)."""
    # the same but for the scrape counter, which counts this scrape too
    scrapes = re.compile(rb"^memtop_exporter_(scrapes_total|exposition_age_seconds) .*$", re.M)
    with exporter("--interval", "600") as ex:
        status, headers, plain = get(ex.url)
        assert status == 200 and "content-encoding" not in headers
        # serving starts before the first poll (the probes' states only) and each probe's first
        # poll comes in at its own time (pinned to one busy CPU, a probe's timestamp moved
        # between two scrapes): compared once every probe has been read and two plain scrapes a
        # moment apart agree
        up = re.compile(rb'^memtop_probe_up\{probe="([^"]+)"', re.M)
        read = re.compile(rb'^memtop_probe_last_success_timestamp_seconds\{probe="([^"]+)"', re.M)
        last = [plain]

        def settled() -> bool:
            again = get(ex.url)[2]
            alike = scrapes.sub(b"", again) == scrapes.sub(b"", last[0])
            last[0] = again
            probes = set(up.findall(again))
            return alike and bool(probes) and probes <= set(read.findall(again))

        until("two plain scrapes alike", settled)
        plain = last[0]
        status, headers, packed = get(ex.url, {"Accept-Encoding": "gzip, deflate"})
        assert status == 200 and headers["content-encoding"] == "gzip"
        assert len(packed) < len(plain)
        unpacked = gzip.decompress(packed)
        assert scrapes.sub(b"", unpacked) == scrapes.sub(b"", plain)
        assert unpacked.count(b"\nmemtop_exporter_scrapes_total ") == 1
        # OpenMetrics gzipped: still one exposition, ending with its end marker
        _, headers, om = get(
            ex.url, {"Accept": "application/openmetrics-text; version=1.0.0", "Accept-Encoding": "gzip"}
        )
        text = gzip.decompress(om)
        assert headers["content-type"].startswith("application/openmetrics-text")
        assert text.endswith(b"# EOF\n") and text.count(b"# EOF") == 1
        # refused with q=0: plain
        assert "content-encoding" not in get(ex.url, {"Accept-Encoding": "gzip;q=0"})[1]


#: runs ``memtop export`` in this interpreter until SIGTERM, then prints the prometheus_client
#: modules it imported meanwhile (its stdout: nothing else writes there)
_IMPORTS_PROBE = """
import json, sys
from memtop.cli import main
rc = main(sys.argv[1:])
print(json.dumps(sorted(sys.modules)), flush=True)
sys.exit(rc)
"""


def test_the_exporter_never_imports_prometheus_client() -> None:
    """The library's import costs ~9 MiB of anonymous memory (http.server, email, ssl, ...) the
    exporter would keep for weeks: memtop's families and writers are its own, and an exporter
    scraped as Prometheus scrapes (OpenMetrics first), as curl does (no Accept) and in text
    1.0.0 never imports it (sys.modules of the exporter's process, printed as it exits). Nor
    what only the other front ends run (module code kept for weeks, ~3 MiB): the doctor's checks
    (they import every probe and view: run in a forked child), the views, snapshots and
    recordings, the on-demand probes, Textual, Rich and bcc."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix=f"memtop-imports-{os.getpid()}-") as tmp:
        err = Path(tmp) / "stderr"
        with err.open("wb") as f:
            proc = subprocess.Popen(
                [sys.executable, "-c", _IMPORTS_PROBE, "export", "--no-bpf", "--listen", f"127.0.0.1:{port}"],
                stdout=subprocess.PIPE,
                stderr=f,
            )
        url = f"http://127.0.0.1:{port}/metrics"
        try:

            def up() -> bool:
                try:
                    return get(url)[0] == 200
                except OSError:
                    return False

            until("memtop export serving", up)
            bodies = {accept: get(url, {"Accept": accept} if accept else None) for accept in ACCEPTS}
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.read_text()
    for accept, (status, headers, body) in bodies.items():
        assert status == 200 and b"memtop_exporter_scrapes_total" in body, accept
        assert headers["content-type"].startswith(ACCEPTS[accept]), accept
    modules = json.loads(out.decode().strip().splitlines()[-1])
    assert [m for m in modules if m.partition(".")[0] == "prometheus_client"] == []
    never = re.compile(
        r"(textual|rich|plotext|textual_plotext|bcc)(\.|$)"
        r"|memtop\.(ui|headless\.(doctor|frontends|snapshots)|stream\.(recording|replay|recfile))(\.|$)"
        r"|memtop\.views\.(?!levels$)|memtop\.core\.(leakcost|pprof)$"
        r"|memtop\.probes\.(leaks|leakrate|leakwindows|allocators|faultstack|growth|smaps|wss|slabtrace|pagealloc)$"
    )
    assert [m for m in modules if never.match(m)] == []
    assert "memtop.export.server" in modules  # (it printed the exporter's modules)


#: what Prometheus 2.42 sends: OpenMetrics 1.0.0 first
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
#: Accept headers and the content type each is answered with: Prometheus 2.42's own, none (curl),
#: and the text format 1.0.0 Prometheus 3 may ask for
ACCEPTS = {
    PROMETHEUS_ACCEPT: "application/openmetrics-text; version=1.0.0",
    "": "text/plain; version=0.0.4",
    "text/plain;version=1.0.0": "text/plain; version=1.0.0",
}


def test_request_parsing() -> None:
    assert accepts_gzip("gzip") and accepts_gzip("deflate, gzip;q=0.5") and accepts_gzip("*")
    assert not accepts_gzip("") and not accepts_gzip("gzip;q=0") and not accepts_gzip("identity")
    r = parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nAccept: a\r\naccept: b\r\nHost: h")
    assert (r.method, r.path, r.headers["accept"], r.headers["host"]) == ("GET", "/metrics?x=1", "a, b", "h")
    assert REQUEST_DEADLINE_S <= 10.0  # a Prometheus default scrape timeout


def test_errors_answered_without_urllib_noise() -> None:
    with exporter() as ex:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{ex.port}/nope", timeout=30)
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
        else:
            raise AssertionError("a 404 expected")


def test_the_exposition_is_built_once_per_batch() -> None:
    """Scrapes between two batches get the same bytes from one build; a batch makes the next
    scrape build again; prebuild builds what was scraped, ahead of the scrape; gzip decodes to the
    plain text."""
    batches = vmscan_batches()[:3]
    source = FakeSource(batches)
    runner = Runner(source, checkpoints=False)
    ex = ServedExporter(runner, Options())
    asyncio.run(runner.tick())
    assert ex.generation == 1
    plain = ex.exposition()[0]
    assert ex.builds == 1
    packed, ctype = ex.exposition(gzip=True)
    again = ex.exposition()[0]
    assert ex.builds == 1  # three scrapes, one build
    scrapes = re.compile(rb"^memtop_exporter_(scrapes_total|exposition_age_seconds) .*$", re.M)
    assert scrapes.sub(b"", gzip.decompress(packed)) == scrapes.sub(b"", plain) == scrapes.sub(b"", again)
    assert b"memtop_exporter_scrapes_total 3.0" in again  # the self-metrics are fresh
    asyncio.run(runner.tick())
    ex.prebuild()  # what the export loop does after each tick
    assert ex.builds == 2
    ex.exposition(gzip=True)
    assert ex.builds == 2  # answered from the prebuilt exposition
    ex.prebuild()
    assert ex.builds == 2  # nothing changed since: nothing to build


def test_the_text_format_is_the_librarys_byte_for_byte() -> None:
    """memtop writes the text format itself (prometheus_client's encoder checked every name of
    every sample: a third of a build); what it writes is the library's, byte for byte, on a
    recorded state's every family plus hostile label values, a histogram and special floats;
    a name the format would have to escape goes to the library."""
    rec = Recording.load(Path(__file__).resolve().parents[2] / "tests" / "data" / "cgroups.jsonl.gz")
    state = rec.state_at(rec.ts_at(rec.duration_s))
    assert isinstance(state, State)
    fams = list(families(state, Options(), Accumulators()))
    odd = GaugeMetricFamily("memtop_test_odd", 'help with \\ and\nnewline "quoted"', labels=["comm", "id"])
    for i, v in enumerate(['a"b', "back\\slash", "new\nline", "\x1b[31m", "é\u202e", "", "\u00a0tab\t"]):
        odd.add_metric([v, str(i)], [0.0, -0.0, 1e6, 1234567.0, 1e-7, math.inf, -math.inf][i])
    odd.add_metric(["nan", "z"], math.nan)
    hist = HistogramMetricFamily(
        "memtop_test_hist", "h", buckets=[("0.5", 1.0), ("+Inf", 3.0)], sum_value=2.5
    )
    fams += [odd, hist, CounterMetricFamily("memtop_test_c", "c", value=7.0)]
    assert sum(len(f.samples) for f in fams) > 100
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed(fams))
    assert text_format(fams) == generate_latest(reg)
    assert text_format(fams, openmetrics=True) == library_om(reg)
    # the node label, written into each label set's text, as with_node's families encode
    own_node = GaugeMetricFamily("memtop_test_node", "n", labels=["node"])
    own_node.add_metric(["numa0"], 1.0)  # a sample's own node label wins, as in with_node
    fams += [own_node]
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed(with_node(fams, 'n"1')))
    assert text_format(fams, 'n"1') == generate_latest(reg)
    assert text_format(fams, 'n"1', openmetrics=True) == library_om(reg)
    dotted = GaugeMetricFamily("memtop.dotted", "d", value=1.0)
    assert text_format([dotted]) is None  # not ours to escape: the library's encoder does
    assert text_format([dotted], openmetrics=True) is None
    # a sample name OpenMetrics would rewrite (":" is not a label name's character)
    colon = GaugeMetricFamily("memtop:colon", "c", value=1.0)
    assert text_format([colon]) is not None and text_format([colon], openmetrics=True) is None
    # a counter with a creation time, a family with a unit: OpenMetrics writes both its way
    created = CounterMetricFamily("memtop_test_created", "c", value=2.0, created=1700000000.5)
    sized = GaugeMetricFamily("memtop_test_size", "s", value=3.0, unit="bytes")
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed([created, sized]))
    assert text_format([created, sized], openmetrics=True) == library_om(reg)
    assert text_format([created, sized]) == generate_latest(reg)


def library_om(reg: CollectorRegistry) -> bytes:
    """prometheus_client's OpenMetrics 1.0.0, as it answers Prometheus' Accept header."""
    encode, ctype = choose_encoder(PROMETHEUS_ACCEPT)
    assert ctype.startswith("application/openmetrics-text; version=1.0.0")
    return encode(reg)


def test_every_format_a_scraper_may_ask_for_is_the_librarys() -> None:
    """Whatever the Accept header, the body is what prometheus_client's choice of encoder writes
    for the same families (memtop's writers, or the library for the escapings they leave to it)."""
    rec = Recording.load(Path(__file__).resolve().parents[2] / "tests" / "data" / "cgroups.jsonl.gz")
    state = rec.state_at(rec.ts_at(rec.duration_s))
    assert isinstance(state, State)
    fams = list(families(state, Options(), Accumulators()))
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed(with_node(fams, "n1")))
    for accept in (
        "",
        PROMETHEUS_ACCEPT,
        "text/plain;version=1.0.0",
        "text/plain;version=1.0.0;escaping=allow-utf-8",
        "text/plain;version=1.0.0;escaping=dots",
        "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8",
        "application/openmetrics-text;version=1.0.0;escaping=values",
    ):
        encoder, _ = choose_encoder(accept)
        assert _encode(negotiate(accept), fams, "n1", TextMemo()) == encoder(reg), accept


def test_accept_negotiation_is_the_librarys() -> None:
    """memtop's choice of format and content type for an Accept header is choose_encoder's."""
    headers = [
        "",
        PROMETHEUS_ACCEPT,
        "application/openmetrics-text",
        "application/openmetrics-text;version=0.0.1,text/plain;version=0.0.4",
        "application/openmetrics-text; version=1.0.0; escaping=allow-utf-8",
        "application/openmetrics-text; version=2.0.0",
        "application/openmetrics-text;version=1.0.0;escaping=bogus",
        "text/plain;version=1.0.0;escaping=dots",
        "text/plain",
        "text/html, */*",
        "application/openmetrics-text;version=x.y,text/plain;version=1.0.0",
        " application/openmetrics-text ; version=1.0.0",
    ]
    for accept in headers:
        encoder, ctype = choose_encoder(accept) if "x.y" not in accept else (None, "")
        fmt = negotiate(accept)
        if "x.y" in accept:  # the library's version comparison raises; memtop skips the entry
            assert fmt.content_type.startswith("text/plain; version=1.0.0"), accept
            continue
        assert fmt.content_type == ctype, accept
        assert fmt.openmetrics == ctype.startswith("application/openmetrics-text"), accept
        assert (encoder is generate_latest) == (
            fmt.content_type == "text/plain; version=0.0.4; charset=utf-8"
        )


def test_label_sets_kept_from_build_to_build_write_the_same_text() -> None:
    """Each cgroup's label set is the same object from one build to the next while its labels
    hold, and the text writer reuses its text through a memo: at every point of a recording,
    built with one set of accumulators and one memo, the text is still the library's byte for
    byte; a cgroup whose container facts change gets a new set."""
    rec = Recording.load(Path(__file__).resolve().parents[2] / "tests" / "data" / "cgroups.jsonl.gz")
    acc = Accumulators()
    memo, om_memo = TextMemo(), TextMemo()
    kept = 0
    before: dict[str, dict[str, str]] = {}
    for frac in (0.25, 0.5, 0.75, 1.0):
        state = rec.state_at(rec.ts_at(rec.duration_s * frac))
        assert isinstance(state, State)
        fams = list(families(state, Options(), acc))
        reg = CollectorRegistry(auto_describe=False)
        reg.register(_Fixed(with_node(fams, "n1")))
        assert text_format(fams, "n1", memo) == generate_latest(reg)
        assert text_format(fams, "n1", om_memo, openmetrics=True) == library_om(reg)
        now = {p: labels for p, (_key, labels) in acc.cgroup_labels.items()}
        kept += sum(1 for p, labels in now.items() if before.get(p) is labels)
        before = now
    assert kept > 0 and memo.labels
    path, (_key, labels) = next(iter(acc.cgroup_labels.items()))
    row = state.get(CgroupsState).rows[path]
    assert acc.labels_of(path, row) is labels
    moved = dataclasses.replace(row, sample=dataclasses.replace(row.sample, image="registry/x:1"))
    assert acc.labels_of(path, moved) is not labels


def test_an_unchanged_build_reuses_its_text_and_a_moved_value_is_written_anew() -> None:
    """The writer is incremental: built twice from the same state, the second text is the first
    (each family's text reused whole, and still the library's); a cgroup whose usage moved has
    its samples made anew and its lines written anew, every other cgroup's samples and lines
    kept, and the text is still the library's byte for byte."""
    rec = Recording.load(Path(__file__).resolve().parents[2] / "tests" / "data" / "cgroups.jsonl.gz")
    state = rec.state_at(rec.ts_at(rec.duration_s))
    assert isinstance(state, State)
    acc, memo, om_memo = Accumulators(), TextMemo(), TextMemo()

    def both() -> tuple[bytes | None, bytes]:
        fams = list(families(state, Options(), acc))
        reg = CollectorRegistry(auto_describe=False)
        reg.register(_Fixed(with_node(fams, "n1")))
        # OpenMetrics too, through its own memo: the library's byte for byte at every step
        assert text_format(fams, "n1", om_memo, openmetrics=True) == library_om(reg)
        return text_format(fams, "n1", memo), generate_latest(reg)

    first, lib = both()
    assert first == lib
    kept = dict(memo.families)
    again, lib = both()
    assert again == first == lib
    assert kept and all(memo.families[k] is f for k, f in kept.items())  # reused, not rewritten
    # a family is kept as its lines, not also as its text
    assert all(f.text == b"" for f in kept.values() if f.lines is not None)
    cg = state.get(CgroupsState)
    path, row = next((p, r) for p, r in sorted(cg.rows.items()) if r.sample.usage_bytes)
    usage = row.sample.usage_bytes
    assert usage is not None
    blocks = dict(acc.cgroup_blocks)
    row.sample = dataclasses.replace(row.sample, usage_bytes=usage + 4096)
    moved, lib = both()
    # the moved cgroup's samples made anew, every other cgroup's kept (their lines reused)
    assert acc.cgroup_blocks[path] is not blocks[path]
    assert all(acc.cgroup_blocks[p] is b for p, b in blocks.items() if p != path)
    assert moved == lib and moved != first
    diff = set(moved.splitlines()) ^ set(first.splitlines())
    assert any(line.startswith(b"container_memory_usage_bytes{") and path.encode() in line for line in diff)
    # a cgroup gone: the others' lines stand one place earlier, and are still reused
    before_gone = memo.families["container_memory_usage_bytes gauge"]
    del cg.rows[next(p for p in sorted(cg.rows) if p != path and p != "/")]
    fewer, lib = both()
    assert fewer == lib and len(fewer) < len(moved)
    now = memo.families["container_memory_usage_bytes gauge"]
    assert now.body() != before_gone.body() and now.lines is not None and before_gone.lines is not None
    assert {id(line) for line in now.lines} <= {id(line) for line in before_gone.lines}  # all reused


def test_a_scrape_never_waits_for_a_build() -> None:
    """In the background (the served exporter), a scrape that lands while the tick's build runs
    gets the exposition of the tick before, with its age, instead of waiting; one more tick
    behind, it builds (never two ticks stale); the next prebuild catches up."""
    two = vmscan_batches()
    later = [dataclasses.replace(b, ts_ns=b.ts_ns + 2 * 10**9) for b in two]
    runner = Runner(FakeSource(two + later), checkpoints=False)
    ex = ServedExporter(runner, Options(), background=True)
    asyncio.run(runner.tick())
    first = ex.exposition()[0]
    assert ex.builds == 1 and b"memtop_exporter_exposition_age_seconds " in first
    asyncio.run(runner.tick())
    got: list[bytes] = []
    with ex._lock:  # the tick's build, running
        t = threading.Thread(target=lambda: got.append(ex.exposition()[0]))
        t.start()
        t.join(WAIT_S)
        served = not t.is_alive()
    t.join()
    assert served, "the scrape waited for the build"
    assert ex.builds == 1  # the previous tick's exposition, served as it was
    drop = re.compile(rb"^memtop_exporter_(scrapes_total|exposition_age_seconds) .*$", re.M)
    assert drop.sub(b"", got[0]) == drop.sub(b"", first)
    ex.prebuild()
    assert ex.builds == 2
    asyncio.run(runner.tick())
    asyncio.run(runner.tick())  # two ticks behind: a scrape builds rather than serve it
    ex.exposition()
    assert ex.builds == 3


def ticking_exporter(ticks: int) -> tuple[ServedExporter, list[float], Callable[[], None]]:
    """A background exporter over ``ticks`` alternating vmscan batches a second apart, its clock
    (``now[0]``, moved by the caller for a scrape between ticks) and a tick: the clock a second on,
    the runner's tick and the prebuild a served exporter makes after it."""
    ex, now = clocked_exporter(ticks)

    def tick() -> None:
        now[0] += 1.0
        asyncio.run(ex.runner.tick())
        ex.prebuild()

    return ex, now, tick


def test_a_slow_scraper_costs_a_build_per_scrape_not_per_tick() -> None:
    """At a 1 s interval, a scraper every 10 s is answered from an exposition built at the tick
    before its scrape (never by the scrape itself, never more than one tick old), for one or two
    builds per scrape; once it stops, or after a burst of back-to-back scrapes, ticks build
    nothing."""
    ex, now, tick = ticking_exporter(120)

    ages: list[float] = []
    for t in range(1, 61):
        tick()
        if t % 10 == 3:  # a scrape 0.3 s after the tick
            now[0] += 0.3
            before = ex.builds
            text = ex.exposition(gzip=True)[0]
            now[0] -= 0.3
            age = re.search(rb"^memtop_exporter_exposition_age_seconds (\S+)$", gzip.decompress(text), re.M)
            assert age is not None
            ages.append(float(age.group(1)))
            if t > 23:  # its period is known after two gaps' worth of scrapes
                assert ex.builds == before, f"the scrape at {t} s waited for a build"
    assert ex.builds <= 2 * len(ages) + 2  # not one per tick (60)
    assert max(ages[2:]) <= 1.3  # the tick's state, never older than a tick
    stopped = ex.builds
    for _ in range(30):  # the scraper went away: the builds for its next scrape, then none
        tick()
    assert ex.builds - stopped <= 3
    for _ in range(50):  # a burst of back-to-back scrapes
        ex.exposition()
    burst = ex.builds
    for _ in range(10):
        tick()
    assert ex.builds - burst <= 2


def test_a_format_no_scraper_asks_for_any_more_is_forgotten() -> None:
    """A format asked for once (curl without Accept beside a Prometheus asking for OpenMetrics)
    keeps its writer's memo and its cached exposition only as long as its scraper is remembered:
    then both go, and the format still asked for keeps its own; asked for again, it is written
    whole, the same series as before."""
    ex, now, tick = ticking_exporter(400)

    tick()
    drop = re.compile(rb"^memtop_exporter_(scrapes_total|exposition_age_seconds) .*$", re.M)
    once = drop.sub(b"", ex.exposition()[0])  # curl, once
    om, text = ACCEPTS[PROMETHEUS_ACCEPT], ACCEPTS[""]
    for t in range(1, 301):
        tick()
        if t % 15 == 0:  # Prometheus, every 15 s
            ex.exposition(PROMETHEUS_ACCEPT, gzip=True)
        if t == 60:
            assert {c.split(";")[0] for c in ex._memos} == {om.split(";")[0], text.split(";")[0]}
    assert [c for c in ex._memos if c.startswith("text/plain")] == []
    assert [c for c in ex._built if c.startswith("text/plain")] == []
    assert [c for c in ex._memos if c.startswith("application/openmetrics-text")] != []
    # asked again: written whole, with the same series as the first time
    body, ctype = ex.exposition()
    assert ctype.startswith(text) and [c for c in ex._memos if c.startswith("text/plain")] != []
    names = re.compile(rb"^([a-z_]+)[{ ]", re.M)
    assert set(names.findall(drop.sub(b"", body))) == set(names.findall(once))
