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
import gc
import importlib
import ipaddress
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from memtop.core.errors import MemtopError
from memtop.export.families import CounterMetricFamily, GaugeMetricFamily, Metric
from memtop.export.http import HttpServer, Request, Response, Stats, accepts_gzip
from memtop.export.metrics import EXPORTED_PARTS, Accumulators, Budget, Options, families
from memtop.export.node import with_node
from memtop.export.pace import FRESH_S, IDLE_READ_S, LEAD_S, MIN_GAP_S, Pace, follow
from memtop.export.textfile import Textfile
from memtop.runtime.heap import release_heap
from memtop.stream.runner import Runner
from memtop.stream.source import Source

DEFAULT_LISTEN = "127.0.0.1:9479"
EOF = b"# EOF\n"
#: zlib's level 6 (gzip's default) costs ~3x level 1 for ~10 % fewer bytes; the text is
#: compressed once per state change, so a small answer wins. Level 5 is as small on memtop's
#: text (45.2 against 45.1 kB with 500 cgroups) in three quarters of level 6's time
GZIP_LEVEL = 5
#: the gzip member's header (RFC 1952: deflate, no flags, no time, OS Unix), as zlib writes it
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"
#: the text is compressed in pieces of at least this many bytes of text, consecutive families
#: together (``gzip_body``): a piece starts without the text before it and costs its own block
#: headers, so a piece per family made a machine's many small families (no cgroups: 46 kB of
#: text) 13.4 kB gzipped instead of 6.8, and 16 kB pieces 7.4. At 32 kB a 29 kB text is 2 %
#: larger than compressed whole, bench/export_cost.py's (500 memcgs, 0.88 MB of text) 0.7 %
#: larger (44.1 kB), bench/export_build.py's synthetic 500 cgroups 7 % smaller
PIECE_BYTES = 32768
#: the interpreter's switch interval while serving (see ``export``)
SWITCH_INTERVAL_S = 0.001
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


class _Fixed:
    """Families already built, for prometheus_client's encoders, which want a registry (its
    ``Collector`` protocol: ``collect``; typed Any, the library's Metric being its own class)."""

    def __init__(self, fams: list[Metric]) -> None:
        self.fams = fams

    def collect(self) -> Iterator[Any]:
        yield from self.fams


UNDERSCORES, ALLOW_UTF8 = "underscores", "allow-utf-8"
CONTENT_TYPE_0_0_4 = "text/plain; version=0.0.4; charset=utf-8"
CONTENT_TYPE_OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@dataclass(frozen=True)
class Format:
    """An exposition format a scraper asked for: ``kind`` "text" or "openmetrics", the content
    type answered (also the cache's key), the escaping scheme of names and the version asked."""

    kind: str
    content_type: str
    escaping: str = UNDERSCORES
    version: str = ""

    @property
    def openmetrics(self) -> bool:
        return self.kind == "openmetrics"


TEXT_0_0_4 = Format("text", CONTENT_TYPE_0_0_4)


def _param(toks: list[str], key: str) -> str:
    for tok in toks:
        if "=" in tok:
            k, v = tok.strip().split("=", 1)
            if k == key:
                return v
    return ""


def _at_least_1(version: str) -> bool:
    """Whether ``version`` is 1.0.0 or later, compared as prometheus_client does (numbers part by
    part); a part that is not a number, where the library's comparison raises, is not."""
    parts: list[int] = []
    for part in version.split("."):
        if not part.isdigit():
            return False
        parts.append(int(part))
    return tuple(parts) >= (1, 0, 0)


def negotiate(accept: str) -> Format:
    """The format for a scraper's ``Accept`` header: prometheus_client's ``choose_encoder``'s
    choice and content type, made without importing it. The first OpenMetrics entry without a
    version, or of version 1.0.0 or later, wins (Prometheus asks for OpenMetrics 1.0.0 first);
    else the first ``text/plain`` of version 1.0.0 or later; else the text format 0.0.4."""
    for accepted in (accept or "").split(","):
        toks = accepted.split(";")
        kind = toks[0].strip()
        if kind not in ("application/openmetrics-text", "text/plain"):
            continue
        version = _param(toks, "version")
        escaping = _param(toks, "escaping")
        if escaping not in (ALLOW_UTF8, UNDERSCORES, "dots", "values"):
            escaping = UNDERSCORES
        if kind == "application/openmetrics-text":
            if not version:
                return Format("openmetrics", CONTENT_TYPE_OPENMETRICS, UNDERSCORES, "1.0.0")
            if _at_least_1(version):
                ctype = f"application/openmetrics-text; version={version}; charset=utf-8; escaping={escaping}"
                return Format("openmetrics", ctype, escaping, version)
        elif version and _at_least_1(version):
            return Format(
                "text", f"text/plain; version=1.0.0; charset=utf-8; escaping={escaping}", escaping, version
            )
    return TEXT_0_0_4


