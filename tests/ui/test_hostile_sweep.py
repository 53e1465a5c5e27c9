"""Every string from outside, through every output: the hostile-text sweep.

Each record class (``memtop.records.RECORD_TYPES``) is built with every field that holds a string
(str, and str inside tuples and optional fields) set to each string of a hostile corpus: terminal
escapes (OSC title and OSC 52 clipboard, SGR, clear screen, C1 CSI), NUL, a line break and a line
separator, bytes that are not UTF-8 as os gives them (surrogate-escaped) and a lone surrogate as
JSON gives it, bidi overrides and isolates, a 4 KiB name, Rich markup and a link. The recordings
in tests/data, every string in them so replaced (recording headers too), are then replayed and
every pane drawn through every output: the JSON and text snapshots, ``--batch`` lines, the
exporter's exposition (parsed by prometheus_client, checked by ``promtool check metrics``) and
the TUI (each pane, the process and cgroup drill-ins, their SVG parsed as XML). Nothing may carry
a raw control character, a bidi control, a surrogate or a line separator; no markup may be
interpreted; strings stay within the record limit (memtop.core.text.LIMIT)."""

from __future__ import annotations

import dataclasses
import functools
import gzip
import importlib
import io
import itertools
import json
import re
import shutil
import subprocess
import types
import typing
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from support.protobuf import profile_strings
from support.ui import tick_until, wait_until
from textual.pilot import Pilot

from memtop.core.text import LIMIT, is_clean
from memtop.export.families import Metric as Family
from memtop.export.metrics import Accumulators, families
from memtop.export.metrics import Options as ExportOptions
from memtop.export.server import text_format
from memtop.headless.frontends import _emit, _probe_line
from memtop.headless.snapshots import render
from memtop.records import KIND_KEY, RECORD_TYPES, Record, from_json
from memtop.state import State
from memtop.stream.recfile import Recording
from memtop.stream.replay import ReplaySource
from memtop.ui.app import MemtopApp
from memtop.ui.panes import pane_names
from memtop.ui.panes.base import DrillIn, Pane
from memtop.views import get_view, views

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDINGS = ("pressure", "cgroups", "kernel", "shared")

#: what an attacker names a process, a cgroup, a file, a symbol, a container with
CORPUS = (
    "\x1b]0;pwned\x07",  # OSC 0: the terminal's title
    "\x1b]52;c;cHduZWQ=\x07",  # OSC 52: the clipboard
    "\x1b[31mred\x1b[0m\x1b[2J",  # SGR, clear screen
    "c1\x9b31mcsi",  # C1 CSI
    "nul\x00byte",
    "line\nbreak\u2028sep\r",
    b"bad\xff\xfeutf8".decode("utf-8", "surrogateescape"),  # a name os could not decode
    "lone\ud800surrogate",  # what a recording's "\ud800" decodes to
    "\u202eevil\u2066rtl\u200f\u061c",  # bidi override, isolate, marks
    "[bold red]MARKUP[/]",
    "[link=https://evil.example/]L1NK[/link]",
    "\x1b[2J" + "n" * 4096,  # a 4 KiB name
)
#: what the markup strings say when shown literally; interpreted, their brackets are gone
MARKUP_WORDS = ("MARKUP", "L1NK")

#: no output may hold these: C0 but newline, DEL, C1, bidi controls, line separators, surrogates
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def assert_safe(text: str, where: str) -> None:
    m = RAW.search(text)
    assert m is None, (
        f"{where}: raw {m.group()!r} at {m.start()}: {text[max(0, m.start() - 40) : m.end() + 40]!r}"
    )
    for word in MARKUP_WORDS:
        for hit in re.finditer(word, text):
            # shown literally, the word follows its opening tag; a cell may cut it before the word
            before = text[max(0, hit.start() - 1) : hit.start()]
            assert before in ("]", "…"), (
                f"{where}: markup interpreted around {text[hit.start() - 30 : hit.end() + 10]!r}"
            )


def test_the_checks_catch_what_they_look_for() -> None:
    """The sweep can fail: each kind of leak it looks for is caught."""
    for leak in ("a\x1bb", "\x9b", "a\x00", "\u202e", "a\u2028", "x\udcff", "red MARKUP here", "L1NK"):
        with pytest.raises(AssertionError):
            assert_safe(leak, "self-test")
    assert_safe("[bold red]MARKUP[/] and …L1NK[/link]\n", "self-test")
    for bad in ("x" * (LIMIT + 2), "\x1b"):
        with pytest.raises(AssertionError):
            assert_clean_document({"k": [bad]}, "self-test")


