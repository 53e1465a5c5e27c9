"""Every probe memtop knows, one registration line each: its class and when it attaches (at start,
or on demand: when an intent asks for it). Which panes a probe feeds is said by the views
(``View.probes``, beside each view). Adding a probe is one line in ``PROBES``."""

from __future__ import annotations

import importlib
from pathlib import Path

from memtop.probes.base import Probe

AT_START, ON_DEMAND = "at start", "on demand"

#: probe name -> (its class as "module:Class", when it attaches). Nothing here imports a probe
#: module before it is asked for: memtop's start imports only the default probes' modules.
#: Default probes load in this order, those that need no BPF first (nothing to compile).
PROBES: dict[str, tuple[str, str]] = {
    "procfs": ("memtop.probes.procfs:ProcfsProbe", AT_START),
    "procmem": ("memtop.probes.procmem:ProcmemProbe", AT_START),
    "cgroups": ("memtop.probes.cgroups:CgroupsProbe", AT_START),
    "faultstack": ("memtop.probes.faultstack:FaultStackProbe", ON_DEMAND),
    "growth": ("memtop.probes.growth:GrowthProbe", ON_DEMAND),
    "smaps": ("memtop.probes.smaps:SmapsProbe", ON_DEMAND),
    "wss": ("memtop.probes.wss:WssProbe", ON_DEMAND),
    "vmscan": ("memtop.probes.vmscan:VmscanProbe", AT_START),
    "swapin": ("memtop.probes.swapin:SwapinProbe", AT_START),
    "swapinfo": ("memtop.probes.swapin:SwapinfoProbe", AT_START),
    "oom": ("memtop.probes.oom:OomProbe", AT_START),
    "kills": ("memtop.probes.kills:KillsProbe", AT_START),
    "leaks": ("memtop.probes.leaks:LeaksProbe", ON_DEMAND),
    "leakrate": ("memtop.probes.leakrate:LeakRateProbe", ON_DEMAND),
    "kernel": ("memtop.probes.kernel:KernelProbe", AT_START),
    "slabtrace": ("memtop.probes.slabtrace:SlabTraceProbe", ON_DEMAND),
    "slabfrees": ("memtop.probes.slabtrace:SlabFreesProbe", ON_DEMAND),
    "slabstacks": ("memtop.probes.slabtrace:SlabStacksProbe", ON_DEMAND),
    "pagealloc": ("memtop.probes.pagealloc:PageAllocProbe", ON_DEMAND),
    "sharedinfo": ("memtop.probes.shared:SharedinfoProbe", AT_START),
    "shared": ("memtop.probes.shared:SharedProbe", AT_START),
    "shmsnoop": ("memtop.probes.shared:ShmSnoopProbe", ON_DEMAND),
    "pagecacheinfo": ("memtop.probes.pagecache:PagecacheinfoProbe", AT_START),
    "pagecache": ("memtop.probes.pagecache:PagecacheProbe", AT_START),
}


def on_demand(name: str) -> bool:
    """Whether probe ``name`` attaches only when an intent asks for it."""
    return PROBES[name][1] == ON_DEMAND


def probe_class(name: str) -> type[Probe]:
    """The class registered as ``name`` (KeyError for a name not registered)."""
    module, _, attr = PROBES[name][0].partition(":")
    cls = getattr(importlib.import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, Probe) and cls.name == name):
        raise TypeError(f"{PROBES[name][0]} is not the probe named {name!r}")
    return cls


def all_probe_classes() -> list[type[Probe]]:
    """Every probe class memtop knows (for doctor), default or on-demand, in registration order."""
    return [probe_class(name) for name in PROBES]


def default_probes(proc_root: str | Path = "/proc", bpf: bool = True) -> list[Probe]:
    """The probes memtop attaches at start, in load order: those that need no BPF first (nothing
    to compile, so the first frame has data), then, unless ``bpf`` is False, the BPF ones."""
    classes = [probe_class(name) for name in PROBES if not on_demand(name)]
    first = [cls.at_start(proc_root) for cls in classes if not cls.needs_bpf]
    return first + ([cls.at_start(proc_root) for cls in classes if cls.needs_bpf] if bpf else [])
