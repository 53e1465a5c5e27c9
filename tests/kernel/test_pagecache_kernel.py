"""Page cache pane against the kernel's own accounting.

Files of known sizes in a directory of their own (on the root file system, not tmpfs: tmpfs pages
are shmem and fadvise does not drop them), each dropped from the cache first
(``posix_fadvise(DONTNEED)`` after fsync), then one read fully, one half, one written and left
dirty: memtop's per-file cached bytes (``--cache-path`` the directory) equal util-linux
``fincore``'s and ``cachestat(2)``'s read by the test (bracketed: writeback may move them), its
dirty bytes cachestat's; the same through the mincore fallback. DONTNEED on the file read fully
drops it from the pane's rows. A file a child process holds open (and nobody else knows of)
names that child among its holders. Files read from inside a memcg of the test's own are owned by
it, as /proc/kpagecgroup read by the test says of their pages.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support import LineReader, between, bracket, memcg, wait_until

from memtop.export.metrics import EXPORTED_PARTS, Accumulators, families
from memtop.export.metrics import Options as ExportOptions
from memtop.probes.cgroups import CgroupsProbe
from memtop.probes.pagecache import PagecacheinfoProbe, PagecacheProbe
from memtop.records import Batch, ProbeStatus, Record
from memtop.records.pagecache import CachedFile, PagecacheActivity
from memtop.state import State
from memtop.state.pagecache import PagecacheState
from memtop.views import Options, get_view

pytestmark = pytest.mark.bpf

MiB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("cache", "dirty", "writeback", "evicted", "recently_evicted")]


_libc = ctypes.CDLL(None, use_errno=True)


def kernel_cachestat(path: Path) -> tuple[int, int, int, int, int]:
    """The test's own cachestat(2) of the whole file, in bytes."""
    fd = os.open(path, os.O_RDONLY)
    try:
        rng, cs = _Range(0, 0), _Stat()
        _libc.syscall.restype = ctypes.c_long
        ret = _libc.syscall(
            ctypes.c_long(451), ctypes.c_int(fd), ctypes.byref(rng), ctypes.byref(cs), ctypes.c_uint(0)
        )
        assert ret == 0, os.strerror(ctypes.get_errno())
        return (
            cs.cache * PAGE,
            cs.dirty * PAGE,
            cs.writeback * PAGE,
            cs.evicted * PAGE,
            cs.recently_evicted * PAGE,
        )
    finally:
        os.close(fd)


