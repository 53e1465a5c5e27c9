"""A failed write is an error, never a success: snapshots and recordings on a full disk (a real
64 KiB tmpfs), at every step of the write (data, flush, fsync, close, rename), with target names
of 255 and 256 bytes, and Ctrl-C during a snapshot. Headless: one line on stderr, nothing on
stdout, exit 2 (130 for Ctrl-C); never a temporary file left behind."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

import pytest
from support import fill, fill_up, memtop_cmd, small_tmpfs, wait_until

from memtop.core.errors import BadRecording, UnsafePath, WriteFailed
from memtop.linux import files
from memtop.records import Batch
from memtop.records.host import MemInfo
from memtop.stream.recfile import Recording
from memtop.stream.recording import open_recorder

DATA = Path(__file__).resolve().parent.parent / "data"
PRESSURE = DATA / "pressure.jsonl.gz"


@pytest.fixture
def small() -> Iterator[Path]:
    with small_tmpfs("64k") as mnt:
        yield mnt


def names(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


def run_memtop(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(memtop_cmd() + args, capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == "", proc.stdout  # the path is printed only for a complete file
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memtop: "), proc.stderr
    return lines[0]


# -- the temporary name ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["a" * 255, "é" * 127 + "a", "x" * 240 + "€" * 5])
def test_a_255_byte_name_is_written(tmp_path: Path, name: str) -> None:
    """The temporary name (.NAME.XXXXXXXX.tmp) once exceeded NAME_MAX for names of 245-255 bytes."""
    assert len(name.encode()) == 255
    prefix = files.temp_prefix(name)
    assert len(prefix.encode()) + 8 + len(".tmp") <= files.NAME_MAX
    prefix.encode()  # cut at a character boundary: still valid UTF-8
    path = files.write_atomic(tmp_path / name, "data")
    assert path.read_text() == "data" and names(tmp_path) == {name}
    rec = open_recorder(tmp_path / ("r" * 255), interval_s=1.0)
    rec.write(Batch(ts_ns=1, records=()))
    assert rec.close() == tmp_path / ("r" * 255)
    assert len(Recording.load(tmp_path / ("r" * 255)).index) == 1
    assert names(tmp_path) == {name, "r" * 255}


def test_a_256_byte_name_is_one_line_error(tmp_path: Path) -> None:
    target = tmp_path / ("a" * 256)
    with pytest.raises(UnsafePath) as info:
        files.write_atomic(target, "data")
    assert "too long" in str(info.value) and "\n" not in str(info.value)
    assert names(tmp_path) == set()
    proc = run_memtop(["snapshot", "--replay", str(PRESSURE), "--pane", "processes", "--output", str(target)])
    assert "too long" in assert_one_line_error(proc)
    assert names(tmp_path) == set()
    ok = tmp_path / ("a" * 255)
    proc = run_memtop(["snapshot", "--replay", str(PRESSURE), "--pane", "processes", "--output", str(ok)])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(ok) and names(tmp_path) == {ok.name}


# -- every step of the write fails -------------------------------------------------------------------
class FailingFile:
    """The writer's file, failing ENOSPC at one method (what a full disk does at that step)."""

    def __init__(self, real: Any, step: str) -> None:
        self.real, self.step = real, step

    def _maybe_fail(self, step: str) -> None:
        if step == self.step:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def write(self, data: bytes) -> int:
        self._maybe_fail("write")
        return int(self.real.write(data))

    def flush(self) -> None:
        self._maybe_fail("flush")
        self.real.flush()

    def close(self) -> None:
        try:
            self._maybe_fail("close")
        finally:
            self.real.close()

    def fileno(self) -> int:
        return int(self.real.fileno())


