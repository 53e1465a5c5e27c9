"""Recordings are untrusted input: bounded line length, records per sample, number of samples and
decompressed size (one-line errors naming the limit and the flag that raises it), checked values
(NaN, Infinity, huge numbers, wrong types: skipped and counted), deep nesting, and strings shown
literally (no control character from a file reaches the terminal)."""

from __future__ import annotations

import gzip
import json
import subprocess
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import pytest
from support import memtop_cmd

from memtop.core.errors import BadRecording
from memtop.records import KIND_KEY, from_json, to_json
from memtop.records.host import MemInfo
from memtop.records.processes import ProcSample
from memtop.stream.replay import Limits, Recording, ReplaySource, limits_from, parse_limit
from memtop.views import Options, get_view
from memtop.views.header import host_text

HEADER = {"magic": "memtop-recording", "schema": [1, 0], "memtop": "0.1.0", "interval_s": 1.0}
ESC = "\x1b"
HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x9b1m"


def proc(pid: int = 7, comm: str = "p") -> dict[str, Any]:
    return to_json(ProcSample(pid, comm, "root", 0, 4096, 0, 0, 0, 1, 0))


def meminfo() -> dict[str, Any]:
    return to_json(MemInfo(8 << 30, 1 << 30, 4 << 30, 0, 0, 0, 0))


def write(
    path: Path, lines: list[bytes | str | dict[str, Any]], header: dict[str, Any] | None = None
) -> Path:
    raw = [json.dumps(header or HEADER).encode()]
    for line in lines:
        if isinstance(line, dict):
            raw.append(json.dumps(line).encode())
        elif isinstance(line, str):
            raw.append(line.encode())
        else:
            raw.append(line)
    path.write_bytes(gzip.compress(b"\n".join(raw) + b"\n"))
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(memtop_cmd() + list(args), capture_output=True, text=True, timeout=60)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memtop: "), proc.stderr
    return lines[0]


# -- limits --------------------------------------------------------------------------------------------
def test_parse_limit() -> None:
    assert parse_limit("line=8M") == ("line_bytes", 8 << 20)
    assert parse_limit("size=2GiB") == ("size_bytes", 2 << 30)
    assert parse_limit("records=5") == ("records", 5)
    assert limits_from(["samples=10", "line=1k"]) == Limits(line_bytes=1024, samples=10)
    for bad in ("line", "line=", "lines=1", "records=1M", "size=-1", "size=0", "line=1.5M"):
        with pytest.raises(ValueError):
            parse_limit(bad)


def test_long_line(tmp_path: Path) -> None:
    p = write(tmp_path / "long.jsonl.gz", [{"ts_ns": 1, "records": [proc(comm="x" * 3000)] * 30}])
    with pytest.raises(BadRecording) as info:
        Recording.load(p, limits=Limits(line_bytes=64 << 10))
    msg = str(info.value)
    assert "line 2 is over 64 KiB" in msg and "--limit line=SIZE" in msg and "\n" not in msg
    assert len(Recording.load(p).index) == 1  # the default (4 MiB) takes it
    line = one_line_error(cli("replay", "--info", "--limit", "line=64K", str(p)))
    assert "the line limit" in line
    assert cli("replay", "--info", str(p)).returncode == 0


