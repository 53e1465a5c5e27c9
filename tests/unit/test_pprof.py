"""pprof profiles (issue 40, item 3): memtop's own protobuf writer read back by pprof itself
(`go tool pprof -raw`, tests/programs.txt), frames as the leaks pane shows them turned into
functions, files and lines, and byte sampling's figures marked as estimates and samples in the
pane's text and JSON."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from memtop.core import pprof
from memtop.records import Batch, Lost, ProbeStatus
from memtop.records.leaks import LeakCalls, LeakStack, LeakTarget
from memtop.state import State
from memtop.views import Options
from memtop.views.leaks import LeaksView, profile_frame


def go_pprof(data: bytes, *args: str) -> str:
    with tempfile.TemporaryDirectory(prefix="memtop-leakbudget-unit-") as d:
        path = Path(d) / "p.pb.gz"
        path.write_bytes(data)
        proc = subprocess.run(["go", "tool", "pprof", *args, str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_varints_as_protobuf_writes_them() -> None:
    assert pprof.varint(0) == b"\x00"
    assert pprof.varint(1) == b"\x01"
    assert pprof.varint(300) == b"\xac\x02"
    assert pprof.varint(-1) == b"\xff" * 9 + b"\x01"  # int64 -1: ten bytes
    assert pprof.int_field(1, 0) == b""  # the default is left out
    assert pprof.packed(2, [1, 300]) == b"\x12\x03\x01\xac\x02"


def state(sample_bytes: int) -> State:
    st = State(mode="bpf")
    maps = (("/opt/leaker", "0123456789abcdef", 0x400000, 0x401000, 0),)
    st.apply(
        Batch(
            1_000_000_000,
            (
                ProbeStatus("leaks", "attached"),
                LeakTarget(7, "leaker\x1b[31m", "tracing", "glibc", mappings=maps),
                LeakStack(
                    7,
                    1,
                    ("leak_here+0x1b [leaker] leaky.c:30", "main+0x80 [leaker] leaky.c:90"),
                    9_961_472,
                    400,
                    0,
                    0,
                ),
                LeakStack(7, 2, ("churn+0x4 [leaker]", "0x7f00 [libc.so.6]"), 64_000, 1000, 64_000, 1000),
                Lost("leaks", "allocations (address map full)", 3),
                LeakCalls(calls=5000, sample_bytes=sample_bytes),
            ),
        )
    )
    return st


def test_profile_read_by_pprof() -> None:
    st, view = state(0), LeaksView()
    data = view.export_binary(st, Options(), "pprof")
    assert isinstance(data, bytes)
    raw = go_pprof(data, "-raw")
    assert "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt]" in raw
    samples = [line.split() for line in raw.splitlines() if line.rstrip().endswith(("1 2", "3 4"))]
    # every stack, the one with nothing outstanding too (alloc_space counts it)
    assert samples == [
        ["400", "9961472", "400", "9961472:", "1", "2"],
        ["1000", "64000", "0", "0:", "3", "4"],
    ]
    assert "leak_here leaky.c:30" in raw and "main leaky.c:90" in raw
    assert "1: 0x400000/0x401000/0x0 /opt/leaker 0123456789abcdef" in raw
    assert "pid:[7]" in raw
    assert "3 allocations (address map full) lost, not counted" in raw
    assert "Period: 1" in raw
    # the process name's escape is no escape in the profile: cleaned at the record boundary
    assert "\x1b" not in raw and "comm:[leaker\\x1b[31m]" in raw
    top = go_pprof(data, "-top", "-sample_index=inuse_space", "-unit=B")
    assert [line.split()[0] for line in top.splitlines() if line.strip().endswith("leak_here")] == [
        "9961472B"
    ]


def test_sampled_profile_carries_the_period_and_says_estimates() -> None:
    data = LeaksView().export_binary(state(524288), Options(), "pprof")
    assert isinstance(data, bytes)
    raw = go_pprof(data, "-raw")
    assert "PeriodType: space bytes" in raw and "Period: 524288" in raw
    assert "space values are estimates, object values count samples" in raw


def test_sampled_figures_marked_on_text_and_json() -> None:
    view = LeaksView()
    text = view.text(state(524288), Options())
    assert "~9.5M (estimated) in 400 samples" in text
    assert "~OUTSTANDING" in text and "SAMPLES" in text and "ALLOCS" not in text
    assert view.document(state(524288), Options())["estimates"] is True
    exact = view.text(state(0), Options())
    assert "9.5M in 400 allocations" in exact and "~" not in exact.split("allocations:")[0]
    assert view.document(state(0), Options())["estimates"] is False


def test_frames_as_shown_become_functions_files_and_mappings() -> None:
    paths = {(7, "leaker"): "/opt/leaker"}
    assert profile_frame("leak_here+0x1b [leaker] leaky.c:30", 7, paths) == pprof.Frame(
        "leak_here", "leaky.c", 30, "/opt/leaker"
    )
    assert profile_frame("operator new(unsigned long)+0x10 [libstdc++.so.6]", 7, paths) == pprof.Frame(
        "operator new(unsigned long)"
    )
    assert profile_frame("0x7f00 [leaker]", 7, paths) == pprof.Frame("0x7f00", module="/opt/leaker")
    assert profile_frame("[stack unavailable]", 7, paths) == pprof.Frame("[stack unavailable]")


def test_budgeted_profile_says_what_the_windows_saw() -> None:
    from memtop.records.leaks import LeakBudget

    st = state(0)
    st.apply(Batch(2_000_000_000, (LeakBudget(0.01, 5, 300_000_000, 15_000_000_000, 1e5, 1, 1, 10**10),)))
    raw = go_pprof(LeaksView().export_binary(st, Options(), "pprof"), "-raw")
    assert (
        "traced in windows on a 1 % CPU budget (duty 2 %, 5 windows): values count what the windows saw"
        in raw
    )