@pytest.mark.parametrize("step", ["write", "flush", "fsync", "close", "link", "replace"])
def test_failure_at_any_step_leaves_nothing(tmp_path: Path, step: str, monkeypatch: Any) -> None:
    def enospc(*args: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    force = step == "replace"  # --force renames, otherwise the final name is a hard link
    if step in ("fsync", "link", "replace"):
        monkeypatch.setattr(os, step, enospc)
    w = files.AtomicWriter(tmp_path / "out.json", force=force)
    w.file = cast(BinaryIO, FailingFile(w.file, step))  # the methods the writer calls
    with pytest.raises(WriteFailed) as info:
        w.write(b"{}")
        w.commit()
    assert "No space left on device" in str(info.value) and "\n" not in str(info.value)
    assert names(tmp_path) == set()


def test_interrupt_during_commit_leaves_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        files.write_atomic(tmp_path / "out.json", "{}")
    assert names(tmp_path) == set()


# -- a real full disk ---------------------------------------------------------------------------------
def test_write_atomic_on_full_tmpfs(small: Path) -> None:
    fill(small)
    for size in (10, 200_000):  # in the buffer until the flush; failing in write itself
        with pytest.raises(WriteFailed, match="No space left"):
            files.write_atomic(small / "snap.json", "x" * size)
        assert names(small) == {"filler"}


def test_recorder_on_full_tmpfs_leaves_nothing(small: Path) -> None:
    fill(small)
    with pytest.raises(WriteFailed, match="nothing was written"):
        open_recorder(small / "r.jsonl.gz", interval_s=1.0)
    assert names(small) == {"filler"}


def test_recorder_filling_tmpfs_keeps_the_whole_samples(small: Path) -> None:
    """A disk filling up mid-recording: the samples so far are the file (cut short, --salvage
    replays them), no temporary file is left, and the error says so."""
    fill(small, leave_bytes=8192)
    target = small / "r.jsonl.gz"
    rec = open_recorder(target, interval_s=1.0)
    written = 0
    with pytest.raises(WriteFailed) as info:
        for i in range(100_000):
            # random bytes: barely compressible, so the 8 KiB fill up within a few samples
            mem = MemInfo(int.from_bytes(os.urandom(6)), i, 0, 0, 0, 0, 0)
            rec.write(Batch(ts_ns=10**9 * (i + 1), records=(mem,) * 50))
            written += 1
    msg = str(info.value)
    assert f"after {written} samples" in msg and "--salvage" in msg and "\n" not in msg
    assert names(small) == {"filler", "r.jsonl.gz"}
    rec.write(Batch(ts_ns=10**12, records=()))  # a stopped recorder ignores the rest
    assert rec.close() == target  # and closing it again is harmless
    with pytest.raises(BadRecording, match="truncated"):
        Recording.load(target)
    kept = Recording.load(target, salvage=True)
    assert len(kept.index) == written > 0
    assert kept.index == [10**9 * (i + 1) for i in range(written)]
    assert len(list(kept.batches())) == written


def test_recorder_finishing_on_full_disk(tmp_path: Path, monkeypatch: Any) -> None:
    """fsync failing at close (what a full disk or an I/O error does there): the samples are
    kept, cut short; the error is a WriteFailed; no temporary file."""
    target = tmp_path / "r.jsonl.gz"
    rec = open_recorder(target, interval_s=1.0)
    for i in range(3):
        rec.write(Batch(ts_ns=i + 1, records=()))

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", eio)
    with pytest.raises(WriteFailed, match="could not be finished after 3 samples"):
        rec.close()
    monkeypatch.undo()
    assert names(tmp_path) == {"r.jsonl.gz"}
    assert len(Recording.load(target, salvage=True).index) == 3


# -- the command line -----------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["json", "svg"])
def test_cli_snapshot_on_full_disk(small: Path, fmt: str) -> None:
    fill(small)
    out = small / f"snap.{fmt}"
    proc = run_memtop(
        ["snapshot", "--replay", str(PRESSURE), "--pane", "processes", "--format", fmt, "--output", str(out)]
    )
    assert "No space left on device" in assert_one_line_error(proc)
    assert names(small) == {"filler"}


def test_cli_record_on_full_disk(small: Path) -> None:
    fill(small)
    out = small / "r.jsonl.gz"
    proc = run_memtop(["record", "--no-bpf", "--output", str(out), "--duration", "2", "--interval", "0.2"])
    assert "No space left on device" in assert_one_line_error(proc)
    assert names(small) == {"filler"}


def recorded_samples(directory: Path) -> int:
    """The whole samples in the recording memtop is writing in ``directory`` (its temporary file,
    sync-flushed after every sample: what a salvage would read), 0 before it exists."""
    temps = [p for p in directory.iterdir() if p.name.endswith(".tmp")]
    if not temps:
        return 0
    try:
        data = temps[0].read_bytes()
    except FileNotFoundError:  # renamed or removed meanwhile
        return 0
    text = zlib.decompressobj(wbits=31).decompress(data)  # a gzip stream cut short is fine
    return max(0, text.count(b"\n") - 1)  # the first line is the header


def test_cli_record_filling_the_disk() -> None:
    """The disk fills up once memtop has recorded two samples (filled then, whatever a sample's
    size on this machine: 500 cgroups made the first one bigger than a fixed slack): exit 2, the
    samples so far kept at the target and the message says how many and that --salvage reads
    them."""
    with small_tmpfs("16m") as small:
        out = small / "r.jsonl.gz"
        proc = subprocess.Popen(
            memtop_cmd()
            + ["record", "--no-bpf", "--output", str(out), "--duration", "120", "--interval", "0.1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:

            def two_samples() -> bool:
                assert proc.poll() is None, proc.communicate()
                return recorded_samples(small) >= 2

            wait_until(two_samples, "two samples recorded", 60)
            # full now; kept full until memtop's next sample needs a page (a sample may still fit
            # in the last page's slack)
            fill_up(small)
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            proc.kill()
        line = assert_one_line_error(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
        assert "No space left on device" in line and "--salvage" in line
        assert names(small) == {"filler", "r.jsonl.gz"}
        kept = len(Recording.load(out, salvage=True).index)
        assert kept >= 2 and f"after {kept} samples" in line, (kept, line)


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout_s: float = 60) -> None:
    def ready() -> bool:
        assert proc.poll() is None, proc.communicate()
        return path.exists()

    wait_until(ready, "memtop ready", timeout_s)


def test_cli_snapshot_interrupted(tmp_path: Path) -> None:
    """Ctrl-C while a snapshot waits: exit 130, one line, no file, no temporary file."""
    out = tmp_path / "out" / "snap.json"
    out.parent.mkdir()
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        memtop_cmd() + ["snapshot", "--no-bpf", "--pane", "processes", "--output", str(out), "--after", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MEMTOP_READY_FILE": str(ready)},
    )
    try:
        _wait_for(ready, proc)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert "interrupted" in assert_one_line_error(done, 130)
    assert names(out.parent) == set()
