"""What the exporter keeps to build less exports what a build from scratch exports: its state keeps
nothing only a pane shows (``State.panes`` False), its derived cgroup families are kept from
build to build while their inputs hold (``Accumulators.column``); series for series, value for
value."""

from __future__ import annotations

import dataclasses
import functools
import random
from operator import itemgetter
from pathlib import Path

import pytest

from memtop.export.families import Metric, Sample
from memtop.export.metrics import Accumulators, Options, families, top_and_rest
from memtop.export.server import TEXT_0_0_4, TextMemo, _encode
from memtop.records import Batch, ProbeStatus
from memtop.records.processes import ProcEvent, ProcSample
from memtop.state import State
from memtop.state.cgroups import CgroupsState, Probed
from memtop.state.kernel import KernelState
from memtop.state.processes import ProcessesState
from memtop.stream.recfile import Recording

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDINGS = sorted(DATA.glob("*.jsonl.gz"))
S = 1_000_000_000


@functools.cache
def _batches(path: Path) -> tuple[Batch, ...]:
    return tuple(Recording.load(path).batches())


def _exposed(state: State, acc: Accumulators, opts: Options) -> list[Metric]:
    return list(families(state, opts, acc))


def _row_figures(state: State) -> dict[int, tuple[object, ...]]:
    """What a process's row holds that the exporter reads or derives figures from."""
    return {
        pid: (r.sample, r.ts_ns, r.minflt_per_s, r.majflt_per_s, r.first_ts_ns, r.first_minor_faults)
        for pid, r in state.get(ProcessesState).rows.items()
    }


def _same_along(batches: tuple[Batch, ...] | list[Batch], opts: Options) -> int:
    """Apply ``batches`` to a full state and to the exporter's, and compare after each batch their
    families, their text and the rows the exporter reads; the number of process series seen."""
    full, unshown = State(), State(panes=False)
    acc_full, acc_unshown = Accumulators(), Accumulators()
    memo_full, memo_unshown = TextMemo(), TextMemo()
    seen = 0
    for b in batches:
        full.apply(b)
        unshown.apply(b)
        a, u = _exposed(full, acc_full, opts), _exposed(unshown, acc_unshown, opts)
        assert a == u
        assert _encode(TEXT_0_0_4, a, "n", memo_full) == _encode(TEXT_0_0_4, u, "n", memo_unshown)
        assert _row_figures(full) == _row_figures(unshown)
        seen += sum(len(f.samples) for f in u if f.name.startswith("memtop_process_"))
    procs = unshown.get(ProcessesState)
    assert not procs.gone and not procs.exited and not procs.exited_between
    assert all(not r.history and not r.spark for r in procs.rows.values())
    assert not unshown.get(KernelState).history
    return seen


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_recordings_export_the_same_from_the_exporters_state(path: Path) -> None:
    assert _same_along(_batches(path), Options(topk=3, pid_labels=True)) > 0 or path.name == "kernel.jsonl.gz"


def _sample(pid: int, *, comm: str = "sleep", rss: int = 4096, minflt: int = 0, start: int = 5) -> ProcSample:
    return ProcSample(
        pid=pid,
        comm=comm,
        user="root",
        uid=0,
        rss_anon_bytes=rss,
        rss_file_bytes=0,
        rss_shmem_bytes=0,
        swap_bytes=0,
        minor_faults=minflt,
        major_faults=0,
        start_time_ns=start,
    )


def _churn() -> list[Batch]:
    """Ticks of a live /proc reader: quiet processes handed back as the same objects, one that
    faults and grows, exec renames, short-lived processes' exec and exit events between polls,
    a process that exits and its pid reused by a new one (another start time)."""
    statuses = tuple(ProbeStatus(p, "attached", "") for p in ("procfs", "vmscan"))
    quiet = {pid: _sample(pid, rss=pid * 4096) for pid in range(100, 140)}
    out: list[Batch] = []
    for tick in range(1, 12):
        ts = tick * S
        events: list[ProcEvent] = []
        for k in range(30):  # born and gone between two polls
            events += [
                ProcEvent(ts, "exec", 10_000 + tick * 100 + k, "true"),
                ProcEvent(ts, "exit", 10_000 + tick * 100 + k, "true", 1000),
            ]
        busy = _sample(200, rss=tick * (1 << 20), minflt=tick * 50)
        if tick == 4:
            events.append(ProcEvent(ts, "exec", 101, "renamed"))
        samples = [s for pid, s in quiet.items() if not (tick >= 6 and pid == 120)]
        if tick == 6:
            events.append(ProcEvent(ts, "exit", 120, quiet[120].comm, 5 * S))
        if tick >= 8:  # its pid taken by a new process
            samples.append(_sample(120, comm="new", rss=1 << 30, start=ts))
        if tick == 5:
            quiet[101] = dataclasses.replace(quiet[101], comm="renamed")
        out.append(Batch(ts, (*statuses, *events, *samples, busy)))
    return out


