"""Record, replay and batch without BPF: SIGTERM leaves a whole file; damaged files are one-line
errors; older and newer recordings load; --batch prints documents."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from support import DATA, documents, kb, memtop_cmd, proc_status, wait_until

from memtop.core.errors import BadRecording, UnsafePath
from memtop.records import Batch, ProbeStatus
from memtop.records.host import MemInfo
from memtop.records.processes import ProcSample
from memtop.stream.recording import SCHEMA, open_recorder
from memtop.stream.replay import Recording, parse_time
from memtop.views import views

COMPAT = DATA / "recording-1.0.jsonl.gz"
MiB = 1 << 20


# -- SIGTERM -------------------------------------------------------------------------------------------
def _tmp_recording(directory: Path, name: str) -> Path | None:
    found = list(directory.glob(f".{name}.*.tmp"))
    return found[0] if found else None


def test_sigterm_during_record_leaves_a_whole_file(tmp_path: Path) -> None:
    out = tmp_path / "rec.jsonl.gz"
    proc = subprocess.Popen(
        memtop_cmd() + ["record", "--no-bpf", "--interval", "0.2", "--output", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen = 0
        partial: Recording | None = None

        def flushed() -> bool:
            nonlocal seen, partial
            tmp = _tmp_recording(tmp_path, out.name)
            if tmp is not None:
                copy = tmp_path / "partial.jsonl.gz"
                try:
                    copy.write_bytes(tmp.read_bytes())
                    partial = Recording.load(copy, salvage=True)  # flushed batch by batch
                    seen = len(partial.index)
                except (BadRecording, FileNotFoundError):
                    pass
            return seen >= 5

        wait_until(flushed, "five batches in the temporary recording", timeout_s=60)
        assert seen >= 5, "the recorder did not flush batches as it went"
        assert not out.exists()  # still streaming into the temporary file
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert stdout.strip() == str(out)
    assert _tmp_recording(tmp_path, out.name) is None
    rec = Recording.load(out)  # a complete file: not truncated, end line present
    assert rec.end is not None and rec.end["reason"] == "signal"
    assert len(rec.index) >= seen
    assert partial is not None
    # every batch flushed before the signal is in the file, unchanged
    assert list(partial.batches()) == list(rec.batches())[: len(partial.index)]
    assert oct(out.stat().st_mode & 0o777) == oct(0o644)


def test_record_refuses_existing_file_and_symlink(tmp_path: Path) -> None:
    existing = tmp_path / "x.jsonl.gz"
    existing.write_text("keep me")
    link = tmp_path / "l.jsonl.gz"
    link.symlink_to(tmp_path / "elsewhere")
    for target in (existing, link):
        proc = subprocess.run(
            memtop_cmd() + ["record", "--no-bpf", "--duration", "1", "-o", str(target)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
    assert existing.read_text() == "keep me"
    assert not (tmp_path / "elsewhere").exists()
    with pytest.raises(UnsafePath):
        open_recorder(existing)


# -- damaged files ----------------------------------------------------------------------------------
def _valid_bytes(tmp_path: Path) -> bytes:
    p = tmp_path / "valid.jsonl.gz"
    rec = open_recorder(p, [ProbeStatus("procfs", "attached")], interval_s=1.0, mode="procfs")
    for i in range(50):
        rec.write(Batch(ts_ns=10**9 * (i + 1), records=(MemInfo(8 * 2**30, 2**30 + i, 2**31, 0, 0, 0, 0),)))
    rec.close()
    return p.read_bytes()


def _bad_files(tmp_path: Path) -> dict[str, bytes]:
    good = _valid_bytes(tmp_path)
    corrupt = bytearray(good)
    for i in range(len(good) // 3, len(good) // 3 + 40):
        corrupt[i] ^= 0x5A
    return {
        "corrupt": bytes(corrupt),
        "truncated": good[: len(good) * 2 // 3],
        "empty": b"",
        "wrong-magic": gzip.compress(b'{"magic": "something-else", "schema": [1, 0]}\n'),
        "not-gzip-garbage": b"\x00\x01binary garbage\xff\xfe\n",
        "future-version": gzip.compress(
            json.dumps({"magic": "memtop-recording", "schema": [SCHEMA[0] + 1, 0], "memtop": "9.0"}).encode()
            + b"\n"
            + json.dumps({"ts_ns": 1, "records": []}).encode()
            + b"\n"
        ),
    }


@pytest.mark.parametrize(
    "kind", ["corrupt", "truncated", "empty", "wrong-magic", "not-gzip-garbage", "future-version"]
)
def test_damaged_recordings_are_one_line_errors(tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"{kind}.jsonl.gz"
    path.write_bytes(_bad_files(tmp_path)[kind])
    with pytest.raises(BadRecording) as info:
        Recording.load(path)
    assert "\n" not in str(info.value)
    for args in (
        ["replay", str(path)],
        ["snapshot", "--replay", str(path), "--pane", "processes", "--output", str(tmp_path / "o.json")],
        ["--batch", "--replay", str(path), "--json"],
    ):
        proc = subprocess.run(memtop_cmd() + args, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("memtop: "), proc.stderr
        assert str(path) in lines[0]
    if kind == "future-version":
        assert "newer" in str(info.value)
    if kind == "truncated":
        salvaged = Recording.load(path, salvage=True)
        assert 0 < len(salvaged.index) < 50
        assert len(list(salvaged.batches())) == len(salvaged.index)


def test_newer_minor_version_and_unknown_things_load(tmp_path: Path) -> None:
    """Forward compatibility inside a major version: unknown header fields, line types, record
    kinds and record fields are ignored (kinds counted); missing optional fields get defaults."""
    from memtop.records import KIND_KEY

    header = {
        "magic": "memtop-recording",
        "schema": [SCHEMA[0], SCHEMA[1] + 7],
        "memtop": "1.9",
        "new_header_field": {"x": 1},
    }
    proc = {
        KIND_KEY: "proc",
        "pid": 42,
        "comm": "x",
        "user": "u",
        "uid": 0,
        "rss_anon_bytes": 4096,
        "rss_file_bytes": 0,
        "rss_shmem_bytes": 0,
        "swap_bytes": 0,
        "minor_faults": 1,
        "major_faults": 0,
        "a_future_field": [1, 2],
    }
    lines = [
        header,
        {"ts_ns": 5, "records": [proc, {KIND_KEY: "from_the_future", "v": 1}, {"no": "kind"}]},
        {"a_future_line_type": True},
        {"ts_ns": 6, "records": [{KIND_KEY: "from_the_future"}]},
    ]
    path = tmp_path / "future-minor.jsonl.gz"
    path.write_bytes(gzip.compress("".join(json.dumps(x) + "\n" for x in lines).encode()))
    rec = Recording.load(path)
    assert rec.index == [5, 6]
    assert rec.skipped.kinds["from_the_future"] == 2 and rec.skipped.malformed == 1
    assert rec.skipped.lines == 1
    first = next(rec.batches())
    assert first.records == (ProcSample(42, "x", "u", 0, 4096, 0, 0, 0, 1, 0),)  # defaults filled in


# -- compatibility with the first schema ------------------------------------------------------------
def test_schema_1_0_recording_keeps_loading() -> None:
    rec = Recording.load(COMPAT)
    assert rec.schema == (1, 0)
    assert rec.header["memtop"] and rec.header["kernel"] and rec.header["hostname"]
    assert rec.skipped.total == 0, rec.skipped.describe()
    assert len(rec.index) >= 5
    state = rec.state_at(rec.last_ts_ns)
    docs = documents(state, rec.header["workloads"]["hog"])
    assert f"process@{rec.header['workloads']['hog']}" in docs
    assert docs["processes"]["rows"]
    assert state.statuses, "probe statuses were recorded"


# -- batch -----------------------------------------------------------------------------------------
def test_batch_count_3_json(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        st = proc_status(sleeper.pid)
        rss = kb(st, "RssAnon") + kb(st, "RssFile") + kb(st, "RssShmem")
        proc = subprocess.run(
            memtop_cmd() + ["--batch", "--count", "3", "--json", "--interval", "0.3", "--no-bpf"],
            capture_output=True,
            text=True,
            timeout=90,
        )
        st2 = proc_status(sleeper.pid)
        rss2 = kb(st2, "RssAnon") + kb(st2, "RssFile") + kb(st2, "RssShmem")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 3
    docs = [json.loads(line) for line in lines]
    stamps = [d["taken_at_ns"] for d in docs]
    assert stamps == sorted(stamps) and len(set(stamps)) == 3
    for d in docs:
        assert d["pane"] == "processes"
        row = next(r for r in d["rows"] if r["pid"] == sleeper.pid)
        assert min(rss, rss2) <= row["rss_bytes"] <= max(rss, rss2)


def test_batch_text_and_replay_batch() -> None:
    proc = subprocess.run(
        memtop_cmd() + ["--batch", "--count", "1", "--interval", "0.2", "--no-bpf"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("memtop ") and "PID" in proc.stdout and "RSS" in proc.stdout
    rec = Recording.load(COMPAT)
    for interval in (0.1, 1.5):  # 0.1 s, the least memtop takes: under this recording's 0.105 s gaps
        proc = subprocess.run(
            memtop_cmd() + ["--batch", "--replay", str(COMPAT), "--json", "--interval", str(interval)],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert proc.returncode == 0, proc.stderr
        stamps = [json.loads(line)["taken_at_ns"] for line in proc.stdout.splitlines()]
        if interval <= 0.1:  # every sample after the first
            assert stamps == rec.index[1:]
        else:  # downsampled to the interval, on recorded samples
            assert stamps and set(stamps) <= set(rec.index)
            gaps = [b - a for a, b in zip([rec.index[0]] + stamps, stamps, strict=False)]
            assert min(gaps) >= 0.95 * interval * 1e9
            assert len(stamps) >= int(rec.duration_s / interval / 2)


# -- snapshot --replay ----------------------------------------------------------------------------------
def test_snapshot_from_replay_every_pane(tmp_path: Path) -> None:
    rec = Recording.load(COMPAT)
    at = rec.duration_s / 2
    target_ts = max(ts for ts in rec.index if ts <= rec.ts_at(at))
    expect = documents(rec.state_at(target_ts))
    for name in views():
        if name == "process":
            continue  # needs --pid: covered by the screenshots script
        out = tmp_path / f"{name}.json"
        proc = subprocess.run(
            memtop_cmd()
            + [
                "snapshot",
                "--replay",
                str(COMPAT),
                "--at",
                f"{at}",
                "--pane",
                name,
                "--format",
                "json",
                "--output",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(out.read_text())
        assert doc["source"] == "replay" and doc["taken_at_ns"] == target_ts
        doc.pop("source")
        if name == "processes":  # the pane's own sort is the view's default
            assert doc == expect[name]
    proc = subprocess.run(
        memtop_cmd()
        + [
            "snapshot",
            "--replay",
            str(COMPAT),
            "--at",
            "99999",
            "--pane",
            "processes",
            "--output",
            str(tmp_path / "late.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "past the end" in proc.stderr


def test_parse_time() -> None:
    assert parse_time("90") == 90 and parse_time("1:30") == 90 and parse_time("1:00:01.5") == 3601.5
    for bad in ("", "x", "1::2", "-1", "1:2:3:4"):
        with pytest.raises(ValueError):
            parse_time(bad)


def test_disk_full_keeps_what_was_written(tmp_path: Path) -> None:
    """A full disk stops the recording with a message; the samples written so far stay readable."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    from memtop.core.errors import MemtopError as Err

    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        rec = open_recorder(mnt / "full.jsonl.gz", interval_s=1.0)
        procs = tuple(
            ProcSample(pid, os.urandom(6).hex(), "u", 0, pid * 4096, 0, 0, 0, pid, 0) for pid in range(1, 200)
        )  # random names: barely compressible
        written = 0
        with pytest.raises(Err) as info:
            for i in range(10_000):
                rec.write(Batch(ts_ns=i + 1, records=procs))
                written += 1
        assert "stopped" in info.value.message and "--salvage" in info.value.message
        assert written > 0
        rec.write(Batch(ts_ns=10**9, records=()))  # a stopped recorder ignores the rest
        # the samples so far are the file, cut short; no temporary file is left on the full disk
        assert not rec.tmp_path.exists()
        kept = Recording.load(rec.path, salvage=True)
        assert 0 < len(kept.index) <= written
        assert kept.index == list(range(1, len(kept.index) + 1))
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
