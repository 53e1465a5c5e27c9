"""MGLRU's page ages in a cgroup's needed memory, on fixture trees in the kernel documentation's
format (Documentation/admin-guide/mm/multigen_lru.rst; this kernel has no MGLRU): debugfs
``lru_gen`` read by the real cgroups probe over a v2 tree, its generations split at the needed
window by the state, and the Cgroups view's detail saying where its figures come from."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from memtop.linux import cgroupfs, kernelfs
from memtop.probes.cgroups import CgroupsProbe
from memtop.records import Batch, ProbeStatus, from_json, to_json
from memtop.records.cgroups import CgroupLruGen, CgroupPoll
from memtop.state import State
from memtop.views import Options, get_view

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "kernel" / "compressed"
MiB = 1 << 20
PAGE = kernelfs.PAGE


def pages(n_mib: int) -> int:
    return n_mib * MiB // PAGE


#: /app: 48 MiB in generations younger than 10 s (32 anon + 16 file), 300 MiB older, on two
#: nodes; its child /app/worker 16 MiB of young file pages: /app's needed 64 MiB, cold 300 MiB
LRU_GEN = f"""memcg     1 /
 node     0
          0      98000          0          0
memcg     7 /app
 node     0
          1      45000 {pages(100):10d} {pages(100):10d}
          2       9000          0 {pages(16):10d}
          3       1200 {pages(32):10d}          0
 node     1
          0     120000          0 {pages(100):10d}
          1       3000          0          0
memcg     9 /app/worker
 node     0
          4        800          0 {pages(16):10d}