def library_encode(fmt: Format, fams: list[Metric]) -> bytes:
    """The families as prometheus_client encodes them in ``fmt``: for what memtop's writers leave
    to it (a name to escape, an escaping scheme they do not write). Imported here, on the first
    such call only (the library's import costs ~9 MiB the exporter would keep)."""
    from prometheus_client.exposition import generate_latest
    from prometheus_client.registry import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed(fams))
    if fmt.openmetrics:
        # (its OpenMetrics encoder is untyped: taken as the callable it is)
        om = importlib.import_module("prometheus_client.openmetrics.exposition")
        encode: Callable[..., bytes] = om.generate_latest
        return encode(reg, escaping=fmt.escaping, version=fmt.version or "1.0.0")
    return generate_latest(reg, escaping=fmt.escaping)


class LabelText:
    """A label set's text in the exposition, and the lines last written with it: by sample name,
    (value, line). A set kept from build to build whose sample's value did not move gets its
    line back instead of a new one."""

    __slots__ = ("labels", "inner", "lines")

    def __init__(self, labels: dict[str, str], inner: str) -> None:
        self.labels = labels  # held: no other set can take its identity while the memo names it
        self.inner = inner
        self.lines: dict[str, tuple[float, str]] = {}


@dataclass
class _FamilyText:
    """A family's text as last written: its samples then (held, compared with the next build's)
    and the label sets it wrote, by identity (carried into the memo while the text is reused)."""

    doc: str
    samples: list[Any]
    #: its text, kept only where ``lines`` is None: a family with its lines is written from them
    #: when reused (a join and an encode, well under a millisecond for 10,000 lines), rather than
    #: kept twice, as lines and as bytes (~0.9 MiB with 500 cgroups, for each format)
    text: bytes
    label_texts: dict[int, LabelText]
    #: its text's head (HELP and TYPE) and a line per sample, in order, where that is all it is
    #: (no OpenMetrics suffix moved into a family of its own): a family some of whose samples
    #: changed is patched there, only the changed ones written
    head: str = ""
    lines: list[str] | None = None
    unit: str = ""

    def body(self) -> bytes:
        """Its text as written."""
        if self.lines is None:
            return self.text
        return (self.head + "".join(self.lines)).encode("utf-8")


@dataclass
class TextMemo:
    """What one text writer keeps from one build to the next (``text_format``), always with the
    same ``node``: the label sets' text by the set's identity, and each family's text by name."""

    labels: dict[int, LabelText] = field(default_factory=dict)
    families: dict[str, _FamilyText] = field(default_factory=dict)
    #: the last gzipped build's pieces (``gzip_body``): by the identities of the families in
    #: each, those families (held: no other can take their identity) and their text compressed
    pieces: dict[tuple[int, ...], tuple[tuple[_FamilyText, ...], bytes]] = field(default_factory=dict)


def _encode(
    fmt: Format,
    fams: list[Metric],
    node: str = "",
    memo: TextMemo | None = None,
    *,
    eof: bool = True,
    parts: list[tuple[_FamilyText, bytes]] | None = None,
) -> bytes:
    """``eof`` False: an OpenMetrics text without its ``# EOF`` (more lines follow it).
    ``parts``: as :func:`text_format` fills it (left empty when the library writes the text)."""
    if fmt.escaping in (UNDERSCORES, ALLOW_UTF8):  # the same text for plain names
        text = text_format(fams, node, memo, openmetrics=fmt.openmetrics, eof=eof, parts=parts)
        if text is not None:
            return text
    text = library_encode(fmt, with_node(fams, node))
    return text[: -len(EOF)] if not eof and fmt.openmetrics and text.endswith(EOF) else text


#: names the text format writes as they are (others: the library's encoder escapes them)
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"(?!__)[a-zA-Z_][a-zA-Z0-9_]*")
#: sample names OpenMetrics writes as they are (its encoder makes any other character "_")
_OM_SAMPLE_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
#: the samples prometheus_client's text format moves to a gauge family of their own
_OM_SUFFIXES = ("_created", "_gsum", "_gcount")
_TYPES = {"counter": "counter", "info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram"}


