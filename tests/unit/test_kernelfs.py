"""The Kernel pane's parsers and its state/view on fixture files: meminfo breakdowns that add up to
MemTotal, slabinfo, buddyinfo, vmallocinfo, /proc/allocinfo in both formats (1.0, 2.0 with
accurate:no; this machine's kernel has no allocation profiling) and doctor's profiling state for
each case, from fixture proc roots."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memtop.headless.doctor import kernel_checks
from memtop.linux import kernelfs
from memtop.probes.kernel import KernelProbe
from memtop.records import Batch, ProbeStatus, from_json, to_json
from memtop.records.kernel import AllocProfile, PageAlloc, SlabCaches, SlabTrace
from memtop.state import State
from memtop.state.kernel import KernelState
from memtop.views import Options, get_view

DATA = Path(__file__).resolve().parents[1] / "data" / "kernel"
KiB = 1024


def test_breakdown_adds_up_to_memtotal_on_this_kernels_meminfo() -> None:
    m = kernelfs.parse_meminfo((DATA / "meminfo-6.18.txt").read_text())
    b = kernelfs.breakdown(m, 0, True)
    assert sum(b.values()) == m["MemTotal"]
    assert [k for k, _ in kernelfs.BREAKDOWN] == list(b)
    assert b["anon"] == m["AnonPages"]
    assert b["slab_reclaimable"] == m["SReclaimable"] and b["slab_unreclaimable"] == m["SUnreclaim"]
    assert b["free"] == m["MemFree"]
    # stacks are vmalloc'd here (CONFIG_VMAP_STACK): counted once, as stacks
    assert b["vmalloc"] == m["VmallocUsed"] - m["KernelStack"]
    assert b["file_mapped"] + b["page_cache"] == m["Buffers"] + m["Cached"] - m["Shmem"]
    # what no line explains is small on an idle machine, and shown, not hidden
    assert 0 <= b["unexplained"] < m["MemTotal"] * 0.01


def test_breakdown_of_an_older_kernel_with_hugetlb_and_zswap() -> None:
    m = kernelfs.parse_meminfo((DATA / "meminfo-5.4-hugetlb.txt").read_text())
    assert m["HugePages_Total"] == 1024  # a count, not kB
    b = kernelfs.breakdown(m, 12345 * 4096, None)
    assert sum(b.values()) == m["MemTotal"] == 8000000 * KiB
    assert b["hugetlb"] == 1024 * 2048 * KiB  # no Hugetlb line: pages times their size
    assert b["zsmalloc"] == 12345 * 4096
    assert b["vmalloc"] == 60000 * KiB  # not known to be stacks: not subtracted
    assert b["swap_cache"] == 50000 * KiB
    assert b["kernel_reclaimable"] == 50000 * KiB  # KReclaimable beyond the slab's
    assert b["page_cache"] + b["file_mapped"] == (100000 + 2000000 - 300000) * KiB
    assert b["file_mapped"] == 400000 * KiB
    expect = 8000000 - (
        1500000
        + 400000
        + 1400000
        + 300000
        + 50000
        + 200000
        + 150000
        + 50000
        + 40000
        + 20000
        + 60000
        + 10000
        + 2097152
        + 1000000
    )
    assert b["unexplained"] == expect * KiB - 12345 * 4096


def test_slabinfo_parses_every_cache_with_its_size() -> None:
    caches = kernelfs.parse_slabinfo((DATA / "slabinfo-2.1.txt").read_text())
    text_lines = [
        line
        for line in (DATA / "slabinfo-2.1.txt").read_text().splitlines()
        if not line.startswith(("#", "slab"))
    ]
    assert len(caches) == len({line.split()[0] for line in text_lines})
    d = caches["dentry"]
    line = next(line for line in text_lines if line.startswith("dentry "))
    f = line.split()
    assert (d.active_objs, d.num_objs, d.objsize, d.objperslab, d.pagesperslab) == tuple(
        int(x) for x in f[1:6]
    )
    assert d.num_slabs == int(f[-2])
    assert d.total_bytes == d.num_slabs * d.pagesperslab * kernelfs.PAGE


def test_slab_tuples_parse_only_the_lines_that_changed() -> None:
    text = (DATA / "slabinfo-2.1.txt").read_text()
    whole = {name: s.as_tuple() for name, s in kernelfs.parse_slabinfo(text).items()}
    first, memo = kernelfs.slab_tuples(text, {})
    assert first == whole
    line = next(line for line in text.splitlines() if line.startswith("dentry "))
    f = line.split()
    moved = line.replace(f" {f[1]} ", f" {int(f[1]) + 7} ", 1)  # dentry's active objects moved
    again, memo2 = kernelfs.slab_tuples(text.replace(line, moved), memo)
    assert again["dentry"][1] == whole["dentry"][1] + 7
    assert {k: v for k, v in again.items() if k != "dentry"} == {
        k: v for k, v in whole.items() if k != "dentry"
    }
    assert all(again[k] is first[k] for k in again if k != "dentry")  # not parsed again
    assert moved in memo2 and line not in memo2  # the memo holds the last read's lines only


def test_slabinfo_skips_what_it_cannot_read_and_cleans_names() -> None:
    text = "slabinfo - version: 2.1\nbad line\nx\x1b[31m 1 2 3 4 5 : tunables 0 0 0 : slabdata 1 1 0\n"
    caches = kernelfs.parse_slabinfo(text)
    assert list(caches) == ["x\\x1b[31m"]


def test_buddyinfo_and_fragmentation() -> None:
    zones = kernelfs.parse_buddyinfo("Node 0, zone   Normal      4      0      0      1\n")
    assert zones == [(0, "Normal", (4, 0, 0, 1))]
    # 4 single pages + one order-3 block (8 pages): 4 of 12 free pages cannot serve order 3
    assert kernelfs.fragmentation((4, 0, 0, 1), 3) == pytest.approx(4 / 12)
    assert kernelfs.fragmentation((4, 0, 0, 1), 0) == 0
    assert kernelfs.fragmentation((0, 0), 1) is None
    assert len(kernelfs.parse_buddyinfo((DATA / "buddyinfo.txt").read_text())) == 3


def test_vmallocinfo_by_caller() -> None:
    text = (
        "0x1-0x2   20480 kernel_clone+0x94/0x3e0 pages=4 vmalloc N0=4\n"
        "0x3-0x4   12288 kernel_clone+0x94/0x3e0 pages=2 vmalloc N0=2\n"
        "0x5-0x6    8192 acpi_os_map_iomem+0x1bc/0x1e0 phys=0x00000000000a0000 ioremap\n"
        "0x7-0x8    8192 unpurged vm_area\n"
    )
    by = kernelfs.parse_vmallocinfo(text)
    assert by[("kernel_clone", "vmalloc")] == (2, 32768)
    assert by[("acpi_os_map_iomem", "ioremap")] == (1, 8192)
    assert sum(n for n, _ in by.values()) == 4
    assert by[("(unpurged: freed, not yet flushed)", "")] == (1, 8192)
    assert kernelfs.parse_vmallocinfo((DATA / "vmallocinfo.txt").read_text())


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_allocinfo_both_formats(version: str) -> None:
    got_version, sites = kernelfs.parse_allocinfo((DATA / f"allocinfo-{version}.txt").read_text())
    assert got_version == version
    assert len(sites) == 6
    pte = next(s for s in sites if s.function == "__pte_alloc")
    assert (pte.bytes, pte.calls, pte.file, pte.line, pte.module) == (16777216, 4096, "mm/memory.c", 5100, "")
    ext4 = next(s for s in sites if s.function == "ext4_fill_super")
    assert ext4.module == "ext4" and ext4.file == "fs/ext4/super.c" and ext4.line == 5400
    inaccurate = {s.function for s in sites if not s.accurate}
    assert inaccurate == (set() if version == "1.0" else {"alloc_slab_page", "add_recvbuf_small"})


def _proc(tmp_path: Path, allocinfo: str | None, sysctl: str | None) -> Path:
    root = tmp_path / "proc"
    (root / "sys" / "vm").mkdir(parents=True)
    (root / "meminfo").write_text((DATA / "meminfo-6.18.txt").read_text())
    (root / "slabinfo").write_text((DATA / "slabinfo-2.1.txt").read_text())
    if allocinfo is not None:
        (root / "allocinfo").write_text((DATA / f"allocinfo-{allocinfo}.txt").read_text())
    if sysctl is not None:
        (root / "sys" / "vm" / "mem_profiling").write_text(sysctl)
    return root


@pytest.mark.parametrize(
    ("allocinfo", "sysctl", "state"),
    [
        (None, None, "not built"),
        ("1.0", "never\n", "never"),
        ("1.0", "0\n", "off"),
        ("2.0", "1\n", "on"),
        ("1.0", None, "on"),
    ],
)
def test_profiling_state_and_doctor(
    tmp_path: Path, allocinfo: str | None, sysctl: str | None, state: str
) -> None:
    root = _proc(tmp_path, allocinfo, sysctl)
    got, hint = kernelfs.profiling_state(str(root))
    assert got == state
    assert bool(hint) == (state != "on")
    if state == "not built":
        assert "CONFIG_MEM_ALLOC_PROFILING" in hint and "vm.mem_profiling" in hint
    check = {c.name: c for c in kernel_checks(str(root))}["allocation profiling"]
    assert check.ok == (state == "on") and check.detail.startswith(state)
    assert {c.name: c for c in kernel_checks(str(root))}["slabinfo"].ok


def test_a_fifo_where_allocinfo_is_does_not_block(tmp_path: Path) -> None:
    root = _proc(tmp_path, None, "1\n")
    os.mkfifo(root / "allocinfo")
    probe = KernelProbe(str(root))
    probe.load()
    recs = probe.poll()
    prof = [r for r in recs if isinstance(r, AllocProfile)]
    assert prof and prof[0].state == "on" and prof[0].sites == ()


def test_probe_state_view_on_a_fixture_proc_with_allocinfo(tmp_path: Path) -> None:
    root = _proc(tmp_path, "2.0", "1\n")
    probe = KernelProbe(str(root))
    probe.load()
    state = State("procfs")
    recs = probe.poll()
    for r in recs:  # every record round-trips through a recording
        assert from_json(to_json(r)) == r
    state.apply(Batch(1_000_000_000, tuple(recs)))
    view = get_view("kernel")
    doc = view.document(state, view.default_options())
    b = doc["breakdown"]
    assert b["sum_bytes"] == b["total_bytes"]
    a = doc["allocinfo"]
    assert a["state"] == "on" and a["version"] == "2.0" and a["nsites"] == 6 and a["inaccurate"] == 2
    assert a["by_bytes"][0]["function"] == "__pte_alloc"
    assert a["by_calls"][0]["function"] == "__pte_alloc"
    tree = {t["dir"]: t["bytes"] for t in a["tree"]}
    assert tree["mm/"] == 16777216 + 4194304
    assert tree["fs/ext4/"] == 131072
    names = [r["name"] for r in doc["rows"]]
    assert names and "dentry" in names
    sizes = [r["total_bytes"] for r in doc["rows"]]
    assert sizes == sorted(sizes, reverse=True)
    # the file grows: growth over the window, per call site
    text = (root / "allocinfo").read_text().replace("16777216     4096", "16781312     4097")
    (root / "allocinfo").write_text(text)
    for _ in range(probe.slow_every):
        state.apply(Batch(2_000_000_000, tuple(probe.poll())))
    a = view.document(state, view.default_options())["allocinfo"]
    assert a["by_bytes"][0]["growth_bytes"] == 4096
    assert "allocation profiling (/proc/allocinfo 2.0)" in view.text(state, view.default_options())


def test_slab_growth_and_traced_sites_in_state() -> None:
    state = State("bpf")
    row = ("dentry", 100, 126, 192, 21, 1, 6)
    state.apply(Batch(1_000_000_000, (SlabCaches(caches=(row,), full=True),)))
    state.apply(Batch(3_000_000_000, (SlabCaches(caches=(("dentry", 2100, 2121, 192, 21, 1, 101),)),)))
    r = state.get(KernelState).slabs["dentry"]
    assert r.objs_per_s == 1000.0
    assert r.bytes_per_s == (101 - 6) * kernelfs.PAGE / 2
    state.apply(Batch(4_000_000_000, (SlabCaches(),)))
    assert state.get(KernelState).slabs["dentry"].bytes_per_s == 0  # not resent: unchanged
    state.apply(Batch(4_000_000_000, (SlabTrace(sites=(("dentry", "__d_alloc", 10, 1920, 2),), sample=64),)))
    state.apply(
        Batch(
            5_000_000_000, (SlabTrace(sites=(("dentry", "__d_alloc", 30, 5760, 2),), sample=64, events=10),)
        )
    )
    view = get_view("kernel")
    doc = view.document(state, Options(extra={"cache": "dentry"}))
    site = doc["sites"]["rows"][0]
    assert site["site"] == "__d_alloc" and site["allocs_per_s"] == 20 * 64 and site["net_objs"] == 28 * 64
    assert doc["sites"]["tracing"] is False  # no probe status: not presented as tracing now
    # page allocations: a counter that went back (detached, attached again) gives no rate across
    state.apply(Batch(6_000_000_000, (PageAlloc(orders=(100, 10)),)))
    state.apply(Batch(7_000_000_000, (PageAlloc(orders=(300, 10)),)))
    orders = view.document(state, Options())["pages"]["page_alloc"]["orders"]
    assert [o["per_s"] for o in orders] == [200.0, 0.0]
    state.apply(Batch(8_000_000_000, (PageAlloc(orders=(5, 1)),)))
    orders = view.document(state, Options())["pages"]["page_alloc"]["orders"]
    assert [o["per_s"] for o in orders] == [None, None] and orders[0]["allocs"] == 5
    whole = view.document(state, Options(sort="allocs_per_s"))
    assert whole["rows"][0]["top_site"] == "__d_alloc" and whole["rows"][0]["allocs_per_s"] == 1280


def test_without_the_free_hooks_net_growth_is_null_not_zero() -> None:
    """The default slab tracer hooks allocations only: per call site frees and net growth are
    null with the reason in JSON, a dash in text, never 0; the slabfrees tracer's figures are
    numbers, and switching between the two gives no rate across the switch."""
    state = State("bpf")
    view = get_view("kernel")
    site = (("dentry", "__d_alloc", 10, 1920, 0),)
    for ts, n in ((1, 10), (2, 30)):
        rec = SlabTrace(
            sites=(("dentry", "__d_alloc", n, n * 192, 0),), sample=64, events=n, frees_traced=False
        )
        state.apply(Batch(ts * 1_000_000_000, (ProbeStatus("slabtrace", "attached", "t"), rec)))
    doc = view.document(state, Options())
    s = doc["sites"]
    assert s["mode"] == "allocs" and s["frees_traced"] is False
    assert s["frees_note"] == "frees not traced: f to trace"
    assert s["frees_seen"] is None and s["frees_unattributed"] is None
    row = s["rows"][0]
    assert row["allocs_per_s"] == 20 * 64 and row["allocs"] == 30 * 64
    assert row["frees"] is None and row["net_objs"] is None and row["net_per_s"] is None
    text = view.text(state, Options())
    assert "allocations only" in text and "frees not traced: f to trace" in text
    assert "__d_alloc" in text and "net —" in text and "net 0" not in text
    # the user asks for the frees (f): another tracer, counting other events
    state.apply(
        Batch(
            3_000_000_000,
            (
                ProbeStatus("slabtrace", "detached", "t"),
                ProbeStatus("slabfrees", "attached", "t"),
                SlabTrace(sites=site, sample=64, events=40, frees_traced=True),
            ),
        )
    )
    s = view.document(state, Options())["sites"]
    assert s["mode"] == "allocs+frees" and s["frees_traced"] is True and s["frees_note"] is None
    assert s["tracing"] is True
    row = s["rows"][0]
    assert row["allocs_per_s"] is None  # not a rate across two tracers
    assert row["net_objs"] == 10 * 64 and row["frees"] == 0
    state.apply(
        Batch(
            4_000_000_000,
            (
                SlabTrace(
                    sites=(("dentry", "__d_alloc", 20, 3840, 4),), sample=64, events=80, frees_traced=True
                ),
            ),
        )
    )
    row = view.document(state, Options())["sites"]["rows"][0]
    assert row["net_per_s"] == (10 - 4) * 64 and row["net_objs"] == 16 * 64
    assert "allocations and frees" in view.text(state, Options())


def test_a_recording_says_whether_the_frees_were_traced() -> None:
    """A slab trace record keeps which tracer made it through a recording; one recorded before
    the default stopped hooking the frees (no such field) traced them, and says so."""
    rec = SlabTrace(sites=(("dentry", "__d_alloc", 3, 576, 0),), sample=64, events=3, frees_traced=False)
    assert from_json(to_json(rec)) == rec
    old = to_json(rec)
    del old["frees_traced"]
    before = from_json(old)
    assert isinstance(before, SlabTrace) and before.frees_traced is True


def test_unreadable_slabinfo_says_why(tmp_path: Path) -> None:
    root = _proc(tmp_path, None, None)
    (root / "slabinfo").unlink()
    probe = KernelProbe(str(root))
    probe.load()
    state = State("procfs")
    state.apply(Batch(1, tuple(probe.poll())))
    view = get_view("kernel")
    doc = view.document(state, view.default_options())
    assert doc["slab"]["readable"] is False and doc["rows"] == [] and doc["slab"]["total_bytes"] is None
    assert "does not exist" in doc["slab"]["message"]
    assert "slab caches:" in view.text(state, view.default_options())


def test_exporter_gauges_from_the_kernel_pane(tmp_path: Path) -> None:
    from memtop.export.metrics import Accumulators, families
    from memtop.export.metrics import Options as ExportOptions

    root = _proc(tmp_path, None, None)
    probe = KernelProbe(str(root))
    probe.load()
    state = State("procfs")
    # a probe that is not measuring feeds no series: this one is attached, as the bridge says
    state.apply(Batch(1, (ProbeStatus("kernel", "attached"), *probe.poll())))
    fams = {f.name: f for f in families(state, ExportOptions(topk=3), Accumulators())}
    lines = {s.labels["line"]: s.value for s in fams["memtop_kernel_memory_bytes"].samples}
    m = kernelfs.parse_meminfo((DATA / "meminfo-6.18.txt").read_text())
    assert sum(lines.values()) == m["MemTotal"]
    assert lines["slab_unreclaimable"] == m["SUnreclaim"] and "unexplained" in lines
    caches = kernelfs.parse_slabinfo((DATA / "slabinfo-2.1.txt").read_text())
    # the rest of the caches summed in the one series labelled rest="true" (its cache label empty)
    sizes = {s.labels["cache"] or "rest": s.value for s in fams["memtop_slab_cache_bytes"].samples}
    assert [s.labels for s in fams["memtop_slab_cache_bytes"].samples if s.labels.get("rest")] == [
        {"cache": "", "rest": "true"}
    ]
    top = sorted(caches.values(), key=lambda c: (-c.total_bytes, c.name))[:3]
    assert set(sizes) == {c.name for c in top} | {"rest"}
    assert sum(sizes.values()) == sum(c.total_bytes for c in caches.values())
    objs = {s.labels["cache"]: s.value for s in fams["memtop_slab_cache_objects"].samples}
    assert objs[top[0].name] == top[0].active_objs


def test_the_kernel_probe_reads_what_moved_in_buddyinfo_and_vmstat(tmp_path: Path) -> None:
    """buddyinfo's text unchanged is not parsed again (no record: nothing moved); changed, its
    new figures are sent at once. nr_zspages is found in vmstat's lines as a whole parse finds it."""
    from memtop.records.kernel import BuddyInfo, KernelMem

    root = _proc(tmp_path, None, None)
    buddy = (DATA / "buddyinfo.txt").read_text()
    (root / "buddyinfo").write_text(buddy)
    vmstat = "nr_free_pages 100\nnr_zspages_x 9\nnr_zspages 7\npgfault 3\n"
    (root / "vmstat").write_text(vmstat)
    probe = KernelProbe(str(root))
    probe.load()

    def polled() -> tuple[KernelMem, list[BuddyInfo]]:
        recs = probe.poll()
        (mem,) = [r for r in recs if isinstance(r, KernelMem)]
        return mem, [r for r in recs if isinstance(r, BuddyInfo)]

    mem, (first,) = polled()
    assert mem.zspages_bytes == kernelfs.parse_vmstat(vmstat)["nr_zspages"] * kernelfs.PAGE
    assert first.zones == tuple(kernelfs.parse_buddyinfo(buddy))
    assert polled()[1] == []  # the same text: nothing moved
    line = buddy.splitlines()[0]
    moved = buddy.replace(line, line.rsplit(" ", 1)[0] + " 12345", 1)
    assert moved != buddy
    (root / "buddyinfo").write_text(moved)
    (root / "vmstat").write_text(vmstat.replace("nr_zspages 7", "nr_zspages 8"))
    mem, (changed,) = polled()
    assert changed.zones == tuple(kernelfs.parse_buddyinfo(moved)) != first.zones
    assert mem.zspages_bytes == 8 * kernelfs.PAGE
    assert polled()[1] == []


@pytest.mark.parametrize(
    "text",
    [
        "nr_free_pages 100\nnr_zspages 7\npgfault 3\n",
        "nr_zspages 7\nnr_zspages 9",  # the last wins, no newline at the end
        "nr_zspages_x 1\nx nr_zspages 2\nnr_zspages -3\n",
        "a\rnr_zspages 4\r\nnr_zspages\x0b5\n",  # str.splitlines splits where \n does not
        "",
    ],
)
def test_the_lines_with_a_name_parse_as_the_whole_text(text: str) -> None:
    whole = kernelfs.parse_vmstat(text).get("nr_zspages")
    assert kernelfs.parse_vmstat(kernelfs.lines_with(text, "nr_zspages")).get("nr_zspages") == whole
