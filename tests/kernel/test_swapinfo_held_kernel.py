"""The swapinfo probe's files held open on the real /proc and /sys (pread from offset 0 at each poll)
and its mount table read again only when it changed (poll(2) of /proc/self/mountinfo): a swap
device switched on after the files were opened shows at the next poll, and gone at the one after
it is switched off; a mount and an unmount each make the table be read again, and nothing else
does."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from memtop.linux import kernelfs
from memtop.probes.swapin import SwapinfoProbe
from memtop.records.swapin import SwapInfo


def swap_info(probe: SwapinfoProbe) -> SwapInfo:
    (rec,) = probe.poll()
    assert isinstance(rec, SwapInfo)
    return rec


@pytest.mark.bpf  # the real /proc and /sys (swapon, mount): runs with the kernel tests
def test_a_swap_device_switched_on_and_off_shows_through_the_held_files() -> None:
    probe = SwapinfoProbe()
    probe.load()
    path = Path(tempfile.gettempdir()) / f"memtop-test-swapinfo-{os.getpid()}"
    try:
        before = swap_info(probe)
        assert probe._held is not None and len(probe._held) > 0  # noqa: SLF001 - held, not reopened
        held = len(probe._held)  # noqa: SLF001
        assert str(path) not in {d[0] for d in before.devices}
        subprocess.run(["fallocate", "-l", "16M", str(path)], check=True)
        path.chmod(0o600)
        subprocess.run(["mkswap", str(path)], check=True, capture_output=True)
        subprocess.run(["swapon", str(path)], check=True)
        on = swap_info(probe)
        dev = next(d for d in on.devices if d[0] == str(path))
        assert dev[1] == "file" and 15 << 20 <= dev[2] <= 16 << 20
        subprocess.run(["swapoff", str(path)], check=True)
        off = swap_info(probe)
        assert str(path) not in {d[0] for d in off.devices}
        assert len(probe._held) == held  # noqa: SLF001 - the same files, read again
    finally:
        subprocess.run(["swapoff", str(path)], check=False, capture_output=True)
        path.unlink(missing_ok=True)
        probe.close()


@pytest.mark.bpf
def test_the_mount_table_is_read_again_only_after_a_mount_or_unmount() -> None:
    table = kernelfs.MountTable()
    where = Path(tempfile.mkdtemp(prefix=f"memtop-test-mounts-{os.getpid()}-"))
    try:
        first = table.text()
        assert first is not None and table.reads == 1
        for _ in range(3):
            assert table.text() is first  # unchanged: not read again
        assert table.reads == 1
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "memtop-test", str(where)], check=True)
        try:
            mounted = table.text()
            assert table.reads == 2 and mounted is not None and f" {where} " in mounted
        finally:
            subprocess.run(["umount", str(where)], check=True)
        unmounted = table.text()
        assert table.reads == 3 and unmounted is not None and f" {where} " not in unmounted
        assert table.text() is unmounted and table.reads == 3
    finally:
        table.close()
        where.rmdir()