def _go_float(value: float) -> str:
    """A sample value as Go's strconv writes it (what Prometheus's client libraries agree on):
    Python's shortest repr, but with an exponent from 1e+06 on, and +Inf, -Inf, NaN."""
    d = float(value)
    if d != d:
        return "NaN"
    if d in (math.inf, -math.inf):
        return "+Inf" if d > 0 else "-Inf"
    text = repr(d)
    dot = text.find(".")
    if d > 0 and dot > 6:  # 1234567.0 -> 1.234567e+06
        digits = (text[:dot] + text[dot + 1 :]).rstrip("0")
        mantissa = (digits[0] + "." + digits[1:]).rstrip(".")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def _label_value(v: str) -> str:
    if "\\" in v or "\n" in v or '"' in v:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return v


def text_format(
    fams: list[Metric],
    node: str = "",
    memo: TextMemo | None = None,
    *,
    openmetrics: bool = False,
    eof: bool = True,
    parts: list[tuple[_FamilyText, bytes]] | None = None,
) -> bytes | None:
    """The text format 0.0.4, byte for byte what prometheus_client's ``generate_latest`` writes
    for these families (with ``node="<node>"`` in every sample's labels, as
    ``memtop.export.node.with_node`` adds it, unless ``node`` is ""), at a fraction of its cost:
    it checks and escapes every metric and label name of every sample (7,000 samples, ~35 ms a
    build with 500 cgroups); memtop's names are its own and checked here once per name and
    label set, and the node label is written into each label set's text once rather than copied
    into every sample. None when a name is not a plain Prometheus name (the library's encoder
    escapes those).

    ``memo`` (one per writer, always with the same ``node``): what the last call wrote, replaced
    by this call's. Incremental, as most of a build is what the last one was (500 sleeping
    cgroups): a family whose samples equal the last call's (names, labels, values, compared
    in C) is its text of then; in a family that changed, a label set kept from build to build
    (a cgroup's, memtop.export.metrics.Accumulators) has its text written once for as long as it
    holds, and each of its lines whose value did not move is reused. The memo holds each set it
    names, so no other set can have its identity meanwhile. (Equal values: a zero that only
    changed its sign, -0.0 for 0.0, keeps its text; Prometheus reads both as the same value, and
    memtop's figures, counts and sizes, have no negative zero.)

    ``openmetrics``: OpenMetrics 1.0.0 instead, byte for byte what prometheus_client's
    ``openmetrics.exposition.generate_latest`` writes (the family named without ``_total``, its
    type as it is, HELP escaping quotes too, every sample in its family in order, ``# EOF`` at
    the end), incremental the same way (a memo is for one format only). None also for a sample
    with a timestamp or an exemplar (the backfill's: the library writes those). ``eof`` False:
    OpenMetrics without its ``# EOF`` line (the exporter's self-metrics follow: cutting it off
    afterwards copied the whole text, 0.8 MiB kept per format).

    ``parts``: given a list, each family's memo entry and its text are added to it, in order
    (their texts are the whole text, ``# EOF`` aside), when the text is written here."""
    w = _Writer(node, memo if memo is not None else TextMemo(), openmetrics)
    out: list[bytes] = []
    for metric in fams:
        text = w.family(metric)
        if text is None:
            return None
        out.append(text)
    if parts is not None:
        parts.extend(zip(w.parts, out, strict=True))
    if openmetrics and eof:
        out.append(EOF)
    if memo is not None:
        memo.labels, memo.families = w.written, w.fam_texts
    return b"".join(out)


