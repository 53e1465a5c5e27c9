"""Cgroups past the probe's limit: 6,000 real memory cgroups (v1 here, under a test parent,
removed afterwards) and a limit of 5,000. The probe reads 5,000, says how many it left out (the
pane's document and text, a Lost count the exporter serves) and keeps the largest: every cgroup
whose usage (the kernel's memory.usage_in_bytes) is 1 MiB or more, two small workloads among the
6,000 named to sort last (a walk that stopped at 5,000 in name order dropped them without a word),
and every kept cgroup's parent."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from support import CG1

from memtop.export.metrics import Accumulators, families
from memtop.export.metrics import Options as ExportOptions
from memtop.linux.cgroupfs import layout, parse_int, read_text, walk
from memtop.probes.cgroups import OVER_LIMIT, CgroupsProbe
from memtop.records import Batch, Lost, ProbeStatus
from memtop.records.cgroups import CgroupPoll, CgroupSample
from memtop.state import State
from memtop.views.cgroups import CgroupsView

pytestmark = pytest.mark.bpf  # root: it makes memory cgroups

EMPTY = 6000
LIMIT = 5000
HOG = "import os, sys; open(sys.argv[1] + '/cgroup.procs', 'w').write(str(os.getpid())); " + (
    "b = bytearray(b'x') * (8 << 20); print('ready', flush=True); sys.stdin.read()"
)


class Tree:
    def __init__(self) -> None:
        self.name = f"memtop-defects-limit-{os.getpid()}"
        self.top = CG1 / self.name
        self.kids = [f"c{i:04d}" for i in range(EMPTY)]
        self.hogs = ["zz-hog-0", "zz-hog-1"]  # sorted after every c####
        self.procs: list[subprocess.Popen[str]] = []

    def make(self) -> None:
        self.top.mkdir()
        for name in [*self.kids, *self.hogs]:
            (self.top / name).mkdir()
        for name in self.hogs:
            p = subprocess.Popen(
                [sys.executable, "-c", HOG, str(self.top / name)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            self.procs.append(p)
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"

    def remove(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()
        if not self.top.exists():
            return
        for name in [*self.kids, *self.hogs]:
            try:
                (self.top / name).rmdir()
            except FileNotFoundError:
                pass
        self.top.rmdir()


@pytest.fixture
def tree() -> Iterator[Tree]:
    if not (CG1 / "memory.limit_in_bytes").exists():
        pytest.skip("no cgroup v1 memory controller here (the test makes v1 memcgs)")
    t = Tree()
    try:
        t.make()
        yield t
    finally:
        t.remove()


def every_cgroup() -> set[str]:
    """Every cgroup path the probe could read, listed the way it lists them (no bound)."""
    lay = layout()
    paths: set[str] = set()
    for h in (lay.memory, lay.unified):
        if h is not None:
            paths |= {p for p, _ in walk(h.mountpoint, 1 << 30)}
    return paths


def usage_bytes(path: str) -> int:
    return parse_int(read_text(os.path.join(CG1, path.lstrip("/"), "memory.usage_in_bytes"))) or 0


def test_past_the_limit_the_largest_are_kept_and_the_rest_said(tree: Tree) -> None:
    probe = CgroupsProbe(max_cgroups=LIMIT)
    probe.load()
    try:
        before = every_cgroup()
        records = probe.poll()
        after = every_cgroup()
    finally:
        probe.close()
    assert len(before) > LIMIT + 1000
    kept = {r.path for r in records if isinstance(r, CgroupSample)}
    poll = next(r for r in records if isinstance(r, CgroupPoll))
    # 5,000 chosen; one removed (by whoever made it) between the listing and its read is not sent
    assert poll.cgroups == len(kept) and poll.max_cgroups == LIMIT
    assert LIMIT - len(before - after) <= len(kept) <= LIMIT
    # what it left out, against the kernel's tree listed just before and after
    assert len(before & after) - LIMIT <= poll.over_limit <= len(before | after) - LIMIT
    lost = [r for r in records if isinstance(r, Lost)]
    assert lost == [Lost("cgroups", OVER_LIMIT, poll.over_limit)]
    # which: the root, the workloads and every cgroup of 1 MiB or more, each with its parent
    top = f"/{tree.name}"
    assert "/" in kept and top in kept
    assert {f"{top}/{h}" for h in tree.hogs} <= kept
    big = {p for p in before & after if p != "/" and usage_bytes(p) >= 1 << 20}
    assert big <= kept, sorted(big - kept)[:10]
    for path in kept - {"/"}:
        assert (path.rsplit("/", 1)[0] or "/") in kept, path
    # said in the pane's document and text, and in the exporter's lost counter
    state = State(mode="procfs")
    state.apply(Batch(1, (ProbeStatus("cgroups", "attached", "test"), *records)))
    view = CgroupsView()
    doc = view.document(state, view.default_options())
    assert (doc["over_limit"], doc["max_cgroups"]) == (poll.over_limit, LIMIT)
    assert f"{poll.over_limit} more cgroups past the limit of {LIMIT} not read" in view.text_extra(doc)
    lost_family = next(
        m for m in families(state, ExportOptions(), Accumulators()) if m.name == "memtop_lost_events"
    )
    assert any(
        s.labels == {"probe": "cgroups", "what": OVER_LIMIT} and s.value == poll.over_limit
        for s in lost_family.samples
        if s.name.endswith("_total")
    )
    assert {p for p in before & after if p not in kept}, "nothing was left out"