def test_a_live_churn_exports_the_same_from_the_exporters_state() -> None:
    assert _same_along(_churn(), Options(topk=5)) > 0
    assert _same_along(_churn(), Options(topk=5, pid_labels=True)) > 0


class _Unmemoised(Accumulators):
    """The derived per-cgroup families made anew at every build."""

    def column(
        self, name: str, paths: list[str], labels: list[dict[str, str]], values: list[float]
    ) -> list[Sample]:
        return [Sample(name, lab, v) for lab, v in zip(labels, values, strict=True)]


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_families_kept_from_build_to_build_are_those_made_anew(path: Path) -> None:
    """Each recording, a build after every batch, by one exporter's accumulators kept from build
    to build and by one that makes every derived cgroup family anew: the same families."""
    state = State(panes=False)
    kept, anew = Accumulators(), _Unmemoised()
    opts = Options()
    cgroup_series = 0
    for b in _batches(path):
        state.apply(b)
        k, a = _exposed(state, kept, opts), _exposed(state, anew, opts)
        assert k == a
        cgroup_series += sum(len(f.samples) for f in k if f.name.startswith("memtop_cgroup_"))
    assert cgroup_series or path.name != "cgroups.jsonl.gz"


def test_a_moved_derived_figure_is_exported_at_once() -> None:
    """One cgroup's reclaim moves between two builds: its series has the new value, the others
    are the last build's samples."""
    state = State(panes=False)
    for b in _batches(DATA / "cgroups.jsonl.gz"):
        state.apply(b)
    acc = Accumulators()
    first = {f.name: f for f in _exposed(state, acc, Options())}
    eps = first["memtop_cgroup_reclaim_episodes"].samples
    assert eps
    cg = state.get(CgroupsState)
    path = eps[0].labels["id"]
    cg.probed.setdefault(path, Probed()).reclaim_events += 5
    second = {f.name: f for f in _exposed(state, acc, Options())}
    moved = second["memtop_cgroup_reclaim_episodes"].samples
    assert moved[0].value == eps[0].value + 5
    assert all(x is y for x, y in zip(moved[1:], eps[1:], strict=True))


@pytest.mark.parametrize("seed", range(40))
def test_the_top_processes_and_the_rest_are_those_of_a_full_sort(seed: int) -> None:
    """Values with many zeros (no swap, no stall) or few (RSS), ties, fewer or more processes than K: the
    top K and the rest's sum are, bit for bit, those of every process sorted."""
    rng = random.Random(seed)
    n = rng.choice([0, 1, 3, 10, 11, 50, 400])
    k = rng.choice([1, 3, 10, 20])
    pids = rng.sample(range(1, 100_000), n)
    choices = [4096.0, 8192.0, rng.random() * 1e-3, rng.random() * 1e9]
    zeros = rng.choice([0.0, 0.1, 0.5, 0.9])  # the share of processes with none (RSS: few)
    values = [
        0.0
        if rng.random() < zeros
        else rng.choice(choices) * (rng.randint(1, 3) if rng.random() < 0.5 else 1)
        for _ in pids
    ]
    ranked = sorted(zip(values, pids, range(n), strict=True), reverse=True)
    top, rest = top_and_rest(values, pids, k)
    assert top == ranked[:k]
    if n <= k:
        assert rest is None
    else:
        expected = sum(map(itemgetter(0), ranked[k:]))
        assert rest is not None and rest.hex() == float(expected).hex()
