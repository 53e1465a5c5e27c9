"""A cgroup's needed memory on cgroup samples in the kernel's figures (the estimate's arithmetic;
tests/kernel/test_needed_kernel.py checks it on real memcgs), and its exported series."""

from __future__ import annotations

from memtop.records import Batch, ProbeStatus
from memtop.state import State

MiB = 1 << 20


def test_needed_estimate_and_its_exported_series() -> None:
    """The estimate on cgroup samples in the kernel's figures: refaults over the window add to
    needed (anon at most its swap), activations move inactive file out of cold, and the
    exporter's memtop_working_set_bytes is that figure."""
    from memtop.export.metrics import Accumulators, families
    from memtop.export.metrics import Options as ExportOptions
    from memtop.records.cgroups import CgroupPoll, CgroupSample
    from memtop.state.cgroups import CgroupsState

    s = 1_000_000_000

    def sample(refault_anon: int, activate_file: int) -> CgroupSample:
        stat = (
            ("anon", 90 * MiB),
            ("shmem", 0),
            ("active_file", 2 * MiB),
            ("inactive_file", 50 * MiB),
            ("refault_anon", refault_anon),
            ("refault_file", 0),
            ("activate_file", activate_file),
        )
        return CgroupSample(
            "/storm", 2, usage_bytes=100 * MiB, limit_bytes=100 * MiB, swap_bytes=200 * MiB, stat=stat
        )

    state = State(mode="bpf")
    state.apply(Batch(1 * s, (ProbeStatus("cgroups", "attached"), sample(0, 0), CgroupPoll(1))))
    row = state.get(CgroupsState).rows["/storm"]
    first = row.needed(1 * s)
    assert first is not None and first.measured_s == 0 and first.refault_anon_bytes_per_s is None
    assert first.needed_bytes == 92 * MiB and first.cold_bytes == 50 * MiB and not first.thrashing
    # 2 s later: 25,600 pages (100 MiB) read back from swap, 256 pages (1 MiB) of file activated
    state.apply(Batch(3 * s, (sample(25_600, 256), CgroupPoll(1))))
    n = row.needed(3 * s)
    assert n is not None and n.measured_s == 2.0
    assert n.refault_anon_bytes_per_s == 50 * MiB and n.refaulting_bytes == 200 * MiB  # capped by swap
    assert n.activated_bytes == 5 * MiB and n.cold_bytes == 45 * MiB
    assert n.needed_bytes == (90 + 2 + 5 + 200) * MiB and n.thrashing
    fams = {f.name: f for f in families(state, ExportOptions(), Accumulators())}
    (need,) = fams["memtop_working_set_bytes"].samples
    assert need.value == n.needed_bytes and need.labels["id"] == "/storm"
    assert fams["memtop_cgroup_thrashing"].samples[0].value == 1.0


def test_needed_figures_are_needed_and_kept_only_while_flat() -> None:
    """The exporter's figures (``needed_figures``) are ``needed``'s at every point; an idle
    cgroup's (the same sample, counters flat) are the last answer whatever the time, and a
    cgroup whose counters moved within its points is computed anew at each time, its rates
    falling as the window moves past the move."""
    from memtop.records.cgroups import CgroupPoll, CgroupSample
    from memtop.state.cgroups import CgroupsState

    s = 1_000_000_000

    def sample(refault_file: int) -> CgroupSample:
        stat = (
            ("anon", 10 * MiB),
            ("active_file", 2 * MiB),
            ("inactive_file", 50 * MiB),
            ("refault_anon", 0),
            ("refault_file", refault_file),
            ("activate_file", 0),
        )
        return CgroupSample("/idle", 2, usage_bytes=60 * MiB, limit_bytes=100 * MiB, stat=stat)

    state = State(mode="bpf")
    state.apply(Batch(1 * s, (ProbeStatus("cgroups", "attached"), sample(0), CgroupPoll(1))))
    row = state.get(CgroupsState).rows["/idle"]
    for now in (1 * s, 5 * s, 60 * s):
        n = row.needed(now)
        assert n is not None and row.needed_figures(now) == (n.needed_bytes, n.cold_bytes, n.thrashing)
    kept = row._needed_memo
    assert kept is not None and row.needed_figures(90 * s) == kept[6] and row._needed_memo is kept
    # 2,560 file pages (10 MiB) read back within 2 s: the rates move with the time asked
    state.apply(Batch(3 * s, (sample(2_560), CgroupPoll(1))))
    seen: set[int] = set()
    for now in (3 * s, 8 * s, 12 * s, 30 * s):
        n = row.needed(now)
        assert n is not None
        assert row.needed_figures(now) == (n.needed_bytes, n.cold_bytes, n.thrashing)
        assert row._needed_memo is None  # not flat: nothing kept
        seen.add(n.needed_bytes)
    assert len(seen) > 1
