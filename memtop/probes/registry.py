"""The default probe set: what `memtop` attaches at start. Hot-path probes (fault stacks, malloc)
are not here: they attach on demand, scoped to a target."""

from __future__ import annotations

from pathlib import Path

from memtop.probes.base import Probe
from memtop.probes.oom import OomProbe
from memtop.probes.procfs import ProcfsProbe
from memtop.probes.procmem import ProcmemProbe
from memtop.probes.swapin import SwapinfoProbe, SwapinProbe
from memtop.probes.vmscan import VmscanProbe


def default_probes(proc_root: str | Path = "/proc", bpf: bool = True) -> list[Probe]:
    probes: list[Probe] = [ProcfsProbe(proc_root), SwapinfoProbe(proc_root)]
    if not bpf:
        return probes
    probes.append(ProcmemProbe())
    # further default probes are appended below, one per line, in load order
    probes.append(VmscanProbe())
    probes += [SwapinProbe(), OomProbe()]
    probes.extend(_optional_probes())
    return probes


def _optional_probes() -> list[Probe]:
    out: list[Probe] = []
    return out


def all_probe_classes() -> list[type[Probe]]:
    """Every probe class memtop knows (for doctor), default or on-demand."""
    classes: list[type[Probe]] = [ProcfsProbe, ProcmemProbe]
    classes += _drill_in_probe_classes()  # on demand: process drill-in (faultstack, growth, smaps)
    classes.append(VmscanProbe)
    classes += [SwapinProbe, SwapinfoProbe, OomProbe]
    classes.append(_leaks_probe_class())  # on demand: leaks (--leaks, drill-in `m`)
    return classes


def _drill_in_probe_classes() -> list[type[Probe]]:
    from memtop.probes.faultstack import FaultStackProbe
    from memtop.probes.growth import GrowthProbe
    from memtop.probes.smaps import SmapsProbe

    return [FaultStackProbe, GrowthProbe, SmapsProbe]


def _leaks_probe_class() -> type[Probe]:
    from memtop.probes.leaks import LeaksProbe

    return LeaksProbe
