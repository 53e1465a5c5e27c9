"""/proc/PID/smaps parsed as it is read (SmapsParser), smaps_rollup, and the mappings section's
state and view: parts of a read, totals from the rollup, sorting and capping."""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memtop.probes.procmaps import SmapsParser, parse_rollup, parse_smaps
from memtop.records import Batch, ProbeStatus
from memtop.records.process import MappingRow, Mappings, MappingTotals
from memtop.state import State
from memtop.state.process import ProcessState
from memtop.views import Options, get_view
from memtop.views.process import shown_mappings, sorted_mappings

ENTRY = (
    "{lo:x}-{hi:x} {mode} 00000000 08:01 1234{pad}{name}\n"
    "Size:               {size} kB\nKernelPageSize:        4 kB\nMMUPageSize:           4 kB\n"
    "Rss:                {rss} kB\nPss:                {pss} kB\nPss_Dirty:             0 kB\n"
    "Shared_Clean:          0 kB\nShared_Dirty:          {sd} kB\nPrivate_Clean:         0 kB\n"
    "Private_Dirty:         {pd} kB\nReferenced:            4 kB\nAnonymous:             4 kB\n"
    "KSM:                   0 kB\nLazyFree:              0 kB\nAnonHugePages:         0 kB\n"
    "ShmemPmdMapped:        0 kB\nFilePmdMapped:         0 kB\nShared_Hugetlb:        0 kB\n"
    "Private_Hugetlb:       0 kB\nSwap:                  {swap} kB\nSwapPss:               0 kB\n"
    "Locked:                0 kB\nTHPeligible:           0\nVmFlags: rd wr mr mw me ac sd\n"
)


def entry(i: int, name: str = "", mode: str = "rw-p") -> str:
    lo = 0x7F0000000000 + i * 0x2000
    return ENTRY.format(
        lo=lo,
        hi=lo + 0x1000,
        mode=mode,
        pad=" " * (8 if name else 1),
        name=name,
        size=4,
        rss=4 * (i % 3),
        pss=2 * (i % 3),
        sd=i % 2,
        pd=4,
        swap=i % 5,
    )


def fed(data: bytes, sizes: list[int]) -> list[MappingRow]:
    parser = SmapsParser()
    rows: list[MappingRow] = []
    pos = 0
    for n in sizes:
        rows += parser.feed(data[pos : pos + n])
        pos += n
    rows += parser.feed(data[pos:])
    return rows + parser.finish()