class _Writer:
    """One call of :func:`text_format`: what it checked, wrote and will leave in the memo."""

    def __init__(self, node: str, memo: TextMemo, openmetrics: bool = False) -> None:
        self.node = node
        self.om = openmetrics
        #: a sample's name as written: OpenMetrics writes it with only a label name's characters
        self.sample_name = _OM_SAMPLE_NAME if openmetrics else _METRIC_NAME
        self.before = memo
        self.label_sets: dict[tuple[str, ...], bool] = {}
        self.names_ok: set[str] = set()
        #: a label set's text by the set's identity: a cgroup's one set is shared by its samples
        #: in every family (memtop.export.metrics), written once (the families outlive the call)
        self.written: dict[int, LabelText] = {}
        self.fam_texts: dict[str, _FamilyText] = {}
        #: each family's entry, in the order written
        self.parts: list[_FamilyText] = []
        self.bare = f'{{node="{_label_value(node)}"}} ' if node else " "

    def family(self, metric: Metric) -> bytes | None:
        """The family's text: the last call's when its samples are the same, patched where only
        some are, else written whole."""
        if self.om:
            return self._om_family(metric)
        mname, mtype = metric.name, metric.type
        if mtype == "counter":
            mname += "_total"
        elif mtype == "info":
            mname += "_info"
        key = f"{mname} {mtype}"
        prev = self.before.families.get(key)
        if prev is not None and prev.doc == metric.documentation:
            kept = self._kept(metric, mname, key, prev)
            if kept is not None:
                return kept
        mtype = _TYPES.get(mtype, "untyped" if mtype == "unknown" else mtype)
        if not _METRIC_NAME.fullmatch(mname):
            return None
        doc = metric.documentation.replace("\\", "\\\\").replace("\n", "\\n")
        head = f"# HELP {mname} {doc}\n# TYPE {mname} {mtype}\n"
        out: list[str] = []
        om: dict[str, list[str]] = {}
        base = metric.name
        used: dict[int, LabelText] = {}
        for name, labels, value, timestamp, *_ in metric.samples:
            line = self._line(name, labels, value, timestamp, used)
            if line is None:
                return None
            if name == base or name == mname:
                out.append(line)
                continue
            suffix = name[len(base) :] if name.startswith(base) else ""
            if suffix in _OM_SUFFIXES:
                om.setdefault(suffix, []).append(line)
            else:
                out.append(line)
        plain = not om and all(x[0] in (base, mname) for x in metric.samples)
        for suffix, lines in sorted(om.items()):
            out.append(f"# HELP {metric.name}{suffix} {doc}\n# TYPE {metric.name}{suffix} gauge\n")
            out.extend(lines)
        text = (head + "".join(out)).encode("utf-8")
        # the samples list is held as it is: a family's samples are not changed once built
        self.fam_texts[key] = part = _FamilyText(
            metric.documentation, metric.samples, b"" if plain else text, used, head, out if plain else None
        )
        self.parts.append(part)
        return text

    def _kept(self, metric: Metric, mname: str, key: str, prev: _FamilyText) -> bytes | None:
        """The family's last text when its samples are the last build's, else that text patched
        where samples changed; None when it must be written anew."""
        if prev.samples == metric.samples:
            self.written.update(prev.label_texts)
            self.fam_texts[key] = prev
            self.parts.append(prev)
            return prev.body()
        return self._patch(metric, mname, key, prev)

    def _om_family(self, metric: Metric) -> bytes | None:
        """An OpenMetrics family: its samples in order under its own name and type, so any family
        is patched line by line (no suffix is moved)."""
        mname, mtype = metric.name, metric.type
        key = f"{mname} {mtype}"
        prev = self.before.families.get(key)
        if prev is not None and prev.doc == metric.documentation and prev.unit == metric.unit:
            kept = self._kept(metric, mname, key, prev)
            if kept is not None:
                return kept
        if not _METRIC_NAME.fullmatch(mname):
            return None
        doc = metric.documentation.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        head = f"# HELP {mname} {doc}\n# TYPE {mname} {mtype}\n"
        if metric.unit:
            head += f"# UNIT {mname} {metric.unit}\n"
        used: dict[int, LabelText] = {}
        out: list[str] = []
        for sample in metric.samples:
            # (a sample of the library's may have them; memtop's have neither)
            if sample.exemplar is not None or sample.native_histogram is not None:
                return None
            name, labels, value, timestamp, *_ = sample
            line = self._line(name, labels, value, timestamp, used)
            if line is None:
                return None
            out.append(line)
        text = (head + "".join(out)).encode("utf-8")
        self.fam_texts[key] = part = _FamilyText(
            metric.documentation, metric.samples, b"", used, head, out, metric.unit
        )
        self.parts.append(part)
        return text

    def _patch(self, metric: Metric, mname: str, key: str, prev: _FamilyText) -> bytes | None:
        """A plain family written from the last call's lines: a sample that is the same object
        as one of the last call's (memtop.export.metrics keeps a cgroup's samples while they
        hold) has its line back, wherever it now stands (cgroups come and go), the others are
        written anew. None: write it whole. The last call's samples are held by the memo, so
        no other object has the identity of one of them."""
        samples = metric.samples
        if prev.lines is None or len(prev.label_texts) > 2 * len(samples) + 16:
            return None
        base = metric.name
        # C-level passes: the last call's line of each sample by identity, then this call's
        before = dict(zip(map(id, prev.samples), prev.lines, strict=True))
        lines: list[str | None] = list(map(before.get, map(id, samples)))
        used = dict(prev.label_texts)
        for i in [i for i, line in enumerate(lines) if line is None]:
            sample = samples[i]
            name, labels, value, timestamp, *_ = sample
            if self.om:
                if sample.exemplar is not None or sample.native_histogram is not None:
                    return None
            elif name != base and name != mname:
                return None
            lines[i] = self._line(name, labels, value, timestamp, used)
            if lines[i] is None:
                return None
        done = [line for line in lines if line is not None]
        self.written.update(used)
        text = (prev.head + "".join(done)).encode("utf-8")
        self.fam_texts[key] = part = _FamilyText(
            metric.documentation, samples, b"", used, prev.head, done, prev.unit
        )
        self.parts.append(part)
        return text

    def _line(
        self, name: str, labels: dict[str, str], value: float, timestamp: object, used: dict[int, LabelText]
    ) -> str | None:
        """One sample's line (None: a name to escape, or a timestamp: the library's encoder)."""
        if name not in self.names_ok:
            if not self.sample_name.fullmatch(name):
                return None
            self.names_ok.add(name)
        if timestamp is not None:
            return None
        if not labels:
            return f"{name}{self.bare}{_go_float(value)}\n"
        hit = self._labels(labels)
        if hit is None:
            return None
        used[id(labels)] = hit
        last = hit.lines.get(name)
        # the same value writes the same line; but 0.0 == -0.0 and NaN != NaN: a zero is written
        # anew (its sign shows), a NaN never matches
        if last is not None and last[0] == value and value:
            return last[1]
        line = f"{name}{{{hit.inner}}} {_go_float(value)}\n"
        hit.lines[name] = (value, line)
        return line

    def _labels(self, labels: dict[str, str]) -> LabelText | None:
        """The set's text: this call's, the memo's, or written now (None: a name to escape)."""
        hit = self.written.get(id(labels))
        if hit is not None:
            return hit
        hit = self.before.labels.get(id(labels))
        if hit is None:
            keys = tuple(labels)
            ok = self.label_sets.get(keys)
            if ok is None:
                ok = self.label_sets[keys] = all(_LABEL_NAME.fullmatch(k) for k in keys)
            if not ok:
                return None
            items = list(labels.items())
            if self.node and "node" not in labels:  # with_node's order: the sample's own wins
                items.append(("node", self.node))
            hit = LabelText(labels, ",".join([f'{k}="{_label_value(v)}"' for k, v in sorted(items)]))
        self.written[id(labels)] = hit
        return hit


