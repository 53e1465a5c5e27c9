"""What the swapinfo probe no longer does at each poll, and that each thing left out cannot hide a
change: meminfo parsed only on its zswap lines (the same figures as the whole file's parse), the
mount table's debugfs found again only for a new table text, zswap's parameters read only where
the kernel has the file, and the record of unchanged figures handed on as it was (a change in any
file makes a new one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtop.linux import kernelfs
from memtop.probes.swapin import SwapinfoProbe, read_swapinfo
from memtop.records.swapin import SwapInfo

DATA = Path(__file__).resolve().parents[1] / "data" / "kernel"
FIXTURE = DATA / "compressed"
MiB = 1 << 20


@pytest.mark.parametrize(
    "text",
    [
        (DATA / "meminfo-6.18.txt").read_text(),
        (DATA / "meminfo-5.4-hugetlb.txt").read_text(),
        "MemTotal: 100 kB\nZswap:    1024 kB\nZswapped:  4096 kB\n",
        "Zswap: 1 kB",  # no newline at the end
        "",
        "a\rZswap: 5 kB\nZswap:7\n",  # split by str.splitlines where \n does not split
        "Zswapped: 3 kB\r\nZswap: 2 kB Zswap\n",  # the word twice on a line
        "xZswap:4\n Zswap : 9 kB\nZswap: many kB\n",  # other names holding it, spaces, no number
    ],
)
def test_the_zswap_lines_parse_as_the_whole_file_does(text: str) -> None:
    whole = {k: v for k, v in kernelfs.parse_meminfo(text).items() if "Zswap" in k}
    only = {k: v for k, v in kernelfs.parse_meminfo_of(text, "Zswap").items() if "Zswap" in k}
    assert only == whole


def test_the_mount_tables_debugfs_is_found_again_for_another_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = kernelfs.MountTable(str(tmp_path))
    texts = iter(
        [
            "22 1 0:21 / /proc rw - proc proc rw\n",
            "30 22 0:7 / /sys/kernel/debug rw - debugfs debugfs rw\n",
        ]
    )
    text = next(texts)
    monkeypatch.setattr(table, "text", lambda: text)
    parsed: list[str | None] = []
    real = kernelfs.debugfs_mount

    def counted(t: str | None) -> str | None:
        parsed.append(t)
        return real(t)

    monkeypatch.setattr(kernelfs, "debugfs_mount", counted)
    assert table.debugfs() is None
    assert table.debugfs() is None and len(parsed) == 1  # the same text: not parsed again
    text = next(texts)  # a mount (another text object)
    assert table.debugfs() == "/sys/kernel/debug" and len(parsed) == 2


def test_zswap_parameters_are_those_the_kernel_has(tmp_path: Path) -> None:
    have = kernelfs.zswap_param_names(str(FIXTURE / "sys"))
    assert have == kernelfs.ZSWAP_PARAMS  # the fixture has them all
    d = tmp_path / "module" / "zswap" / "parameters"
    d.mkdir(parents=True)
    for name in ("shrinker_enabled", "enabled", "compressor"):  # no zpool (6.15 on), unordered
        (d / name).write_text("Y\n")
    assert kernelfs.zswap_param_names(str(tmp_path)) == ("enabled", "compressor", "shrinker_enabled")
    assert kernelfs.zswap_param_names(str(tmp_path / "none")) == ()
    params = kernelfs.read_zswap_params(str(tmp_path), names=("enabled",))
    assert params == {"enabled": "Y"}


def trees(tmp_path: Path) -> tuple[Path, Path]:
    proc, sys_ = tmp_path / "proc", tmp_path / "sys"
    (proc / "self").mkdir(parents=True)
    (proc / "swaps").write_text(
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
        "/dev/vdb                                partition\t1048572\t\t2048\t\t-2\n"
    )
    (proc / "meminfo").write_text("MemTotal: 100 kB\nZswap:    1024 kB\nZswapped:  4096 kB\n")
    (proc / "self" / "mountinfo").write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    (sys_ / "module" / "zswap" / "parameters").mkdir(parents=True)
    (sys_ / "module" / "zswap" / "parameters" / "enabled").write_text("Y\n")
    return proc, sys_


def poll(probe: SwapinfoProbe) -> SwapInfo:
    (rec,) = probe.poll()
    assert isinstance(rec, SwapInfo)
    return rec


def test_unchanged_figures_are_the_same_record_and_any_change_a_new_one(tmp_path: Path) -> None:
    proc, sys_ = trees(tmp_path)
    probe = SwapinfoProbe(proc, sys_)
    probe.load()
    first = poll(probe)
    assert first == read_swapinfo(proc, sys_)
    assert poll(probe) is first  # nothing moved: handed on as it was
    (proc / "meminfo").write_text("MemTotal: 100 kB\nZswap:    2048 kB\nZswapped:  4096 kB\n")
    pool = poll(probe)
    assert pool is not first and pool.zswap_pool_bytes == 2 * MiB
    assert pool == read_swapinfo(proc, sys_)
    (proc / "swaps").write_text(
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
        "/dev/vdb                                partition\t1048572\t\t4096\t\t-2\n"
    )
    used = poll(probe)
    assert used.devices[0][3] == 4096 * 1024 and used == read_swapinfo(proc, sys_)
    (sys_ / "module" / "zswap" / "parameters" / "enabled").write_text("N\n")
    off = poll(probe)
    assert not off.zswap_enabled and off == read_swapinfo(proc, sys_)
    assert poll(probe) is off
