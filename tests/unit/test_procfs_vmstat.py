"""/proc/vmstat as the /proc reader reads it (one regex pass): the counters with memtop's prefixes,
in the file's order, the first line too, and on this machine's /proc the same names a plain parse
of every line finds."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakeproc import make_fake_proc

from memtop.probes.procfs import MEMINFO_NAMES, VMSTAT_LINES, VMSTAT_PREFIXES, ProcfsProbe


def test_vmstat_counters_with_the_prefixes_in_file_order(tmp_path: Path) -> None:
    root = make_fake_proc(tmp_path / "proc")
    (root / "vmstat").write_text(
        "pgscan_kswapd 900\nnr_free_pages 5\npgfault 10\nthp_fault_alloc 2\nnr_anon_pages 1\n"
        "workingset_refault_anon 7\noom_kill 1\npgsteal_direct 18446744073709551615\n"
    )
    got = ProcfsProbe(root).vmstat()
    assert got is not None
    assert got.counters == (
        ("pgscan_kswapd", 900),
        ("pgfault", 10),
        ("thp_fault_alloc", 2),
        ("workingset_refault_anon", 7),
        ("oom_kill", 1),
        ("pgsteal_direct", 18446744073709551615),
    )


def test_vmstat_names_match_a_plain_parse_of_the_real_file() -> None:
    got = ProcfsProbe().vmstat()
    assert got is not None
    names = [line.split(" ", 1)[0] for line in Path("/proc/vmstat").read_text().splitlines()]
    assert [k for k, _ in got.counters] == [n for n in names if n.startswith(VMSTAT_PREFIXES)]


def test_an_unchanged_host_file_is_the_same_record(tmp_path: Path) -> None:
    """meminfo, vmstat and pressure/memory read with the text of the last read hand on the record
    built of it (not parsed nor cleaned again); a changed text is read anew, a file gone is None
    and forgotten."""
    root = make_fake_proc(tmp_path / "proc")
    (root / "vmstat").write_text("pgfault 10\npgscan_kswapd 1\n")
    (root / "pressure").mkdir(exist_ok=True)
    (root / "pressure" / "memory").write_text(
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=2\n"
    )
    p = ProcfsProbe(root)
    for read in (p.vmstat, p.meminfo, p.pressure):
        first = read()
        assert first is not None and read() is first
    before = p.vmstat()
    (root / "vmstat").write_text("pgfault 11\npgscan_kswapd 1\n")
    after = p.vmstat()
    assert after is not None and after is not before
    assert after.counters == (("pgfault", 11), ("pgscan_kswapd", 1))
    (root / "vmstat").unlink()
    assert p.vmstat() is None
    (root / "vmstat").write_text("pgfault 11\npgscan_kswapd 1\n")
    again = p.vmstat()
    assert again == after and again is not after


def findall(raw: bytes) -> tuple[tuple[str, int], ...]:
    """What the one regex pass finds: the counters a fresh reader gives."""
    return tuple((k.decode(), int(v)) for k, v in VMSTAT_LINES.findall(b"\n" + raw))


LINES = b"nr_free_pages 5\npgfault 10\nnr_anon_pages 1\npgscan_kswapd 900\noom_kill 1\n"


@pytest.mark.parametrize(
    ("later", "matched"),
    [
        (LINES.replace(b"pgfault 10", b"pgfault 11").replace(b"nr_free_pages 5", b"nr_free_pages 77"), True),
        (LINES, True),
        (LINES.replace(b"oom_kill 1", b"oom_kill 18446744073709551615"), True),
        # another layout: a line more, one less, renamed, a value that is not digits, no newline
        (LINES + b"pgsteal_direct 3\n", False),
        (LINES.replace(b"nr_anon_pages 1\n", b""), False),
        (LINES.replace(b"nr_anon_pages 1\n", b"pgmajfault 4\n"), False),
        (LINES.replace(b"pgfault 10", b"pgfault -1"), False),
        (LINES.replace(b"pgfault 10", b"pgfault 10 x"), False),
        (LINES.replace(b"nr_free_pages 5", b"nr_free_pages -5"), True),  # a line not counted
        (LINES.rstrip(b"\n"), False),
    ],
)
def test_the_layout_of_the_last_read_parses_a_text_as_the_regex_pass(later: bytes, matched: bool) -> None:
    """Every read after the first is matched whole against the pattern of the lines it had (one
    match, its groups the counters); a text that match takes gives the counters the regex pass
    gives, and any other layout is parsed by that pass (and its own pattern made)."""
    p = ProcfsProbe(Path("/nonexistent"))
    assert p._vmstat(LINES).counters == findall(LINES)  # noqa: SLF001 - the first read makes the pattern
    layout = p._vm_layout  # noqa: SLF001
    assert layout is not None
    assert (layout[0].fullmatch(later) is not None) == matched
    assert p._vmstat(later).counters == findall(later)  # noqa: SLF001


@pytest.mark.parametrize(
    "raw",
    [
        b"pgfault 10\npgscan_kswapd x\n",  # a counter's line the regex pass does not take
        b"pgfault 10\nnospace\n",
        b"pgfault 10",
    ],
)
def test_a_text_of_no_fixed_layout_is_parsed_by_the_regex_pass_every_time(raw: bytes) -> None:
    p = ProcfsProbe(Path("/nonexistent"))
    assert p._vmstat(raw).counters == findall(raw)  # noqa: SLF001
    assert p._vm_layout is None  # noqa: SLF001


def test_the_real_files_layout_holds_from_read_to_read() -> None:
    p = ProcfsProbe()
    p.load()
    try:
        for _ in range(3):
            raw = p.read_host("vmstat")
            assert raw is not None
            assert p._vmstat(raw).counters == findall(raw)  # noqa: SLF001
            layout = p._vm_layout  # noqa: SLF001
            assert layout is not None and layout[0].fullmatch(raw) is not None
    finally:
        p.close()


MEMINFO = (Path(__file__).resolve().parents[1] / "data" / "kernel" / "meminfo-6.18.txt").read_bytes()


def parsed_whole(raw: bytes) -> object:
    """The MemInfo a fresh reader makes of ``raw``: parse_meminfo of every line."""
    return ProcfsProbe(Path("/nonexistent"))._meminfo(raw)  # noqa: SLF001


@pytest.mark.parametrize(
    ("later", "matched"),
    [
        (MEMINFO.replace(b"23619028 kB", b"3619029 kB").replace(b"504912 kB", b"1504912 kB"), True),
        (MEMINFO, True),
        (MEMINFO.replace(b"KernelStack:", b"KernelStack: x"), True),  # a line not made a figure
        # another layout, or a text parse_meminfo reads otherwise: a line more, one less, a
        # figure's value not digits, a tab, a line split by a vertical tab, no newline at the end
        (MEMINFO + b"MemFree: 5 kB\n", False),
        (MEMINFO.replace(b"Buffers:", b"Bufers:"), False),
        (MEMINFO.replace(b"MemFree:", b"MemFree: x"), False),
        (MEMINFO.replace(b"MemFree:        ", b"MemFree:\t"), False),
        (MEMINFO.replace(b"KernelStack:", b"KernelStack: 1\x0bMemFree: 3 kB\nX:"), False),
        (MEMINFO.rstrip(b"\n"), False),
    ],
)
def test_meminfos_layout_parses_a_text_as_the_whole_parse(later: bytes, matched: bool) -> None:
    """meminfo read again is matched whole against the pattern of its lines (one match, the dozen
    figures its groups); whatever that match takes gives the MemInfo a parse of every line
    gives, and any other text is parsed whole."""
    assert MEMINFO != later or matched
    p = ProcfsProbe(Path("/nonexistent"))
    assert p._meminfo(MEMINFO) == parsed_whole(MEMINFO)  # noqa: SLF001
    layout = p._mi_layout  # noqa: SLF001
    assert layout is not None and set(layout[1]) <= set(MEMINFO_NAMES)
    assert (layout[0].fullmatch(later) is not None) == matched
    assert p._meminfo(later) == parsed_whole(later)  # noqa: SLF001


def test_the_real_meminfos_layout_holds_from_read_to_read() -> None:
    p = ProcfsProbe()
    p.load()
    try:
        for _ in range(3):
            raw = p.read_host("meminfo")
            assert raw is not None
            assert p._meminfo(raw) == parsed_whole(raw)  # noqa: SLF001
            layout = p._mi_layout  # noqa: SLF001
            assert layout is not None and layout[0].fullmatch(raw) is not None
    finally:
        p.close()


def test_reclaim_is_told_by_its_counters_alone_wherever_they_are(tmp_path: Path) -> None:
    """The reclaim counters are picked where the last list of names had them: a move of one says
    reclaim, of another counter not, and another list of names finds them again."""
    from memtop.records.host import VmStat

    p = ProcfsProbe(tmp_path)

    def told(*pairs: tuple[str, int]) -> bool:
        return p._reclaimed(VmStat(counters=pairs))  # noqa: SLF001

    assert told(("pgfault", 1), ("pgscan_kswapd", 5), ("pswpout", 2))  # the first: cannot tell
    assert not told(("pgfault", 9), ("pgscan_kswapd", 5), ("pswpout", 2))
    assert told(("pgfault", 9), ("pgscan_kswapd", 6), ("pswpout", 2))
    assert told(("pgfault", 9), ("pgscan_kswapd", 6), ("pswpout", 3))
    assert not told(("pgfault", 9), ("pgscan_kswapd", 6), ("pswpout", 3))
    # the counters elsewhere (another layout): found there, and a move there still told
    assert not told(("pgscan_kswapd", 6), ("pgfault", 9), ("pswpout", 3))
    assert told(("pgscan_kswapd", 6), ("pgfault", 9), ("zswpout", 1), ("pswpout", 3))
    assert told(("pgscan_kswapd", 6), ("pgfault", 9), ("zswpout", 2), ("pswpout", 3))
    assert not told(("pgscan_kswapd", 6), ("pgfault", 10), ("zswpout", 2), ("pswpout", 3))
    assert p._reclaimed(None)  # noqa: SLF001