"""


def tree(tmp_path: Path, lru_gen: str = LRU_GEN, enabled: str = "0x0007") -> CgroupsProbe:
    """A v2 cgroup tree (/, /app, /app/worker: the fixture's memory.stat), a proc root whose
    mountinfo names a debugfs holding ``lru_gen``, a sys root with ``lru_gen/enabled``; the
    probe over them."""
    root = tmp_path / "cg"
    for d in (root, root / "app", root / "app" / "worker"):
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURE / "cgroup2" / "memory.stat", d / "memory.stat")
        (d / "cgroup.procs").write_text("")
        (d / "memory.current").write_text(str(400 * MiB) + "\n")
    (root / "cgroup.controllers").write_text("memory\n")
    (root / "app" / "memory.max").write_text(str(500 * MiB) + "\n")
    debug = tmp_path / "debug"
    debug.mkdir()
    (debug / "lru_gen").write_text(lru_gen)
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountinfo").write_text(
        f"22 1 0:21 / /proc rw,relatime shared:12 - proc proc rw\n"
        f"30 22 0:7 / {debug} rw,nosuid shared:14 - debugfs debugfs rw\n"
    )
    sys = tmp_path / "sys"
    (sys / "kernel" / "mm" / "lru_gen").mkdir(parents=True)
    (sys / "kernel" / "mm" / "lru_gen" / "enabled").write_text(enabled + "\n")
    probe = CgroupsProbe(str(proc), sys_root=str(sys))
    h = cgroupfs.Hierarchy(str(root), 2, ("memory",))
    probe.layout = cgroupfs.Layout("v2", (h,), h, h, True)
    return probe


def needed(state: State, path: str = "/app") -> Any:
    doc = get_view("cgroups").document(state, Options(extra={"cgroup": path}))
    return doc["detail"]["needed"]


def test_lru_gen_ages_through_the_probe_into_the_view(tmp_path: Path) -> None:
    """Generations born within the window are needed, older ones cold, anon and file alike, a
    cgroup's children's included (as memory.stat counts them); the detail says the source."""
    probe = tree(tmp_path)
    recs = probe.poll()
    (lru,) = [r for r in recs if isinstance(r, CgroupLruGen)]
    assert from_json(to_json(lru)) == lru  # a recording replays it
    state = State(mode="bpf")
    state.apply(Batch(1_000_000_000, (ProbeStatus("cgroups", "attached"), *recs)))
    need = needed(state)
    assert need["source"] == "lru_gen" and "lru_gen" in need["method"]
    assert need["needed_bytes"] == 64 * MiB and need["cold_bytes"] == 300 * MiB
    assert (need["young_anon_bytes"], need["young_file_bytes"]) == (32 * MiB, 32 * MiB)
    assert (need["old_anon_bytes"], need["old_file_bytes"]) == (100 * MiB, 200 * MiB)
    assert not need["thrashing"] and need["limit_bytes"] == 500 * MiB
    worker = needed(state, "/app/worker")
    assert worker["needed_bytes"] == 16 * MiB and worker["cold_bytes"] == 0
    doc = get_view("cgroups").document(state, Options())
    row = next(r for r in doc["rows"] if r["path"] == "/app")
    assert (row["needed_bytes"], row["cold_bytes"]) == (64 * MiB, 300 * MiB)
    assert row["needed_source"] == "lru_gen"
    # the exporter's working set is the same figure
    from memtop.export.metrics import Accumulators, families
    from memtop.export.metrics import Options as ExportOptions

    fams = {f.name: f for f in families(state, ExportOptions(), Accumulators())}
    ws = {s.labels["id"]: s.value for s in fams["memtop_working_set_bytes"].samples}
    assert ws["/app"] == 64 * MiB


def test_lru_gen_is_read_every_few_seconds_and_ages_go_stale(tmp_path: Path) -> None:
    """A poll within LRU_GEN_EVERY_NS of the last read does not read it again; ages 30 s old are
    not used (memory.stat's estimate is shown again), never served as current."""
    probe = tree(tmp_path)
    first = probe.poll()
    assert any(isinstance(r, CgroupLruGen) for r in first)
    assert not any(isinstance(r, CgroupLruGen) for r in probe.poll())
    s = 1_000_000_000
    state = State(mode="bpf")
    state.apply(Batch(1 * s, (ProbeStatus("cgroups", "attached"), *first)))
    assert needed(state)["source"] == "lru_gen"
    state.apply(Batch(32 * s, (CgroupPoll(3),)))
    need = needed(state)
    assert need["source"] == "memory.stat" and need["young_anon_bytes"] is None
    # the fixture's memory.stat: anon 200 MiB + active file 25 MiB, inactive file 25 MiB
    assert need["needed_bytes"] == 225 * MiB and need["cold_bytes"] == 25 * MiB


def test_mglru_off_or_lru_gen_unreadable_means_memory_stat(tmp_path: Path) -> None:
    """MGLRU off: no record at all; on, with lru_gen unreadable (a FIFO: it cannot block) or
    gone: a record saying why, and the state forgets the ages it had."""
    off = tree(tmp_path / "off", enabled="0x0000")
    assert not any(isinstance(r, CgroupLruGen) for r in off.poll())
    probe = tree(tmp_path / "on")
    state = State(mode="bpf")
    state.apply(Batch(1, (ProbeStatus("cgroups", "attached"), *probe.poll())))
    assert needed(state)["source"] == "lru_gen"
    lru = tmp_path / "on" / "debug" / "lru_gen"
    lru.unlink()
    os.mkfifo(lru)
    probe._lru_gen_ns = None  # the next poll reads it again
    (rec,) = [r for r in probe.poll() if isinstance(r, CgroupLruGen)]
    assert rec.memcgs == () and "not readable" in rec.why
    state.apply(Batch(2, (rec, CgroupPoll(3))))
    assert needed(state)["source"] == "memory.stat"
    view = get_view("cgroups")
    doc = view.document(state, Options())
    assert doc["lru_gen_unused"] is not None and "lru_gen is not readable" in doc["lru_gen_unused"]
    assert "not MGLRU's page ages: " in view.text(state, Options())


def test_lru_gen_is_opened_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """lru_gen is writable (a write ages or evicts generations): memtop opens it read-only, not
    through a symlink, and leaves it as it was."""
    probe = tree(tmp_path)
    opened: list[tuple[str, int]] = []
    real_open = os.open

    def spy(path: Any, flags: int, *args: Any, **kw: Any) -> int:
        opened.append((os.fspath(path), flags))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", spy)
    probe.poll()
    flags = [f for p, f in opened if p.endswith("/lru_gen")]
    assert flags and all(f & os.O_ACCMODE == os.O_RDONLY and f & os.O_NOFOLLOW for f in flags)
    assert (tmp_path / "debug" / "lru_gen").read_text() == LRU_GEN


def test_ages_beyond_a_cgroups_usage_are_not_used(tmp_path: Path) -> None:
    """A cgroup name can also forge generation lines inside its own block: ages adding up to more
    than a cgroup's usage are not its own, so that cgroup and its ancestors (which count its
    pages) fall back to memory.stat."""
    inflated = LRU_GEN + f"          5        100 {pages(1024):10d}          0\n"  # /app/worker's
    probe = tree(tmp_path, lru_gen=inflated)
    state = State(mode="bpf")
    state.apply(Batch(1, (ProbeStatus("cgroups", "attached"), *probe.poll())))
    assert needed(state, "/app/worker")["source"] == "memory.stat"
    assert needed(state, "/app")["source"] == "memory.stat"


def test_a_forged_memcg_line_drops_the_cgroup_it_names() -> None:
    """A cgroup name holding a newline can print a line that looks like another memcg's: a path
    or id listed twice is not used (memory.stat instead), the others are."""
    forged = LRU_GEN + "memcg    11 /evil\nmemcg     7 /app\n node     0\n          5   100   99999 0\n"
    ages = kernelfs.parse_lru_gen(forged)
    assert "/app" not in ages and "/app/worker" in ages
    assert ages["/app/worker"] == [(800, 0, pages(16))]
    # lru_gen_full's marks (x: a generation already evicted) do not break a line
    full = kernelfs.parse_lru_gen("memcg 3 /a\n node 0\n 1 20000 10x 20\n")
    assert full == {"/a": [(20000, 10, 20)]}


def test_doctor_says_mglru_is_used_and_why_not(tmp_path: Path) -> None:
    """doctor's MGLRU line: on with lru_gen readable (needed memory uses it), on without debugfs,
    off, absent; each says what needed memory does then."""
    from memtop.headless.doctor import mglru_check

    tree(tmp_path)
    sys, debug = str(tmp_path / "sys"), str(tmp_path / "debug")
    used = mglru_check(sys, debug)
    assert used.ok and "0x0007: on" in used.detail and "lru_gen readable (3 memcgs)" in used.detail
    assert "needed memory uses its page ages" in used.hint
    no_debugfs = mglru_check(sys, None)
    assert not no_debugfs.ok and "debugfs not mounted" in no_debugfs.detail
    assert "memory.stat" in no_debugfs.hint and not no_debugfs.required
    (tmp_path / "sys" / "kernel" / "mm" / "lru_gen" / "enabled").write_text("0x0000\n")
    off = mglru_check(sys, debug)
    assert not off.ok and off.detail == "lru_gen 0x0000: off"
    absent = mglru_check(str(tmp_path / "nothing"), debug)
    assert not absent.ok and absent.detail == "absent" and "CONFIG_LRU_GEN" in absent.hint


DAMON_ADMIN = Path("/sys/kernel/mm/damon/admin/kdamonds")


def _damon_files() -> dict[str, str]:
    """DAMON's control files (each kdamond's state, the nr_* counts), to see them unchanged (its
    regions are left out: the kdamond's owner may refresh them meanwhile)."""
    out: dict[str, str] = {}
    for d, dirs, files in os.walk(DAMON_ADMIN):
        dirs[:] = [x for x in dirs if x not in ("regions", "tried_regions")]
        for f in files:
            if f != "state" and not f.startswith("nr_"):
                continue
            try:
                out[os.path.join(d, f)] = Path(d, f).read_text()
            except OSError:
                pass
    return out


@pytest.mark.skipif(
    not (DAMON_ADMIN / "nr_kdamonds").exists()
    or (DAMON_ADMIN / "nr_kdamonds").read_text().strip() in ("", "0"),
    reason="no kdamond runs on this machine (the development VM runs one that is not memtop's)",
)
def test_doctor_says_a_running_kdamond_is_not_memtops() -> None:
    """On this machine's real sysfs (a paddr kdamond someone else started): doctor's DAMON line
    names it, says its regions can only be read by writing its state file, which memtop never
    does, and leaves every DAMON file as it was."""
    from memtop.headless.doctor import needed_checks

    before = _damon_files()
    damon = {c.name: c for c in needed_checks(1)}["DAMON"]
    n = int((DAMON_ADMIN / "nr_kdamonds").read_text())
    state = (DAMON_ADMIN / "0" / "state").read_text().strip()
    assert damon.detail.startswith(f"{n} kdamond(s): {state} ")
    assert (
        "a running kdamond is not memtop's; its regions can only be read by writing to its state "
        "file, which memtop never does" in damon.hint
    )
    assert not damon.required and _damon_files() == before


def test_a_kernel_without_mglru_is_not_asked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sysfs's mm directory without lru_gen at load (a kernel built without MGLRU, which cannot
    gain it: it is never a module) is not looked at again; with it, its enabled file is read
    at the polls as before."""
    asked: list[str] = []
    real = kernelfs.lru_gen_enabled

    def counted(sys: str = "/sys") -> tuple[str, bool]:
        asked.append(sys)
        return real(sys)

    monkeypatch.setattr(kernelfs, "lru_gen_enabled", counted)
    probe = tree(tmp_path)
    monkeypatch.setattr(cgroupfs, "layout", lambda proc: probe.layout)
    probe.load()
    assert any(isinstance(r, CgroupLruGen) for r in probe.poll()) and len(asked) == 1
    shutil.rmtree(tmp_path / "sys" / "kernel" / "mm" / "lru_gen")
    again = CgroupsProbe(probe.proc_root, sys_root=probe.sys_root)
    again.load()
    for _ in range(3):
        assert not any(isinstance(r, CgroupLruGen) for r in again.poll())
        again._lru_gen_ns = None  # noqa: SLF001 - as if LRU_GEN_EVERY_NS had passed
    assert len(asked) == 1
