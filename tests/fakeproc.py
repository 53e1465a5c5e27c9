"""A fake /proc tree for fallback and UI tests (no kernel needed)."""

from __future__ import annotations

from pathlib import Path

MEMINFO = """MemTotal:       24000000 kB
MemFree:        20000000 kB
MemAvailable:   22000000 kB
Buffers:          100000 kB
Cached:          1000000 kB
SwapCached:            0 kB
Shmem:             10000 kB
SReclaimable:      50000 kB
Slab:             100000 kB
SwapTotal:       4000000 kB
SwapFree:        3000000 kB
"""


def add_proc(
    root: Path,
    pid: int,
    comm: str,
    rss_kb: tuple[int, int, int],
    swap_kb: int,
    minflt: int,
    majflt: int,
    uid: int = 0,
    cmdline: bytes = b"",
) -> None:
    d = root / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    anon, file, shmem = rss_kb
    total = anon + file + shmem
    fields = [
        "S",
        "1",
        str(pid),
        str(pid),
        "0",
        "-1",
        "4194560",
        str(minflt),
        "0",
        str(majflt),
        "0",
        "10",
        "5",
        "0",
        "0",
        "20",
        "0",
        "1",
        "0",
        "100",
        str(total * 1024 * 4),
        str(total // 4),
    ]
    fields += ["0"] * 30
    (d / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields) + "\n")
    (d / "status").write_text(
        f"Name:\t{comm}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nPPid:\t1\nThreads:\t1\n"
        f"VmRSS:\t{total} kB\nRssAnon:\t{anon} kB\nRssFile:\t{file} kB\nRssShmem:\t{shmem} kB\n"
        f"VmSwap:\t{swap_kb} kB\n"
    )
    (d / "cmdline").write_bytes(cmdline or comm.encode() + b"\0")


def make_fake_proc(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "meminfo").write_text(MEMINFO)
    (root / "pressure").mkdir(exist_ok=True)
    (root / "pressure" / "memory").write_text(
        "some avg10=1.50 avg60=0.50 avg300=0.10 total=12345\nfull avg10=0.25 avg60=0.10 avg300=0.00 total=2345\n"
    )
    (root / "vmstat").write_text("pgfault 1000\npgmajfault 10\npswpin 5\npswpout 7\npgscan_kswapd 100\n")
    add_proc(root, 101, "alpha", (1000, 500, 0), 0, 10, 0)
    add_proc(root, 202, "bravo", (50000, 2000, 100), 2048, 20000, 5, cmdline=b"bravo\0--big\0")
    add_proc(root, 303, "charlie", (8000, 100, 0), 512, 300, 1, uid=65534)
    # a kernel thread: no RssAnon line, must not show
    k = root / "2"
    k.mkdir(exist_ok=True)
    (k / "stat").write_text("2 (kthreadd) S 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0 " + "0 " * 30 + "\n")
    (k / "status").write_text("Name:\tkthreadd\nUid:\t0\t0\t0\t0\n")
    return root