def test_parser_matches_the_line_parser_on_this_process() -> None:
    data = Path("/proc/self/smaps").read_bytes()
    want = parse_smaps(data.decode("utf-8", errors="replace"))
    rng = random.Random(7)
    for _ in range(5):  # cut anywhere: inside a name, a number, between entries
        sizes = [rng.randint(1, 9000) for _ in range(len(data) // 3000)]
        assert fed(data, sizes) == want
    assert fed(data, []) == want and len(want) > 10


def test_names_modes_and_odd_entries() -> None:
    names = ["", "/usr/lib/libc.so.6", "/tmp/a file with spaces (deleted)", "[heap]", "/x\x1b[31mred", "/é"]
    text = "".join(entry(i, name, "r-xp" if i % 2 else "rw-p") for i, name in enumerate(names))
    rows = fed(text.encode(), [100, 700, 3])
    assert rows == parse_smaps(text)
    assert [r[8] for r in rows] == [
        "",
        "/usr/lib/libc.so.6",
        "/tmp/a file with spaces (deleted)",
        "[heap]",
        "/x\\x1b[31mred",
        "/é",
    ]
    assert rows[2][5] == (0 + 4) * 1024 and rows[3][5] == (1 + 4) * 1024  # Shared + Private_Dirty
    assert rows[4][6] == 4 * 1024 and rows[1][7] == "r-xp"


def test_a_format_it_does_not_know_falls_back_to_the_line_parser() -> None:
    # Swap printed before Rss: no entry matches the fast pattern; every row is still right
    text = "".join(entry(i) for i in range(4))
    moved = text.replace("Rss:", "Rzz:").replace("Swap:", "Rss:").replace("Rzz:", "Swap:")
    rows = fed(moved.encode(), [50])
    assert rows == parse_smaps(moved) and len(rows) == 4
    assert [r[3] for r in rows] == [(i % 5) * 1024 for i in range(4)]


def test_rollup() -> None:
    text = (
        "55d0a0000000-7ffd00000000 ---p 00000000 00:00 0                          [rollup]\n"
        "Rss:                9000 kB\nPss:                 8000 kB\nPss_Dirty:           100 kB\n"
        "Shared_Clean:        10 kB\nShared_Dirty:         20 kB\nPrivate_Clean:        30 kB\n"
        "Private_Dirty:       40 kB\nSwap:                 50 kB\nSwapPss:              50 kB\n"
    )
    roll = parse_rollup(text)
    assert roll is not None
    assert (roll.rss_bytes, roll.pss_bytes, roll.dirty_bytes, roll.swap_bytes) == (
        9000 << 10,
        8000 << 10,
        60 << 10,
        50 << 10,
    )
    assert parse_rollup("") is None


def rows_of(n: int, start: int = 0) -> tuple[MappingRow, ...]:
    return tuple(
        (
            0x1000 * i,
            0x1000 * i + 0x1000 * (1 + i % 7),
            0x1000 * (1 + i % 7),
            1024 * i,
            512 * i,
            0,
            0,
            "rw-p",
            "",
        )
        for i in range(start, start + n)
    )


def doc(state: State) -> Mapping[str, Any]:
    return get_view("process").document(state, Options(pid=9, section="mappings"))


def test_state_takes_a_read_in_parts_and_the_rollup_first() -> None:
    state = State("bpf")
    state.apply(Batch(1, (ProbeStatus("smaps", "attached"), MappingTotals(9, 100, 90, 10, 5, 3))))
    d = doc(state)
    assert d["rows"] == [] and d["complete"] is False
    assert d["totals"] == {
        "size_bytes": None,  # not in the rollup: the table's, once it is in
        "rss_bytes": 100,
        "pss_bytes": 90,
        "dirty_bytes": 10,
        "swap_bytes": 5,
        "swap_pss_bytes": 3,
        "from": "smaps_rollup",
    }
    state.apply(Batch(2, (Mappings(9, rows_of(3), append=False, complete=False),)))
    d = doc(state)
    assert len(d["rows"]) == 3 and d["complete"] is False and d["totals"]["rss_bytes"] == 100
    state.apply(Batch(3, (Mappings(9, rows_of(4, 3), append=True, complete=True),)))
    d = doc(state)
    t = state.get(ProcessState).target(9)
    assert t is not None and t.mappings_reading is None and len(t.mappings) == 7
    assert d["complete"] is True and [r["start"] for r in d["rows"]] == [0x1000 * i for i in range(7)]
    assert d["totals"]["size_bytes"] == sum(r[2] for r in rows_of(7))
    # a later read comes whole and replaces the table; the shown one stays until then
    state.apply(Batch(4, (Mappings(9, rows_of(2, 100)),)))
    assert [r["start"] for r in doc(state)["rows"]] == [0x1000 * 100, 0x1000 * 101]


def test_a_recording_without_rollup_sums_its_rows() -> None:
    state = State("replay")
    state.apply(Batch(1, (Mappings(9, rows_of(5)),)))  # as recordings made before parts hold
    d = doc(state)
    assert d["complete"] is True and d["totals"]["from"] == "smaps"
    assert d["totals"]["rss_bytes"] == sum(r[3] for r in rows_of(5))


def test_sorting_and_the_first_n() -> None:
    rows = rows_of(50)
    by_size = sorted_mappings(rows, "size_bytes", True, 10)
    assert len(by_size) == 10
    assert [m[2] for m in by_size] == sorted((m[2] for m in rows), reverse=True)[:10]
    assert sorted_mappings(rows, "", True) == list(rows)  # no order asked: address order
    assert sorted_mappings(rows, "start", True, 3) == list(reversed(rows))[:3]
    assert shown_mappings(None) == ((), False)


def test_a_slow_rollup_is_read_less_often(tmp_path: Path, monkeypatch: Any) -> None:
    """smaps_rollup walks the target's page tables: a read that takes long (a large target in a
    swap storm) is not repeated before reading has taken at most rollup_duty of the time."""
    import time

    from memtop.probes import smaps
    from memtop.probes.procmaps import Rollup

    pid_dir = tmp_path / "9"
    pid_dir.mkdir()
    (pid_dir / "stat").write_text("9 (t) S 1 1 1 0 -1 0\n")
    (pid_dir / "smaps").write_text("")
    reads: list[float] = []

    def slow_rollup(pid: int, proc_root: str | Path = "/proc") -> Rollup:
        reads.append(time.monotonic())
        time.sleep(0.01)
        return Rollup(1 << 20, 1 << 20, 0, 0)

    monkeypatch.setattr(smaps, "read_rollup", slow_rollup)
    for duty, want in ((smaps.ROLLUP_DUTY, 1), (1.0, 4)):
        reads.clear()
        probe = smaps.SmapsProbe(9, str(tmp_path))
        probe.rollup_duty = duty
        probe.load()
        try:
            assert any(isinstance(r, MappingTotals) for r in probe.poll())
            for _ in range(3):
                probe.poll()
        finally:
            probe.close()
        # 10 ms at 0.25 % of a core: the next read is 4 s away; at a whole core, at once
        assert len(reads) == want, duty
