"""The exporter lists the page cache of every process's open and mapped files only when asked
(``--page-cache-listing``): that scan of every process's fds and maps was an eighth of its CPU at
1,000 processes for one family, memtop_page_cache_listed_bytes (issue 35). ``--cache-path`` trees
are exported either way; the TUI and its snapshots list always."""

from __future__ import annotations

import os
from pathlib import Path

from memtop.cli import build_parser
from memtop.commands.common import make_source
from memtop.probes.pagecache import PagecacheinfoProbe


def _probes(argv: list[str]) -> dict[str, object]:
    args = build_parser().parse_args(argv)
    source = make_source(args)
    try:
        return {p.name: p for p in source.probes}  # type: ignore[attr-defined]
    finally:
        source.close()


def _held(tmp_path: Path) -> tuple[int, tuple[int, int]]:
    """A file this process holds open: what a scan of the processes finds; its fd and key."""
    held = tmp_path / "held.bin"
    held.write_bytes(b"x" * 8192)
    fd = os.open(held, os.O_RDONLY)
    st = os.fstat(fd)
    return fd, (st.st_dev, st.st_ino)


def test_export_runs_no_listing_by_default() -> None:
    probes = _probes(["export", "--no-bpf"])
    assert "pagecacheinfo" not in probes
    assert "procfs" in probes  # the rest of the default probes are there


def test_export_lists_every_process_file_when_asked(tmp_path: Path) -> None:
    fd, key = _held(tmp_path)
    try:
        probes = _probes(["export", "--no-bpf", "--page-cache-listing"])
        probe = probes["pagecacheinfo"]
        assert isinstance(probe, PagecacheinfoProbe) and probe.scan_procs
        probe.poll()
        assert key in probe._files, "the held file is found"
    finally:
        os.close(fd)


def test_export_cache_path_walks_the_tree_but_no_process(tmp_path: Path) -> None:
    fd, key = _held(tmp_path)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.bin").write_bytes(b"y" * 4096)
    try:
        probes = _probes(["export", "--no-bpf", "--cache-path", str(tree)])
        probe = probes["pagecacheinfo"]
        assert isinstance(probe, PagecacheinfoProbe)
        assert not probe.scan_procs and probe.paths == (str(tree),)
        probe.poll()
        assert key not in probe._files and not probe._files, "no process's files listed"
        assert probe._path_files, "the tree's file is listed"
    finally:
        os.close(fd)


def test_the_tui_lists_always() -> None:
    probes = _probes(["--no-bpf"])
    probe = probes["pagecacheinfo"]
    assert isinstance(probe, PagecacheinfoProbe) and probe.scan_procs