def deflated(text: bytes, last: bool = False) -> bytes:
    """``text`` as raw deflate blocks of its own (no reference to anything before it) ending on
    a byte boundary, so pieces compressed apart follow each other in one deflate stream (as
    pigz joins its pieces): the last one ``last``, with the stream's final block."""
    comp = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -15)
    return comp.compress(text) + comp.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


def gzip_body(memo: TextMemo, parts: list[tuple[_FamilyText, bytes]]) -> bytes:
    """The families' texts (``parts``, in order) as one deflate stream of pieces compressed
    apart (``deflated``): consecutive families together until a piece holds PIECE_BYTES of text.
    A piece of the same families (the same memo entries, so the same text) as one of the last
    call's is that piece again, not compressed anew."""
    before, now = memo.pieces, {}
    out: list[bytes] = []
    group: list[tuple[_FamilyText, bytes]] = []
    size = 0
    for i, (part, body) in enumerate(parts):
        group.append((part, body))
        size += len(body)
        if size < PIECE_BYTES and i < len(parts) - 1:
            continue
        fams = tuple(p for p, _ in group)
        key = tuple(map(id, fams))
        hit = before.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], fams, strict=True)):
            gz = hit[1]
        else:
            gz = deflated(b"".join([b for _, b in group]))
        now[key] = (fams, gz)
        out.append(gz)
        group, size = [], 0
    memo.pieces = now
    return b"".join(out)


def gzip_trailer(crc: int, size: int) -> bytes:
    """A gzip member's end (RFC 1952): the CRC-32 and the length mod 2**32 of what it holds."""
    return struct.pack("<II", crc & 0xFFFFFFFF, size & 0xFFFFFFFF)


@dataclass
class _Built:
    """One exposition, built once per state change and served to every scrape until the next:
    the text of memtop's families (without the per-scrape self-metrics) and, once a scraper asked
    for gzip, a gzip member's header and the text compressed (``gz_prefix``, each family's text
    compressed on its own and kept with it: a family unchanged since the last build is not
    compressed again), and the text's CRC-32; each scrape appends only its few self-metric lines,
    compressed, and the member's end. ``parts``: each family's memo entry and text, in order,
    until the text is compressed (none when the library wrote it: compressed whole). ``at``:
    when the batch it shows was applied (monotonic seconds), the origin of its age."""

    key: tuple[int, str]
    text: bytes
    at: float
    parts: list[tuple[_FamilyText, bytes]] = field(default_factory=list)
    gz_prefix: bytes | None = None
    gz_crc: int = 0