#: the corpus as memtop shows it (escaped): at least these must be seen in the outputs
SHOWN = ("\\x1b]0;pwned\\x07", "c1\\x9b31mcsi", "bad\\xff\\xfeutf8", "\\u202eevil", "[bold red]MARKUP[/]")


def assert_lines_bounded(text: str, where: str) -> None:
    """A 4 KiB name makes a line no longer than the record limit allows: a table cell is cut, a
    line naming one thing shows it whole (memtop.core.text.LIMIT) beside a few words."""
    longest = max((len(line) for line in text.splitlines()), default=0)
    assert longest <= LIMIT + 512, f"{where}: a line of {longest} characters"


def strings_in(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from strings_in(k)
            yield from strings_in(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from strings_in(v)


def assert_clean_document(doc: Any, where: str) -> None:
    for s in strings_in(doc):
        assert is_clean(s), f"{where}: {s[:80]!r} (length {len(s)})"


# -- hostile records ---------------------------------------------------------------------------------


def hostile(hint: Any, value: Any, pick: Callable[[], str]) -> Any:
    """``value`` (a record field's JSON form, of type ``hint``) with every string in it replaced by
    the next corpus string."""
    if hint is str:
        return pick()
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return [hostile(args[0], v, pick) for v in value]
    if origin is tuple:
        return [hostile(a, v, pick) for a, v in zip(args, value, strict=False)] + list(value[len(args) :])
    if origin in (typing.Union, types.UnionType) and value is not None:
        for a in args:
            if a is not type(None):
                try:
                    return hostile(a, value, pick)
                except TypeError:
                    continue
    return value


def string_fields(cls: type[Record]) -> list[str]:
    hints = typing.get_type_hints(cls)

    def holds_str(h: Any) -> bool:
        return h is str or any(holds_str(a) for a in typing.get_args(h))

    return [f.name for f in dataclasses.fields(cls) if holds_str(hints[f.name])]


def sample_value(hint: Any) -> Any:
    """A JSON value that fits ``hint`` with one of everything (a string wherever one can be)."""
    if hint is str:
        return "s"
    if hint is bool:
        return True
    if hint is int:
        return 1
    if hint is float:
        return 1.0
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return [sample_value(args[0])]
    if origin is tuple:
        return [sample_value(a) for a in args]
    if origin in (typing.Union, types.UnionType):
        return sample_value(next(a for a in args if a is not type(None)))
    raise TypeError(hint)


def test_every_record_cleans_every_string_it_is_built_with() -> None:
    """The record boundary, for each class and each corpus string, built both ways (a probe's
    constructor call, a recording's from_json)."""
    swept = 0
    for kind, cls in RECORD_TYPES.items():
        hints = typing.get_type_hints(cls)
        fields = string_fields(cls)
        for text in CORPUS:
            data: dict[str, Any] = {KIND_KEY: kind}
            for f in dataclasses.fields(cls):
                data[f.name] = sample_value(hints[f.name])
                if f.name in fields:
                    data[f.name] = hostile(hints[f.name], data[f.name], functools.partial(str, text))
            rec = from_json(json.loads(json.dumps(data)))
            direct = cls(**{k: rec_value(v) for k, v in data.items() if k != KIND_KEY})
            assert direct == rec, kind
            for name in fields:
                assert_clean_document(getattr(rec, name), f"{kind}.{name}")
                assert_safe(json.dumps(getattr(rec, name), ensure_ascii=False), f"{kind}.{name}")
                swept += 1
    assert swept > 100  # every class with a string field was swept


def rec_value(v: Any) -> Any:
    return tuple(rec_value(x) for x in v) if isinstance(v, list) else v


@functools.cache
def hostile_recording(name: str, tmp: Path) -> Path:
    """tests/data/<name>.jsonl.gz with every string of every record and of its header replaced,
    the corpus in turn, plus a cgroup layout whose mount points are hostile."""
    lines = gzip.decompress((DATA / f"{name}.jsonl.gz").read_bytes()).splitlines()
    turn = itertools.cycle(CORPUS)

    def pick() -> str:
        return next(turn)

    header = json.loads(lines[0])
    header["hostname"] = pick()
    header["kernel"] = pick()
    probes = header.get("probes") or {}
    probes["attached"] = list(probes.get("attached", [])) + [pick()]
    probes["failed"] = [{"probe": "vmscan", "message": pick(), "hint": pick()}]
    header["probes"] = probes
    out = [json.dumps(header)]
    hints = {kind: typing.get_type_hints(cls) for kind, cls in RECORD_TYPES.items()}
    # identifiers memtop itself writes (a probe's name, a reclaim kind, an event type) stay as
    # they are in all but every fourth record, so panes still show rows to draw the rest in
    keep = {"probe", "state", "kind", "event", "scope", "what", "reason", "mode"}
    n = 0
    for i, line in enumerate(lines[1:]):
        batch = json.loads(line)
        if "records" not in batch:
            out.append(line.decode())  # the trailer
            continue
        recs = []
        for r in batch["records"]:
            h = hints[r[KIND_KEY]]
            n += 1
            for field, value in list(r.items()):
                if field == KIND_KEY or field not in h:
                    continue
                if field in keep and n % 4:
                    continue
                r[field] = hostile(h[field], value, pick)
            recs.append(r)
        if i == 0:
            recs.append(
                {
                    KIND_KEY: "cgroup_layout",
                    "mode": "hybrid",
                    "memory_mount": pick(),
                    "memory_version": 1,
                    "unified_mount": pick(),
                    "psi": True,
                    "hierarchies": [[pick(), 1, [pick()]]],
                }
            )
        batch["records"] = recs
        out.append(json.dumps(batch))
    path = tmp / f"hostile-{name}.jsonl.gz"
    path.write_bytes(gzip.compress("\n".join(out).encode() + b"\n"))
    return path


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recording]:
    tmp = tmp_path_factory.mktemp("hostile")
    return {name: Recording.load(hostile_recording(name, tmp)) for name in RECORDINGS}


def end_state(rec: Recording) -> State:
    state = rec.state_at(rec.ts_at(rec.duration_s))
    assert isinstance(state, State)
    return state


# -- outputs without Textual -------------------------------------------------------------------------


@pytest.mark.parametrize("name", RECORDINGS)
def test_snapshots_and_batch_lines(recordings: dict[str, Recording], name: str) -> None:
    state = end_state(recordings[name])
    seen = ""
    for pane, cls in views().items():
        view = cls()
        opts = view.default_options()
        if pane == "process":
            continue  # the drill-in, below, for a pid
        doc = json.loads(render(view, state, opts, "json"))
        assert_clean_document(doc, f"{name}/{pane}.json")
        assert_safe(render(view, state, opts, "json"), f"{name}/{pane}.json")
        text = render(view, state, opts, "txt")
        assert_safe(text, f"{name}/{pane}.txt")
        assert_lines_bounded(text, f"{name}/{pane}.txt")
        seen += text
        for fmt in view.extra_formats:
            assert_safe(render(view, state, opts, fmt), f"{name}/{pane}.{fmt}")
        for fmt in view.binary_formats:  # a profile's strings: no control character comes through
            strings = profile_strings(gzip.decompress(view.export_binary(state, opts, fmt)))
            assert_safe("\n".join(strings), f"{name}/{pane}.{fmt}")
        for as_json in (False, True):
            out = io.StringIO()
            _emit(out, view, state, opts, as_json, _probe_line(state))
            assert_safe(out.getvalue(), f"{name}/{pane} --batch{' --json' if as_json else ''}")
            if not as_json:
                assert_lines_bounded(out.getvalue(), f"{name}/{pane} --batch")
    # the drill-in of the process with the most RSS (its comm and cmdline are hostile)
    procs = get_view("processes").document(state, get_view("processes").default_options())["rows"]
    if procs:
        view = get_view("process")
        opts = view.default_options()
        opts.pid = procs[0]["pid"]
        assert_clean_document(view.document(state, opts), f"{name}/process")
        assert_safe(view.text(state, opts), f"{name}/process.txt")
    # the corpus was swept through: the panes show it, escaped
    assert [s for s in SHOWN if s not in seen] == []


class _Fixed:
    def __init__(self, fams: list[Family]) -> None:
        self.fams = fams

    def collect(self) -> Iterator[Any]:
        yield from self.fams


@pytest.mark.parametrize("name", RECORDINGS)
def test_exporter_exposition(recordings: dict[str, Recording], name: str, tmp_path: Path) -> None:
    state = end_state(recordings[name])
    opts = ExportOptions(pid_labels=True)
    fams = list(families(state, opts, Accumulators()))
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed(fams))
    body = generate_latest(reg).decode("utf-8")  # strict: all of it UTF-8
    # memtop's own writers, which the exporter serves, are the library's byte for byte here too
    assert text_format(fams) == body.encode("utf-8")
    # the exposition's own escapes (\\, \", \n in label values) leave one sample a line
    assert_safe(body, f"{name}: /metrics")
    labels = 0
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            for k, v in s.labels.items():
                assert_clean_document(v, f"{name}: {s.name}{{{k}}}")
                labels += 1
    assert labels
    # OpenMetrics, which a scraper may ask for (and the backfill writes): the same, by its parser
    encode, _ = choose_encoder("application/openmetrics-text; version=1.0.0")
    om = encode(reg).decode("utf-8")
    assert text_format(fams, openmetrics=True) == om.encode("utf-8")
    assert_safe(om, f"{name}: /metrics (OpenMetrics)")
    # (prometheus_client's OpenMetrics parser is untyped: taken as the callable it is)
    parser = importlib.import_module("prometheus_client.openmetrics.parser")
    parse: Callable[[str], Iterator[Metric]] = parser.text_string_to_metric_families
    for fam in parse(om):
        for s in fam.samples:
            assert_clean_document(dict(s.labels), f"{name}: {s.name} (OpenMetrics)")
    if shutil.which("promtool"):
        prom = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
        # promtool's lint also names style (counters without _total): a parse error is what fails
        assert "error while linting" not in prom.stderr and "parse" not in prom.stderr.lower(), prom.stderr


