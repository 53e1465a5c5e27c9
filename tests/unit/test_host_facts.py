"""Host facts are records: a recording carries the recorded machine's kernel, host name, headers
and BPF availability, and a replay (TUI header data, --batch text) shows those, not the viewer's.
A recording older than the record gets facts made from its header line."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from support import DATA, memtop_cmd
from support import RECORDED_FACTS as RECORDED

from memtop.records import Batch, from_json, to_json
from memtop.records.host import HostFacts, MemInfo
from memtop.state import State
from memtop.state.host import HostState
from memtop.stream.recording import open_recorder
from memtop.stream.replay import Recording, ReplaySource
from memtop.views.header import HeaderLine, header_line

COMPAT = DATA / "recording-1.0.jsonl.gz"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "HOME=/tmp"]


def text_of(segments: tuple[object, ...]) -> str:
    return "".join(getattr(s, "text", "") for s in segments)


def line_text(head: HeaderLine) -> str:
    return text_of(head.lead) + text_of(head.rest)


def write_recording(path: Path, facts: HostFacts | None) -> Path:
    """A recording made here (its header line names this machine) whose records say ``facts``."""
    rec = open_recorder(path, interval_s=1.0, mode="procfs")
    mem = MemInfo(8 << 30, 1 << 30, 4 << 30, 0, 0, 0, 0)
    for i in range(4):
        first = (facts,) if facts is not None and i == 0 else ()
        rec.write(Batch(ts_ns=(i + 1) * 10**9, records=(*first, mem)))
    rec.close()
    return path


def test_host_facts_round_trip_json() -> None:
    data = to_json(RECORDED)
    assert data["_kind"] == "host_facts"
    assert from_json(data) == RECORDED
    assert from_json(data) == RECORDED


def test_replay_shows_the_recorded_machine(tmp_path: Path) -> None:
    assert RECORDED.hostname != socket.gethostname() and RECORDED.kernel_release != os.uname().release
    rec = Recording.load(write_recording(tmp_path / "r.jsonl.gz", RECORDED))
    assert rec.synthetic_facts is None  # the file has its own
    assert rec.header["hostname"] == socket.gethostname()  # the header line names this machine...
    first = next(rec.batches())
    assert first.records[0] == RECORDED  # ...the records the recorded one, and they win
    state = rec.state_at(rec.last_ts_ns)
    assert state.get(HostState).facts == RECORDED
    head = header_line(state)
    text = line_text(head)
    assert "host recorded-host (5.10.0-recorded)" in text
    assert "stand-in" not in text  # the help names them (the header was crowded)
    assert socket.gethostname() not in text.replace("recorded-host", "")
    assert os.uname().release not in text
    banner = text_of(head.banner)
    assert "BPF unavailable: no BPF on the recorded host" in banner and "Fix: it was a test" in banner
    info = rec.describe()  # replay --info
    assert (
        "stand-in headers 5.10.0-99-amd64" in info and "BPF unavailable: no BPF on the recorded host" in info
    )


def test_batch_replay_head_names_the_recorded_host(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "r.jsonl.gz", RECORDED)
    done = subprocess.run(
        memtop_cmd() + ["--batch", "--replay", str(path), "--interval", "1", "--count", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    heads = [line for line in done.stdout.splitlines() if line.startswith("memtop ")]
    assert len(heads) == 2
    for head in heads:
        assert "source replay  host recorded-host (5.10.0-recorded)  probes" in head
        assert os.uname().release not in head


def test_old_recording_gets_facts_from_its_header() -> None:
    rec = Recording.load(COMPAT)
    facts = rec.synthetic_facts
    offset = rec.header["start_wall_ns"] - rec.header["start_monotonic_ns"]  # its clock, too
    assert facts == HostFacts(
        kernel_release=rec.header["kernel"], hostname=rec.header["hostname"], wall_minus_monotonic_ns=offset
    )
    assert facts.kernel_release == "6.18.44-fc-v669" and facts.hostname == "vm"
    assert facts.headers_kind == "" and facts.bpf_error == ""  # not known: none shown
    assert next(rec.batches()).records[0] == facts
    assert facts not in next(rec.batches(1)).records  # only the first batch carries them
    state = rec.state_at(rec.first_ts_ns)
    text = line_text(header_line(state))
    assert "host vm (6.18.44-fc-v669)" in text and "headers:" not in text
    assert header_line(state).banner == ()


async def test_seeking_back_to_the_start_keeps_the_facts() -> None:
    """A rewind starts the state afresh: the first batch, facts included, is applied again."""
    rec = Recording.load(COMPAT)
    src = ReplaySource(rec, at_s=rec.duration_s)

    class Holder:
        state = State(mode="replay")

        def apply(self, batch: Batch) -> None:
            self.state.apply(batch)

        def reset(self) -> None:
            self.state = State(mode="replay")

    held = Holder()
    src.subscribe(held.apply)
    src.on_reset(held.reset)
    await src.start()
    assert held.state.batches == len(rec.index)
    assert held.state.get(HostState).facts == rec.synthetic_facts
    src.goto(0)
    assert held.state.batches == 1 and held.state.get(HostState).facts == rec.synthetic_facts


def test_header_without_host_gets_no_facts(tmp_path: Path) -> None:
    p = tmp_path / "bare.jsonl"
    p.write_text(
        '{"magic": "memtop-recording", "schema": [1, 0]}\n{"ts_ns": 5, "records": []}\n', encoding="utf-8"
    )
    rec = Recording.load(p)
    assert rec.synthetic_facts is None and next(rec.batches()).records == ()


def btime_ns() -> int:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return int(line.split()[1]) * 10**9
    raise AssertionError("no btime in /proc/stat")


def test_headless_recording_carries_this_hosts_facts(tmp_path: Path) -> None:
    """`memtop record` opens its file after the first batch went by: the facts come in its prelude."""
    out = tmp_path / "live.jsonl.gz"
    done = subprocess.run(
        memtop_cmd() + ["record", "--no-bpf", "--interval", "0.2", "--duration", "0.4", "-q", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    rec = Recording.load(out)
    assert rec.synthetic_facts is None
    facts = [r for r in next(rec.batches()).records if isinstance(r, HostFacts)]
    assert facts, "the first batch has no host facts"
    assert facts[-1].kernel_release == os.uname().release
    assert facts[-1].hostname == socket.gethostname()
    assert facts[-1].boot_time_ns == btime_ns()
    assert facts[-1].headers_kind == "" and facts[-1].bpf_error == ""  # --no-bpf: BPF never tried


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to drop to an unprivileged user"
)
def test_unprivileged_recording_says_bpf_is_unavailable() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="memtop-hostfacts-"))  # pytest's tmp dirs are 0700
    tmp.chmod(0o777)
    try:
        out = tmp / "nobody.jsonl.gz"
        done = subprocess.run(
            NOBODY + memtop_cmd() + ["record", "--duration", "0.5", "-q", "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        rec = Recording.load(out)
        state = rec.state_at(rec.last_ts_ns)
        facts = state.get(HostState).facts
        assert facts is not None and "not running as root" in facts.bpf_error and facts.bpf_hint
        banner = text_of(header_line(state).banner)
        assert "BPF unavailable: not running as root" in banner and "Fix: run: sudo memtop" in banner
    finally:
        shutil.rmtree(tmp)
