"""Every probe memtop knows, one registration line each. Which panes a probe feeds is said by the
views (``View.probes``, beside each view); whether it attaches at start or only when asked, by its
class (``Probe.on_demand``). Adding a probe is one line in ``PROBES``."""

from __future__ import annotations

import importlib
from pathlib import Path

from memtop.probes.base import Probe

#: probe name -> its class, as "module:Class", so that a probe is this one line and nothing here
#: imports a probe module before it is asked for. Default probes load in this order, those that
#: need no BPF first (nothing to compile).
PROBES: dict[str, str] = {
    "procfs": "memtop.probes.procfs:ProcfsProbe",
    "procmem": "memtop.probes.procmem:ProcmemProbe",
    "faultstack": "memtop.probes.faultstack:FaultStackProbe",
    "growth": "memtop.probes.growth:GrowthProbe",
    "smaps": "memtop.probes.smaps:SmapsProbe",
    "vmscan": "memtop.probes.vmscan:VmscanProbe",
    "swapin": "memtop.probes.swapin:SwapinProbe",
    "swapinfo": "memtop.probes.swapin:SwapinfoProbe",
    "oom": "memtop.probes.oom:OomProbe",
    "leaks": "memtop.probes.leaks:LeaksProbe",
}


def probe_class(name: str) -> type[Probe]:
    """The class registered as ``name`` (KeyError for a name not registered)."""
    module, _, attr = PROBES[name].partition(":")
    cls = getattr(importlib.import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, Probe) and cls.name == name):
        raise TypeError(f"{PROBES[name]} is not the probe named {name!r}")
    return cls


def all_probe_classes() -> list[type[Probe]]:
    """Every probe class memtop knows (for doctor), default or on-demand, in registration order."""
    return [probe_class(name) for name in PROBES]


def default_probes(proc_root: str | Path = "/proc", bpf: bool = True) -> list[Probe]:
    """The probes memtop attaches at start, in load order: those that need no BPF first (nothing
    to compile, so the first frame has data), then, unless ``bpf`` is False, the BPF ones."""
    classes = [cls for cls in all_probe_classes() if not cls.on_demand]
    first = [cls.at_start(proc_root) for cls in classes if not cls.needs_bpf]
    return first + ([cls.at_start(proc_root) for cls in classes if cls.needs_bpf] if bpf else [])