# -- the TUI -----------------------------------------------------------------------------------------


async def until(pilot: Pilot[Any], done: Callable[[], bool], what: str) -> None:
    await wait_until(pilot, done, what)


def screen_text(app: MemtopApp, where: str) -> str:
    svg = app.export_screenshot()
    root = ET.fromstring(svg)  # valid XML
    for el in root.iter():
        for attr, value in el.attrib.items():
            assert "evil.example" not in value, f"{where}: a link in {attr}"
    return "".join(root.itertext()).replace("\xa0", " ")


@pytest.mark.parametrize("name", RECORDINGS)
async def test_tui_every_pane(recordings: dict[str, Recording], name: str, tmp_path: Path) -> None:
    from memtop.ui.screens.cgroup import CgroupScreen

    rec = recordings[name]
    app = MemtopApp(ReplaySource(rec, at_s=rec.duration_s), interval_s=0.5, snapshot_dir=str(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await tick_until(app, pilot, lambda: app.state.batches > 0, "the first batch")
        for pane in pane_names():
            app.show_pane(pane)

            def shown(pane: str = pane) -> bool:
                return any(p.display and p.view_name == pane for p in app.query(Pane))

            await until(pilot, shown, pane)
            await pilot.pause()
            text = screen_text(app, f"{name}/{pane}")
            assert_safe(text, f"{name}/{pane} on screen")
            if pane == "processes":  # grouped by cgroup (C), the cgroup column first
                await pilot.press("C")
                await pilot.pause()
                assert_safe(screen_text(app, f"{name}/{pane} C"), f"{name}/{pane} grouped by cgroup")
        # the process drill-in of the process with the most RSS (its comm and cmdline are hostile)
        procs = get_view("processes").document(app.state, get_view("processes").default_options())["rows"]
        if procs:
            app.post_message(DrillIn(procs[0]["pid"]))
            await until(pilot, lambda: type(app.screen).__name__ == "ProcessScreen", "the process drill-in")
            await pilot.pause()
            assert_safe(screen_text(app, f"{name}: process drill-in"), f"{name}: process drill-in")
            app.pop_screen()
        header = str(app.query_one("#header").render())
        assert_safe(header, f"{name}: header")
        # a cgroup's drill-in, for a hostile path
        paths = [
            r["path"]
            for r in get_view("cgroups").document(app.state, get_view("cgroups").default_options())["rows"]
        ]
        if len(paths) > 1:
            app.push_screen(CgroupScreen(paths[1], app.state))
            await until(pilot, lambda: type(app.screen).__name__ == "CgroupScreen", "the cgroup drill-in")
            await pilot.pause()
            assert_safe(screen_text(app, f"{name}: cgroup drill-in"), f"{name}: cgroup drill-in")
            app.pop_screen()
        assert app.is_running  # no [@click] or link ran anything