def fincore_bytes(paths: list[Path]) -> dict[str, int]:
    """util-linux fincore's resident bytes per file (mincore, as vmtouch and pcstat)."""
    out = subprocess.run(
        ["fincore", "--bytes", "--raw", "--noheadings", "--output", "RES,FILE", *map(str, paths)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    res = {}
    for line in out.splitlines():
        size, _, name = line.partition(" ")
        res[name] = int(size)
    return res


def drop(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read(path: Path, nbytes: int) -> None:
    with open(path, "rb", buffering=0) as f:
        left = nbytes
        while left > 0:
            chunk = f.read(min(left, MiB))
            if not chunk:
                break
            left -= len(chunk)


@pytest.fixture
def tree() -> Iterator[Path]:
    d = Path("/var/tmp") / f"memtop-pcache-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    try:
        yield d
    finally:
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


def make(d: Path) -> dict[str, Path]:
    files = {name: d / f"{name}.bin" for name in ("full", "half", "cold")}
    for p in files.values():
        p.write_bytes(os.urandom(4 * MiB))
        drop(p)
    read(files["full"], 4 * MiB)
    # half the file; readahead may bring some of the rest, which fincore sees as memtop does
    fd = os.open(files["half"], os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    os.pread(fd, 2 * MiB, 0)
    os.close(fd)
    dirty = d / "dirty.bin"
    dirty.write_bytes(os.urandom(3 * MiB))  # no fsync: dirty until the flusher writes it
    files["dirty"] = dirty
    return files


def by_path(records: list[Record]) -> dict[str, CachedFile]:
    return {r.path: r for r in records if isinstance(r, CachedFile)}


def measured(probe: PagecacheinfoProbe) -> dict[str, CachedFile]:
    """Every file the probe knows after a poll, with its latest figures (listed or not)."""
    probe.poll()
    return {r.path: r for r in probe.measured()}


@pytest.mark.parametrize("method", ["cachestat", "mincore"])
def test_cached_and_dirty_bytes_equal_fincore_and_cachestat(tree: Path, method: str) -> None:
    files = make(tree)
    probe = PagecacheinfoProbe(paths=(str(tree),), method=method, scan_every=1000)
    got: dict[str, CachedFile] = {}
    # fincore read before and after: a page the machine drops or reads meanwhile moves both
    fin_before = fincore_bytes(list(files.values()))
    for name, p in files.items():

        def kernel(p: Path = p) -> tuple[int, int]:
            cached, dirty, *_ = kernel_cachestat(p)
            return cached, dirty

        def ours(p: Path = p) -> CachedFile:
            return measured(probe)[str(p)]

        before, rec, after = bracket(kernel, ours)
        got[name] = rec
        assert between(rec.cached_bytes, before[0], after[0]), (name, rec, before, after)
        if method == "cachestat":
            assert rec.dirty_bytes is not None and between(rec.dirty_bytes, before[1], after[1]), (name, rec)
        else:
            assert rec.dirty_bytes is None and rec.method == "mincore"
    res = fincore_bytes(list(files.values()))
    for name, p in files.items():
        fin = (fin_before[str(p)], res[str(p)])
        assert between(got[name].cached_bytes, *fin) or name == "dirty", (name, got[name], fin)
        assert got[name].size_bytes == p.stat().st_size
        assert got[name].under_path and got[name].holders == ()
    # the whole file, unless the machine dropped a page of it meanwhile (fincore saw it: the
    # brackets above hold memtop to the kernel either way)
    full = str(files["full"])
    assert got["full"].cached_bytes == 4 * MiB or min(fin_before[full], res[full]) < 4 * MiB
    assert 2 * MiB <= got["half"].cached_bytes < 4 * MiB
    assert got["cold"].cached_bytes == 0
    if method == "cachestat":
        assert got["dirty"].cached_bytes == 3 * MiB


def test_fadvise_dontneed_drops_a_file_from_the_rows(tree: Path) -> None:
    files = make(tree)
    probe = PagecacheinfoProbe(paths=(str(tree),), scan_every=1000)
    state = State(mode="bpf")
    view = get_view("pagecache")

    def rows() -> dict[str, int]:
        recs: list[Record] = [ProbeStatus("pagecacheinfo", "attached"), *probe.poll()]
        state.apply(Batch(ts_ns=state.ts_ns + 1_000_000_000, records=tuple(recs)))
        doc = view.document(state, Options(filter=str(tree)))
        return {r["path"]: r["cached_bytes"] for r in doc["rows"]}

    first = rows()
    assert first[str(files["full"])] == 4 * MiB
    assert str(files["cold"]) not in first  # nothing cached: not a row of the cache
    drop(files["full"])
    assert kernel_cachestat(files["full"])[0] == 0
    # it is measured again among the files holding the most, or when the rotating slice comes to it
    last: dict[str, int] = {}

    def dropped() -> bool:
        nonlocal last
        last = rows()
        return str(files["full"]) not in last

    wait_until(dropped, "the dropped file gone from the rows")
    assert last[str(files["half"])] == kernel_cachestat(files["half"])[0]


def test_a_file_held_open_names_its_process(tree: Path) -> None:
    target = tree / "held.bin"
    target.write_bytes(os.urandom(MiB))
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"f = open({str(target)!r}, 'rb'); f.read(); print('ready', flush=True); input()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        LineReader(child.stdout).wait_for("ready")
        probe = PagecacheinfoProbe()  # no --cache-path: only what processes hold
        recs = by_path(probe.poll())
        held = recs[str(target)]
        assert child.pid in [pid for pid, _ in held.holders]
        assert held.cached_bytes == kernel_cachestat(target)[0] == MiB
        st = target.stat()
        assert (held.dev, held.ino) == (st.st_dev, st.st_ino)
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=30)


def test_the_exporters_listed_sum_is_the_listed_files_sum_without_their_records(tree: Path) -> None:
    """The exporter asks the pagecacheinfo probe for no per-file records (EXPORTED_PARTS): its
    ``memtop_page_cache_listed_bytes`` is then the probe's own sum, which equals the sum of the
    records a probe asked for everything sends (what the family summed before), on real files a
    process holds open and maps; the lean probe keeps no holders and sends no file's record.
    Both read a /proc of that one process (a directory holding a link to its /proc entry), so
    they see the same files whatever else the machine runs."""
    files = make(tree)
    opens = " ".join(f"{3 + i}<{p}" for i, p in enumerate(files.values()))
    child = subprocess.Popen(["sh", "-c", f"exec {opens}; exec sleep 600"])
    proc_root = Path("/var/tmp") / f"memtop-pcache-proc-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    proc_root.mkdir()
    try:
        # once the shell has become sleep: its maps are sleep's from then on, for both probes
        comm = Path(f"/proc/{child.pid}/comm")
        wait_until(lambda: comm.read_text().strip() == "sleep", "the holder exec'd")
        (proc_root / str(child.pid)).symlink_to(f"/proc/{child.pid}")

        def exported(lean: bool) -> tuple[float, PagecacheState, list[Record]]:
            probe = PagecacheinfoProbe(str(proc_root), scan_every=1000)
            probe.used_parts = frozenset(EXPORTED_PARTS["pagecacheinfo"]) if lean else None
            state = State(mode="bpf")
            recs: list[Record] = []
            for i in range(3):
                got = [ProbeStatus("pagecacheinfo", "attached"), *probe.poll()]
                state.apply(Batch(ts_ns=(i + 1) * 1_000_000_000, records=tuple(got)))
                recs += got
            if lean:
                assert all(not f.holders for f in probe._all.values())
            (fam,) = [
                f
                for f in families(state, ExportOptions(), Accumulators())
                if f.name == "memtop_page_cache_listed_bytes"
            ]
            return fam.samples[0].value, state.get(PagecacheState), recs

        full_value, full, full_recs = exported(lean=False)
        lean_value, lean, lean_recs = exported(lean=True)
        records_sum = sum(f.rec.cached_bytes for f in full.files.values())
        assert full.table is not None and full.table.listed_cached_bytes == records_sum
        # the files the process holds are listed, with what the kernel says they hold
        held = {
            str(p): r
            for r in full_recs
            if isinstance(r, CachedFile)
            for p in files.values()
            if r.path == str(p)
        }
        assert held[str(files["full"])].cached_bytes == kernel_cachestat(files["full"])[0] == 4 * MiB
        assert records_sum >= 4 * MiB
        assert not [r for r in lean_recs if isinstance(r, CachedFile)] and not lean.files
        # the same files (the process's binary, libraries and open files), the same sum
        assert lean_value == full_value == records_sum
    finally:
        child.kill()
        child.wait()
        for p in proc_root.iterdir():
            p.unlink()
        proc_root.rmdir()


def test_pages_added_and_deleted_for_a_file_read_once_cold_equal_its_pages(tree: Path) -> None:
    p = tree / "once.bin"
    p.write_bytes(os.urandom(8 * MiB))
    drop(p)
    st = p.stat()
    pages = 8 * MiB // PAGE
    probe = PagecacheProbe()
    probe.load()
    try:

        def counts() -> tuple[int, int]:
            rec = next(r for r in probe.poll() if isinstance(r, PagecacheActivity))
            found = [(a, d) for dev, ino, a, d in rec.files if (dev, ino) == (st.st_dev, st.st_ino)]
            return found[0] if found else (0, 0)

        added0, deleted0 = counts()
        read(p, 8 * MiB)
        added1, deleted1 = counts()
        drop(p)
        added2, deleted2 = counts()
    finally:
        probe.close()
    assert added1 - added0 == pages
    assert deleted1 == deleted0
    assert deleted2 - deleted1 == pages and added2 == added1


def test_a_read_loop_in_a_small_memcg_thrashes_exactly_its_files(tree: Path) -> None:
    """300 MiB of files read in a loop inside a 100 MiB v1 memcg: each is marked thrashing and,
    read just after another, shows recently evicted bytes; a file read outside it shows neither; the memcg's refaults as the cgroups probe reads them equal
    its memory.stat delta."""
    files = [tree / f"big{i}.bin" for i in range(3)]
    chunk = os.urandom(MiB)
    for p in files:
        with open(p, "wb") as f:
            for _ in range(100):
                f.write(chunk)
        drop(p)
    control = tree / "control.bin"
    control.write_bytes(os.urandom(4 * MiB))
    read(control, 4 * MiB)
    # a hot file read before each big one stays on the active list: the kernel counts an evicted
    # page as recently evicted only while its refault distance is within the working set (the
    # active file pages), so without one nothing a sequential loop evicts is "recent"
    hot = tree / "hot.bin"
    hot.write_bytes(os.urandom(32 * MiB))
    drop(hot)  # its pages then charged to the reader's memcg when it reads them
    reader = (
        "import sys\n"
        "def cat(p):\n"
        "    with open(p, 'rb', buffering=0) as f:\n"
        "        while f.read(1 << 20): pass\n"
        "for line in sys.stdin:\n"
        "    cat(sys.argv[1]); cat(sys.argv[1]); cat(line.strip())\n"
        "    print('done', flush=True)\n"
    )
    with memcg(100 * MiB) as cg:
        child = subprocess.Popen(
            [sys.executable, "-c", reader, str(hot)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: cg.add(os.getpid()),
        )
        assert child.stdout is not None and child.stdin is not None
        lines = LineReader(child.stdout)
        cgroups = CgroupsProbe(full_every=1, walk_every=1)
        cgroups.load()
        # every file measured every tick (the budget is what spreads them over ticks)
        info = PagecacheinfoProbe(paths=(str(tree),), scan_every=1000, budget=10.0)
        activity = PagecacheProbe()
        activity.load()
        state = State(mode="bpf")
        status = (
            ProbeStatus("pagecacheinfo", "attached"),
            ProbeStatus("cgroups", "attached"),
            ProbeStatus("pagecache", "attached"),
        )
        view = get_view("pagecache")
        recent: dict[str, int] = {}
        thrashing: set[str] = set()

        def tick() -> dict[str, Any]:
            recs = (*status, *info.poll(), *cgroups.poll(), *activity.poll())
            state.apply(Batch(ts_ns=state.ts_ns + 1_000_000_000, records=recs))
            doc = view.document(state, Options(filter=str(tree)))
            for r in doc["rows"]:
                recent[r["path"]] = max(recent.get(r["path"], 0), r["recently_evicted_bytes"] or 0)
                if r["thrashing"]:
                    thrashing.add(r["path"])
            return dict(doc)

        def refaults() -> int:
            stat = cg.stat()
            return stat.get("total_workingset_refault_file", stat.get("workingset_refault_file", 0))

        def memcg_refaults(doc: dict[str, Any]) -> int:
            return int(next(c["refaults"] for c in doc["cgroups"] if c["path"] == "/" + cg.name))

        try:
            doc = tick()
            before_kernel, before_ours = refaults(), memcg_refaults(doc)
            n = 0
            for _ in range(3):
                for p in files:
                    child.stdin.write(f"{p}\n")
                    child.stdin.flush()
                    n += 1
                    lines.lines_with("done", n)
                    doc = tick()
            after_kernel, after_ours = refaults(), memcg_refaults(tick())
        finally:
            activity.close()
            child.stdin.close()
            child.wait(timeout=30)
    assert after_kernel > before_kernel
    assert after_ours - before_ours == after_kernel - before_kernel
    for p in files:
        assert recent[str(p)] > 0, (p, recent)
        assert str(p) in thrashing, (p, thrashing)
    # the file read outside the memcg is neither (the hot file is read in the loop too: some of
    # its pages may be evicted, so it is not asserted either way)
    assert recent.get(str(control), 0) == 0 and str(control) not in thrashing
    rows = {r["path"]: r for r in doc["rows"]}
    assert rows[str(control)]["cached_bytes"] == kernel_cachestat(control)[0]


@contextmanager
def _mapped(path: Path) -> Iterator[tuple[int, int, Any]]:
    """``path`` mapped read-only and shared, MADV_RANDOM (so neither a touch nor the unmap marks a
    page accessed): (address, pages, mincore's vector of them)."""
    size = path.stat().st_size
    pages = (size + PAGE - 1) // PAGE
    mmap_ = _libc.mmap
    mmap_.restype = ctypes.c_void_p
    mmap_.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    fd = os.open(path, os.O_RDONLY)
    addr = mmap_(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
    os.close(fd)
    assert addr is not None and addr != ctypes.c_void_p(-1).value
    try:
        assert _libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(size), 1) == 0  # MADV_RANDOM
        vec = (ctypes.c_ubyte * pages)()
        assert _libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec) == 0
        yield addr, pages, vec
    finally:
        _libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(size))


def _uptodate_bytes(path: Path) -> int:
    """Bytes of ``path`` whose pages are in the page cache and read (mincore reports a page only
    once it is uptodate; cachestat counts a page still under readahead's I/O too)."""
    with _mapped(path) as (_, pages, vec):
        return sum(1 for i in range(pages) if vec[i] & 1) * PAGE


def _frames(path: Path) -> list[int]:
    """The PFN of each resident page of ``path`` as the test reads it itself: its own mapping
    (:func:`_mapped`), each resident page touched (a minor fault), its PFN from
    /proc/self/pagemap."""
    with _mapped(path) as (addr, pages, vec):
        out = []
        pm = os.open("/proc/self/pagemap", os.O_RDONLY)
        try:
            for i in range(pages):
                if not vec[i] & 1:
                    continue
                majflt = resource.getrusage(resource.RUSAGE_THREAD).ru_majflt
                ctypes.string_at(addr + i * PAGE, 1)  # resident: a minor fault maps it
                if resource.getrusage(resource.RUSAGE_THREAD).ru_majflt != majflt:
                    continue  # evicted since mincore, read back by this touch: the test's page now
                entry = int.from_bytes(os.pread(pm, 8, (addr // PAGE + i) * 8), "little")
                assert entry >> 63, "a mapped page not present"
                out.append(entry & ((1 << 55) - 1))
        finally:
            os.close(pm)
        return out


def _per_frame(name: str, frames: list[int]) -> list[int]:
    """/proc/kpagecgroup's or /proc/kpageflags' u64 of each frame."""
    fd = os.open(f"/proc/{name}", os.O_RDONLY)
    try:
        return [int.from_bytes(os.pread(fd, 8, pfn * 8), "little") for pfn in frames]
    finally:
        os.close(fd)


def referenced(frames: list[int]) -> list[bool]:
    return [bool(flags & KPF_REFERENCED) for flags in _per_frame("kpageflags", frames)]


def own_memcg() -> str:
    """This process's memory cgroup, as /proc/self/cgroup names it."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return path
    raise AssertionError("no memory controller line in /proc/self/cgroup")


#: /proc/kpageflags' bit of a page accessed since reclaim last looked (folio_mark_accessed)
KPF_REFERENCED = 1 << 2


def test_each_file_is_owned_by_the_memcg_that_read_it(tree: Path) -> None:
    """Files read from inside a memcg of the test's own are owned by it, as /proc/kpagecgroup read
    by the test itself says of their pages; a file the test read (in its own memcg) is owned by
    the test's memcg. Sampling them marks none of their pages accessed: the files are brought in
    by readahead (POSIX_FADV_WILLNEED), which leaves their pages unreferenced, and a mapping
    without MADV_RANDOM would mark each sampled page referenced when unmapped."""
    inside = [tree / f"inside{i}.bin" for i in range(2)]
    outside = tree / "outside.bin"
    for p in (*inside, outside):
        p.write_bytes(os.urandom(4 * MiB))
        drop(p)
    read(outside, 4 * MiB)
    reader = (
        "import os, sys\n"
        "for p in sys.argv[1:]:\n"
        "    fd = os.open(p, os.O_RDONLY)\n"
        "    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)\n"
        "    os.close(fd)\n"
    )
    with memcg(256 * MiB) as cg:
        try:
            subprocess.run(
                [sys.executable, "-c", reader, *map(str, inside)],
                check=True,
                preexec_fn=lambda: cg.add(os.getpid()),
            )
            for p in inside:  # readahead's I/O ends after the child does

                def read_ahead(p: Path = p) -> bool:
                    # every page read, not only in the cache: a touch of a page still under I/O
                    # waits for it and counts as a major fault, which _frames leaves out
                    return kernel_cachestat(p)[0] == 4 * MiB and _uptodate_bytes(p) == 4 * MiB

                wait_until(read_ahead, f"{p} read ahead")
            frames = {p: _frames(p) for p in (*inside, outside)}
            ino = os.stat(cg.path).st_ino
            for p in inside:
                # all of it read ahead (pressure from elsewhere could take some since: not asserted)
                assert frames[p], p
                assert set(_per_frame("kpagecgroup", frames[p])) == {ino}, p
            mine = os.stat(f"/sys/fs/cgroup/memory{own_memcg()}".rstrip("/")).st_ino
            assert set(_per_frame("kpagecgroup", frames[outside])) == {mine}
            referenced_before = [referenced(frames[p]) for p in inside]
            probe = PagecacheinfoProbe(paths=(str(tree),), scan_every=1000)
            try:
                recs = probe.poll()
            finally:
                probe.close()
            referenced_after = [referenced(frames[p]) for p in inside]
            still_theirs = [[c == ino for c in _per_frame("kpagecgroup", frames[p])] for p in inside]
            got = by_path(recs)
            for p in inside:
                rec = got[str(p)]
                assert rec.cgroup == "/" + cg.name, rec
                # 16 unless pages were evicted meanwhile (left out of the sample, never misnamed)
                assert 0 < rec.cgroup_pages == rec.cgroup_sampled_pages <= 16, rec
                assert rec.cgroup_why == ""
            assert got[str(outside)].cgroup == own_memcg() != "/" + cg.name
            # reclaim's scan may clear the bit meanwhile; nothing else here sets it
            newly = [
                sum(1 for b, a, mine in zip(before, after, theirs, strict=True) if mine and a and not b)
                for before, after, theirs in zip(
                    referenced_before, referenced_after, still_theirs, strict=True
                )
            ]
            # a frame freed and used again since is no longer the memcg's: not counted
            assert newly == [0] * len(inside), newly
            state = State(mode="bpf")
            state.apply(Batch(1, (ProbeStatus("pagecacheinfo", "attached"), *recs)))
            rows = {r["path"]: r for r in get_view("pagecache").document(state, Options())["rows"]}
            assert rows[str(inside[0])]["cgroup"] == "/" + cg.name
            assert rows[str(inside[0])]["cgroup_share"] == 1.0
        finally:
            for p in inside:
                drop(p)  # no page left charged to the memcg being removed