def test_gzip_bomb_of_one_line_stops_at_the_line_limit(tmp_path: Path) -> None:
    """1 GiB of zeros with no newline, 1 MiB compressed: refused at the line limit, memory bounded."""
    p = tmp_path / "bomb.jsonl.gz"
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\0" * (1 << 20)
    with open(p, "wb") as f:
        f.write(comp.compress(json.dumps(HEADER).encode() + b"\n"))
        for _ in range(1024):
            f.write(comp.compress(chunk))
        f.write(comp.flush())
    assert p.stat().st_size < 2 << 20
    tracemalloc.start()
    try:
        with pytest.raises(BadRecording, match="line limit"):
            Recording.load(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak  # a few times the 4 MiB line limit, not the 1 GiB it inflates to
    assert "the line limit" in one_line_error(cli("replay", "--info", str(p)))


def test_gzip_bomb_of_valid_lines_stops_at_the_size_limit(tmp_path: Path) -> None:
    batch = json.dumps({"ts_ns": 1, "records": [meminfo()] * 200}).encode() + b"\n"
    p = tmp_path / "many.jsonl.gz"
    p.write_bytes(gzip.compress(json.dumps(HEADER).encode() + b"\n" + batch * 2000))  # ~28 MB inflated
    with pytest.raises(BadRecording) as info:
        Recording.load(p, limits=Limits(size_bytes=1 << 20))
    assert "decompresses to over 1 MiB" in str(info.value) and "--limit size=SIZE" in str(info.value)
    line = one_line_error(
        cli(
            "snapshot",
            "--replay",
            str(p),
            "--pane",
            "processes",
            "--output",
            str(tmp_path / "o.json"),
            "--limit",
            "size=1M",
        )
    )
    assert "the size limit" in line


def test_records_and_samples_limits(tmp_path: Path) -> None:
    p = write(tmp_path / "r.jsonl.gz", [{"ts_ns": i + 1, "records": [meminfo()] * 50} for i in range(20)])
    with pytest.raises(
        BadRecording, match=r"holds over 10 records \(the records limit; raise it with --limit records=N\)"
    ):
        Recording.load(p, limits=Limits(records=10))
    with pytest.raises(
        BadRecording, match=r"holds over 5 samples \(the samples limit; raise it with --limit samples=N\)"
    ):
        Recording.load(p, limits=Limits(samples=5))
    assert len(Recording.load(p, limits=Limits(records=50, samples=20)).index) == 20
    assert "the samples limit" in one_line_error(cli("--batch", "--replay", str(p), "--limit", "samples=5"))
    bad = cli("replay", "--info", "--limit", "rows=5", str(p))
    assert bad.returncode == 2 and "NAME=VALUE" in bad.stderr and "Traceback" not in bad.stderr


# -- values --------------------------------------------------------------------------------------------
def test_bad_values_are_skipped_and_counted(tmp_path: Path) -> None:
    good = proc()
    bad = [
        {**good, "rss_anon_bytes": 1 << 64},  # over uint64
        {**good, "pid": -(1 << 63) - 1},  # under int64
        {**good, "pid": "7"},  # wrong type
        {**good, "pid": True},  # a bool is not an int here
        {**good, "comm": ["p"]},
        {**good, "comm": "x" * 70_000},  # over the string bound
        {**good, "rss_anon_bytes": 1.5},
        {KIND_KEY: "pressure", "some_avg10": "NaN-as-text", "full_avg10": 0.0},
        {KIND_KEY: "vmstat", "counters": [["pgfault"]]},  # a pair too short
        {KIND_KEY: "vmstat", "counters": "pgfault"},
        {KIND_KEY: 5},
        [1, 2],
    ]
    lines: list[bytes | str | dict[str, Any]] = [{"ts_ns": 1, "records": [good, *bad]}]
    # JSON's NaN / Infinity (Python's json takes them) and a float beyond double range
    lines.append('{"ts_ns": 2, "records": [{"_kind": "pressure", "some_avg10": NaN, "full_avg10": 0}]}')
    lines.append('{"ts_ns": 3, "records": [{"_kind": "pressure", "some_avg10": -Infinity, "full_avg10": 0}]}')
    lines.append('{"ts_ns": 4, "records": [{"_kind": "pressure", "some_avg10": 1e400, "full_avg10": 0}]}')
    lines.append('{"ts_ns": 5, "records": [{"_kind": "pressure", "some_avg10": 0.5, "full_avg10": 1}]}')
    rec = Recording.load(write(tmp_path / "v.jsonl.gz", lines))
    assert rec.skipped.malformed == len(bad) + 3
    batches = list(rec.batches())
    assert [len(b.records) for b in batches] == [1, 0, 0, 0, 1]
    assert batches[0].records[0] == from_json(good)
    assert "malformed" in rec.describe()
    state = rec.state_at(rec.last_ts_ns)
    assert [r["pid"] for r in get_view("processes").document(state, Options())["rows"]] == [7]


@pytest.mark.parametrize(
    "line, error",
    [
        ('{"ts_ns": NaN, "records": []}', "not a valid batch"),
        ('{"ts_ns": 1.0, "records": []}', "not a valid batch"),
        ('{"ts_ns": -1, "records": []}', "not a valid batch"),
        (f'{{"ts_ns": {1 << 64}, "records": []}}', "not a valid batch"),
        ('{"ts_ns": 1, "records": {}}', "not a valid batch"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"ts_ns": 1, "records": [' + "[" * 50_000 + "]" * 50_000 + "]}", "nested too deeply"),
        ('{"ts_ns": 1' + "9" * 5000 + ', "records": []}', "not JSON"),  # over Python's int digits
        ("\xff\xfe", "not UTF-8"),
    ],
    ids=[
        "nan-ts",
        "float-ts",
        "negative-ts",
        "huge-ts",
        "records-not-list",
        "deep",
        "deep-record",
        "many-digits",
        "not-utf8",
    ],
)
def test_broken_batches_are_one_line_errors(tmp_path: Path, line: str, error: str) -> None:
    p = tmp_path / "b.jsonl.gz"
    raw = line.encode("latin-1") if line == "\xff\xfe" else line.encode()
    write(p, [raw])
    with pytest.raises(BadRecording, match=error) as info:
        Recording.load(p)
    assert "\n" not in str(info.value)
    assert error in one_line_error(cli("replay", "--info", str(p)))


def test_broken_header_fields_are_ignored(tmp_path: Path) -> None:
    header = {
        **HEADER,
        "hostname": ["not", "a", "string"],
        "start_wall_ns": 1e30,
        "start_monotonic_ns": "x",
        "interval_s": float("inf"),
        "probes": {"attached": [1, {"a": 2}, "procfs"], "failed": ["x", {"probe": 3}], "other": 5},
        "nested": [[[[[[]]]]]],
    }
    p = tmp_path / "h.jsonl.gz"
    p.write_bytes(
        gzip.compress(
            json.dumps(header).replace("Infinity", "1e999").encode()
            + b"\n"
            + json.dumps({"ts_ns": 5, "records": []}).encode()
            + b"\n"
        )
    )
    rec = Recording.load(p)
    assert rec.interval_s == 1.0 and rec.wall_time(5) is None
    text = rec.describe()
    assert "recorded on ?" in text and "probes: procfs" in text
    assert ReplaySource(rec).position_text().startswith("REPLAY")


# -- strings are shown literally -------------------------------------------------------------------------
def hostile_recording(path: Path) -> Path:
    header = {
        **HEADER,
        "hostname": HOSTILE,
        "kernel": HOSTILE,
        "probes": {
            "attached": [HOSTILE],
            "failed": [{"probe": HOSTILE, "message": HOSTILE, "hint": HOSTILE}],
        },
    }
    status = {
        KIND_KEY: "probe_status",
        "probe": "procfs",
        "state": "failed",
        "message": HOSTILE,
        "hint": HOSTILE,
    }
    lines: list[bytes | str | dict[str, Any]] = [
        {
            "ts_ns": 10**9 * (i + 1),
            "records": [status, meminfo(), proc(7, HOSTILE), {**proc(8), "cmdline": HOSTILE}],
        }
        for i in range(3)
    ]
    lines.append(
        {"ts_ns": 4 * 10**9, "records": [{KIND_KEY: HOSTILE * 3}]}
    )  # an unknown kind, counted by name
    lines.append(
        '{"ts_ns": 5000000000, "records": [{"_kind": "proc", "pid": 9, "comm": "lone \\ud800 surrogate", '
        '"user": "u", "uid": 0, "rss_anon_bytes": 1, "rss_file_bytes": 0, "rss_shmem_bytes": 0, '
        '"swap_bytes": 0, "minor_faults": 0, "major_faults": 0}]}'
    )
    return write(path, lines, header)


def test_hostile_strings_never_reach_the_terminal_raw(tmp_path: Path) -> None:
    p = hostile_recording(tmp_path / "hostile.jsonl.gz")
    rec = Recording.load(p)
    # the header line names the recorded host from its facts (made from the header line here)
    for text in (rec.describe(), host_text(rec.first_facts())):
        assert ESC not in text and "\x07" not in text and "\x9b" not in text
        assert "\\x1b]0;pwned" in text  # shown literally
    info = cli("replay", "--info", str(p))
    assert info.returncode == 0 and ESC not in info.stdout and "\\x1b" in info.stdout, info
    for fmt in ("txt", "json", "svg"):
        out = tmp_path / f"snap.{fmt}"
        done = cli(
            "snapshot", "--replay", str(p), "--pane", "processes", "--format", fmt, "--output", str(out)
        )
        assert done.returncode == 0, done.stderr
        data = out.read_text(encoding="utf-8")
        assert ESC not in data and "\x07" not in data and "\\u001b" not in data, fmt
        assert "pwned" in data
    batch = cli("--batch", "--replay", str(p), "--interval", "0.5")
    assert batch.returncode == 0 and ESC not in batch.stdout and "\\x1b" in batch.stdout


def test_every_record_kind_can_be_checked() -> None:
    """A record field of a type the checker does not know would fail every load: each kind's
    plan is built here (a new kind with a new field type fails this test, not a user's replay)."""
    from memtop.records import RECORD_TYPES, _plan

    for kind in RECORD_TYPES:
        cls, fields = _plan(kind)
        assert fields and cls.KIND == kind
