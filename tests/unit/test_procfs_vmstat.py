"""/proc/vmstat as the /proc reader reads it (one regex pass): the counters with memtop's prefixes,
in the file's order, the first line too, and on this machine's /proc the same names a plain parse
of every line finds."""

from __future__ import annotations

from pathlib import Path

from fakeproc import make_fake_proc

from memtop.probes.procfs import VMSTAT_PREFIXES, ProcfsProbe


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