@dataclass
class _Scraper:
    """What one kind of scrape (content type, gzip) asked for and when: the tick before its next
    scrape is due builds its exposition, so the scrape finds it ready."""

    accept: str
    gzip: bool
    last: float
    #: the last gaps between its scrapes (seconds); the smallest is taken as its period (two
    #: Prometheus replicas scraping out of phase look like one scraper at the shorter gap)
    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=4))
    #: whether a build was made for it since its last scrape
    built: bool = False


#: a kind of scrape not seen for this many of its periods (and at least FORGET_S) is forgotten
FORGET_PERIODS, FORGET_S = 4, 120.0


class Exporter:
    """What a textfile write or a scrape asks (``exposition``): memtop's families, built at most
    once per batch the Runner applied, plus the exporter's own counters, fresh at every scrape.

    ``background`` (the served exporter): the export loop builds after each tick what the next
    scrapes will ask for (``prebuild``), and a scrape never waits for a build: one that lands
    while the tick's build runs gets the previous tick's exposition, whose age
    (``memtop_exporter_exposition_age_seconds``) says so. Without it (tests, a textfile alone)
    a scrape of a newer state builds it."""

    def __init__(self, runner: Runner, opts: Options, *, background: bool = False) -> None:
        self.runner = runner
        # the exporter shows no pane: its state keeps nothing only a pane shows (a process's
        # sparkline and history, gone rows, the exited lists), which cost a ring update per
        # process a tick and an entry per exit (memtop.state.State.panes)
        runner.state.panes = False
        self.opts = opts
        self.background = background
        #: monotonic seconds (tests step it)
        self.clock: Callable[[], float] = time.monotonic
        self.acc = Accumulators()
        self._lock = threading.Lock()  # one build at a time: builds share running sums
        #: the scrape counter and the scrapers' schedule (never held across a build)
        self._meta = threading.Lock()
        self.scrapes = 0
        self.builds = 0
        self.dropped_total = 0
        self.last_duration_s = 0.0
        self.bpf = BpfRunTime()
        self.stats = Stats()  # the HTTP server's, once it serves
        #: bumped by every batch the Runner applies: a cached exposition of an older one is stale
        self.generation = 0
        self._generation_at = self.clock()
        self._prebuild_pending = False
        self._built: dict[str, _Built] = {}
        #: each writer's label sets and families from build to build, by content type (used
        #: under ``_lock`` only)
        self._memos: dict[str, TextMemo] = {}
        #: the kinds of scrape seen, keyed by what they ask (content type, gzip), not by the
        #: Accept header's text: a few entries whatever clients send
        self._scrapers: dict[tuple[str, bool], _Scraper] = {}
        #: without --interval, the export loop's pace (memtop.export.pace): a scrape of a state
        #: older than FRESH_S asks for a reading first
        self.pace: Pace | None = None
        runner.subscribe(self._changed)

    def _changed(self, _batch: object) -> None:
        self._generation_at = self.clock()
        # the export loop's prebuild follows: until it is done, the tick before's exposition is
        # what a scrape gets (never older: a scrape outside that window builds)
        self._prebuild_pending = self.background
        self.generation += 1

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

    def _servable(self, built: _Built | None, gzip: bool) -> bool:
        """Whether a scrape may have ``built`` without a build: it shows the state now, or (in
        the background) the tick before, while this tick's prebuild is to come or runs; so what
        is served is never more than a tick (and a build) old."""
        if built is None or (gzip and built.gz_prefix is None):
            return False
        behind = self.generation - built.key[0]
        if behind == 0:
            return True
        return self.background and behind == 1 and (self._prebuild_pending or self._lock.locked())

    def exposition(self, accept: str = "", gzip: bool = False, latest: bool = False) -> tuple[bytes, str]:
        """(body, content type) for a scraper's ``Accept``, gzip-compressed when asked.
        ``latest``: of the state now, whatever a background build is doing (a textfile write)."""
        fmt = negotiate(accept)
        ctype = fmt.content_type
        now = self.clock()
        self._note_scrape(accept, ctype, gzip, now)
        if self.pace is not None and not latest and now - self._generation_at > FRESH_S:
            self.pace.ask()  # a state that old is read anew first (node_exporter reads at each scrape)
            now = self.clock()
        built = self._built.get(ctype)
        if latest or not self._servable(built, gzip):
            with self._lock:
                built = self._fresh(accept, gzip)
        assert built is not None
        live = _encode(fmt, list(self._live_metrics(now, built)), self.opts.node)
        if fmt.openmetrics and not live.endswith(EOF):
            live += EOF
        if not gzip:
            return built.text + live, ctype
        assert built.gz_prefix is not None
        tail = deflated(live, last=True) + gzip_trailer(
            zlib.crc32(live, built.gz_crc), len(built.text) + len(live)
        )
        return built.gz_prefix + tail, ctype

    def _note_scrape(self, accept: str, ctype: str, gzip: bool, now: float) -> None:
        with self._meta:
            self.scrapes += 1
            sc = self._scrapers.get((ctype, gzip))
            if sc is None:
                self._scrapers[(ctype, gzip)] = _Scraper(accept, gzip, now)
            else:
                sc.gaps.append(now - sc.last)
                sc.last, sc.built = now, False
        if self.pace is not None:
            self.pace.wake()  # its next scrape moved: the export loop looks at when to read again

    def next_read_at(self, last: float) -> float:
        """Without --interval: when the export loop reads next, its last reading having started at
        ``last`` (memtop.export.pace): ``LEAD_S`` (at most half its period) before the next scrape
        of a scraper whose period is known (its gaps of at least half ``MIN_GAP_S``: a burst of
        scrapes says nothing of the next), unless a reading was made since that time; at the latest
        ``IDLE_READ_S`` after the last; never sooner than ``MIN_GAP_S`` after it."""
        at = last + IDLE_READ_S
        with self._meta:
            for sc in self._scrapers.values():
                # gaps under half of MIN_GAP_S say nothing of when to read (a burst of scrapes, a
                # readiness poll; a scraper that fast is answered on demand, FRESH_S apart); a
                # scraper every MIN_GAP_S has gaps on both sides of it
                gaps = [g for g in sc.gaps if g >= MIN_GAP_S / 2]
                if gaps:
                    period = min(gaps)  # a scraper faster than 2 LEAD_S: half its period
                    t = sc.last + period - min(LEAD_S, period / 2)
                    if last < t < at:
                        at = t
        return max(at, last + MIN_GAP_S)

    def _fresh(self, accept: str, gzip: bool) -> _Built:
        """The exposition of the state now for ``accept``, built unless the cache has it (the
        caller holds ``_lock``)."""
        fmt = negotiate(accept)
        ctype = fmt.content_type
        key = (self.generation, ctype)
        built = self._built.get(ctype)
        if built is None or built.key != key:
            at = self._generation_at
            memo = self._memos.setdefault(ctype, TextMemo())
            parts: list[tuple[_FamilyText, bytes]] = []
            # the self-metrics go before the end marker
            text = _encode(fmt, self._build(), self.opts.node, memo, eof=False, parts=parts)
            built = _Built(key, text, at, parts)
        if gzip and built.gz_prefix is None:
            memo = self._memos.setdefault(ctype, TextMemo())
            body_gz = gzip_body(memo, built.parts) if built.parts else deflated(built.text)
            built.gz_crc = zlib.crc32(built.text)
            # set last: a scrape that finds the prefix finds its CRC
            built.gz_prefix = GZIP_HEADER + body_gz
        built.parts = []  # the memo holds what the next build reuses; the texts are in ``text``
        self._built[ctype] = built
        return built

    def _due(self) -> list[_Scraper]:
        """The kinds of scrape to build for after this tick: those whose next scrape is due
        within a tick and a half (from their period) and not overdue by more than a tick (a
        scraper that stopped, or a burst of back-to-back scrapes, costs no build a tick
        afterwards; a scrape later than that builds for itself), or, period not known yet, not
        built for since their last scrape; those gone quiet are forgotten. A scraper far slower
        than the tick costs one or two builds per scrape, not one per tick."""
        now = self.clock()
        interval = self.runner.interval_s
        due: list[_Scraper] = []
        forgot = False
        with self._meta:
            for k, sc in list(self._scrapers.items()):
                period = min(sc.gaps) if sc.gaps else 0.0
                if now - sc.last > max(FORGET_S, FORGET_PERIODS * period):
                    del self._scrapers[k]
                    forgot = True
                    continue
                expected = sc.last + period
                if sc.gaps:
                    wanted = expected - 1.5 * interval <= now <= expected + interval
                else:
                    wanted = not sc.built
                if wanted:
                    sc.built = True
                    due.append(sc)
            if forgot:
                self._forget_formats({ctype for ctype, _ in self._scrapers})
        return due

    def _forget_formats(self, scraped: set[str]) -> None:
        """Drop the writers' memos and the cached expositions of the formats no scraper asks for
        any more (the caller holds ``_meta``): a format asked for once (a curl, a start-up check
        without Accept beside a Prometheus asking for OpenMetrics) kept a second set of lines,
        label texts and the whole text, ~5 MiB with 500 cgroups, for as long as the exporter ran.
        A build running meanwhile writes into the memo it took; the next scrape of that format
        writes it whole again."""
        for ctype in [c for c in self._memos if c not in scraped]:
            self._memos.pop(ctype, None)
        for ctype in [c for c in self._built if c not in scraped]:
            self._built.pop(ctype, None)

    def prebuild(self) -> None:
        """After a tick: build what the next scrapes will ask for (their Accept, gzip), so they
        are answered from the cache instead of waiting for a build (nothing when the cache is
        current already)."""
        due = self._due()
        try:
            if due:
                with self._lock:
                    for sc in due:
                        self._fresh(sc.accept, sc.gzip)
        finally:
            self._prebuild_pending = False

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
        c = CounterMetricFamily(
            "memtop_exporter_readings",
            "Times memtop read the kernel and applied what it read, up to the state shown (its ticks: "
            "every --interval, or without it at the scrapes' pace)",
        )
        c.add_metric([], float(self.generation))
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

    def _live_metrics(self, now: float, built: _Built | None = None) -> Iterator[Metric]:
        """The exporter's own counters, as of this scrape."""
        c = CounterMetricFamily("memtop_exporter_scrapes", "Scrapes served (and textfile writes)")
        c.add_metric([], float(self.scrapes))
        yield c
        if built is not None:
            g = GaugeMetricFamily(
                "memtop_exporter_exposition_age_seconds",
                "Seconds since the tick whose state this exposition shows was read (at most about "
                "an --interval, or 2 s without it, plus a build while one runs)",
            )
            g.add_metric([], max(0.0, now - built.at))
            yield g
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
    interval_s: float | None = 1.0,
    duration_s: float | None = None,
) -> int:
    """Run until SIGINT/SIGTERM (or ``duration_s``): serve /metrics and/or write ``textfile``
    every interval. ``interval_s`` None: every second with a textfile, else at the pace of the
    scrapes (memtop.export.pace). A textfile that cannot be written is an error (exit 2)."""
    from memtop.headless.start import begin, stop_on_signals

    # the textfile's directory is opened and checked once, before anything else starts, and its
    # earlier runs' temporary files removed
    out = Textfile(textfile) if textfile is not None else None
    server: HttpServer | None = None
    runner: Runner | None = None
    stop = asyncio.Event()
    undo = stop_on_signals(stop)
    try:
        # before the first poll: nothing the exporter does not export is ever read
        source.use_parts(EXPORTED_PARTS)
        paced = interval_s is None and out is None and listen is not None
        if interval_s is None:
            interval_s = 1.0  # with a textfile, which no scrape paces: its writes every second
        runner = Runner(source, interval_s=interval_s, checkpoints=False)
        exporter = Exporter(runner, opts, background=listen is not None)
        if paced:
            exporter.pace = Pace()
        if listen is not None:
            server = serve(listen, exporter)
            host, port = listen
            where = f"[{host}]" if ":" in host else host
            pace = " (the kernel read at each scrape's pace)" if paced else ""
            sys.stderr.write(f"memtop: serving http://{where}:{port}/metrics{pace}\n")
        if out is not None:
            sys.stderr.write(f"memtop: writing {out.path} every {interval_s:g} s\n")
        await begin(runner, stop, None, ())
        # every probe is attached: what start-up made (modules, BCC's objects, the probes) lives
        # as long as the exporter; frozen, the collector's full passes skip it for weeks
        gc.collect()
        gc.freeze()
        release_heap()
        if server is not None:
            # a scrape passes the GIL between the server's loop and its worker a few times while
            # the background build holds it; each hand-back waited up to the switch interval
            # (5 ms by default): at 1 ms, a scrape during a build no longer waits tens of ms
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        if paced:
            await follow(runner, exporter, stop, duration_s)
            return 0
        async for n in runner.ticks(stop):
            if server is not None:  # off the loop: a build must not delay the signals' handling
                await asyncio.to_thread(exporter.prebuild)
            if out is not None:
                out.write(exporter.exposition(latest=True)[0])
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
