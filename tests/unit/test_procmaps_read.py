"""/proc/PID/maps read once for every user (symbols, fault stacks, growth, swap-in kinds)."""

from __future__ import annotations

from pathlib import Path

from memtop.probes.procmaps import read_maps


def test_a_path_that_is_not_utf8_neither_hides_the_process_nor_reaches_the_terminal(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "maps").write_bytes(
        b"7f0000200000-7f0000300000 rw-s 00000000 00:01 77 /memfd:pool (deleted)\n"
        b"00400000-00401000 r-xp 00001000 fe:01 1234 /opt/\xff\x1b[2Jx\n"
        b"7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \n"
    )
    maps = read_maps(42, tmp_path)
    assert maps is not None
    assert [(m.start, m.inode, m.file_backed) for m in maps] == [
        (0x400000, 1234, True),
        (0x7F0000000000, 0, False),
        (0x7F0000200000, 77, False),  # shmem: its pages go to swap, not back to the file
    ]
    assert maps[0].path == "/opt/\\xff\\x1b[2Jx" and maps[0].offset == 0x1000
    assert maps[1].label == "[anon]"
    assert read_maps(43, tmp_path) is None


def test_a_hugetlb_mapping_groups_its_faults_as_huge_page_faults() -> None:
    """maps names anonymous hugetlb memory /anon_hugepage (a hugetlbfs inode): its faults are huge
    page faults, not a file's."""
    from memtop.probes.procmaps import parse_maps

    (m,) = parse_maps("7f0000000000-7f0000400000 rw-p 00000000 00:0f 12345 /anon_hugepage (deleted)\n")
    assert m.label == "[anon hugetlb]" and not m.file_backed
