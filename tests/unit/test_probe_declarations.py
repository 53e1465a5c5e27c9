"""Which probes feed which pane is declared once, by the views (``View.probes``); probes are
registered once, a line each (memtop/probes/registry.py). Every name a view declares is a
registered probe, every registered probe feeds some pane, and what doctor and the drill-in say
about a probe comes from those declarations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memtop.headless import doctor
from memtop.linux import tracefs
from memtop.probes.base import Probe
from memtop.probes.cgroups import CgroupsProbe
from memtop.probes.procfs import ProcfsProbe
from memtop.probes.registry import PROBES, all_probe_classes, default_probes, on_demand, probe_class
from memtop.probes.swapin import SwapinfoProbe
from memtop.views import View, panes_of_probes, views
from memtop.views.process import SECTIONS, ProcessView
from memtop.views.vmscan import VmscanView


def test_every_probe_a_view_names_is_registered() -> None:
    unknown = {(name, p) for name, view in views().items() for p in view.probes if p not in PROBES}
    assert unknown == set(), "views name probes that are not registered (a typo?)"


def test_every_registered_probe_feeds_a_pane() -> None:
    fed = panes_of_probes()
    orphans = [name for name in PROBES if not fed.get(name)]
    assert orphans == [], "registered probes no view declares"


def test_each_registration_is_the_class_of_that_name() -> None:
    for name in PROBES:
        cls = probe_class(name)
        assert issubclass(cls, Probe) and cls.name == name
    assert [c.name for c in all_probe_classes()] == list(PROBES)


def test_default_probes_in_load_order(tmp_path: Path) -> None:
    probes = default_probes(tmp_path)
    # nothing to compile first (the first frame has /proc's figures), then the BPF programs, each
    # group in registry order; today's set pinned as a subset (a new pane's probe adds to it)
    names = [p.name for p in probes]
    at_start = [n for n in PROBES if not on_demand(n)]
    no_bpf = [n for n in at_start if not probe_class(n).needs_bpf]
    assert names == no_bpf + [n for n in at_start if probe_class(n).needs_bpf]
    assert [p.name for p in default_probes(tmp_path, bpf=False)] == no_bpf
    assert names[:3] == ["procfs", "cgroups", "swapinfo"] and {"procmem", "vmscan", "swapin", "oom"} <= set(
        names
    )
    assert not any(on_demand(p.name) for p in probes)
    asked = {name for name in PROBES if on_demand(name)}
    assert asked == {
        "faultstack",
        "growth",
        "smaps",
        "leaks",
        "leakrate",
        "slabtrace",
        "slabfrees",
        "slabstacks",
        "pagealloc",
        "shmsnoop",
        "wss",
    }
    assert asked | {p.name for p in probes} == set(PROBES)
    # the /proc readers read the root they are given
    procfs, cgroups, swapinfo = probes[0], probes[1], probes[2]
    assert isinstance(procfs, ProcfsProbe) and isinstance(swapinfo, SwapinfoProbe)
    assert isinstance(cgroups, CgroupsProbe)
    assert procfs.root == tmp_path and swapinfo.proc == tmp_path and cgroups.proc_root == str(tmp_path)


def test_drill_in_declares_each_sections_probe() -> None:
    view = ProcessView()
    assert tuple(view.section_probes) == SECTIONS
    assert view.probes == ("procfs", "faultstack", "growth", "smaps", "wss")
    # its status line: the probes it attaches for its target; procfs's is on the panes it feeds
    assert view.own_probes == ("faultstack", "growth", "smaps", "wss")


def probe_lines(checks: list[doctor.Check]) -> dict[str, str]:
    return {c.name.removeprefix("probe "): c.detail for c in checks if c.name.startswith("probe ")}


def test_doctor_names_the_panes_the_views_say_each_probe_feeds() -> None:
    text, _ = doctor.report()
    doc, _ = doctor.report(as_json=True)
    lines = probe_lines([doctor.Check(**c) for c in json.loads(doc)["checks"]])
    assert set(lines) == set(PROBES)
    for name, panes in panes_of_probes().items():
        assert lines[name].startswith(f"feeds {', '.join(panes)} (")
        assert f"probe {name}" in text and f"feeds {', '.join(panes)} (" in text
    assert lines["vmscan"].startswith("feeds processes, vmscan, reclaim, cgroups (at start")
    assert lines["leaks"] == "feeds leaks (on demand, BPF)"


def test_doctor_follows_a_changed_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    """Declared on the view, and nowhere else: a pane that stops naming a probe is gone from that
    probe's doctor line, and from the panes a missing tracepoint of it stops."""
    monkeypatch.setattr(VmscanView, "probes", ("procfs",))
    monkeypatch.setattr(View, "registry", {**View.registry})  # a pane declaring the oom probe too

    class OomTwin(View[Any]):
        name = "oomtwin"
        probes = ("oom",)

    monkeypatch.setattr(tracefs, "tracepoint_exists", lambda tp: tp != "oom:mark_victim")
    monkeypatch.setattr(tracefs, "root", lambda mount=False: Path("/sys/kernel/tracing"))
    checks = doctor.run_checks()
    lines = probe_lines(checks)
    assert lines["vmscan"].startswith("feeds processes, reclaim, cgroups (")
    assert lines["oom"].startswith("feeds oom, cgroups, oomtwin (")
    tp = next(c for c in checks if c.name == "tracepoint oom:mark_victim")
    assert not tp.ok and tp.hint == "pane(s) cgroups, oom, oomtwin cannot run on this kernel"
    oom = next(c for c in checks if c.name == "probe oom")
    assert not oom.ok and "oom:mark_victim" in oom.hint and not oom.required


def test_start_imports_no_on_demand_probe_module() -> None:
    """The registry says when a probe attaches, so memtop's start imports only the modules of the
    probes it attaches then (each on-demand module costs CPU before the first frame)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from memtop.probes.registry import default_probes\n"
        "default_probes()\n"
        "print(' '.join(m for m in sys.modules if m.startswith('memtop.probes.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(out.stdout.split())
    for name in PROBES:
        module = PROBES[name][0].partition(":")[0]
        if on_demand(name) and module not in {
            PROBES[n][0].partition(":")[0] for n in PROBES if not on_demand(n)
        }:
            assert module not in loaded, f"{module} imported at start"
