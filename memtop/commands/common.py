"""What several subcommands share: the live source and the checks made before anything starts."""

from __future__ import annotations

import argparse
import atexit
import os
from typing import TYPE_CHECKING, Any

from memtop.core.errors import MemtopError, PidNotFound

if TYPE_CHECKING:
    from memtop.stream.source import Source
    from memtop.views import View


def make_source(args: argparse.Namespace, defer_bpf: bool = False) -> Source:
    """The live source: the default probes. ``defer_bpf``: BPF compiles once the TUI's first frame
    is on screen (the app calls begin_bpf)."""
    from memtop.probes.registry import default_probes
    from memtop.stream.bridge import Bridge

    probes = default_probes(args.proc_root, bpf=not args.no_bpf)
    cache_paths = tuple(os.path.abspath(d) for d in getattr(args, "cache_path", []))
    # the exporter's --page-cache-listing (absent elsewhere: the Page cache pane lists always)
    listing = getattr(args, "page_cache_listing", True)
    if not listing and not cache_paths:
        probes = [p for p in probes if p.name != "pagecacheinfo"]
    for p in probes:
        if p.name == "kills":
            from memtop.probes.kills import KillsProbe

            if isinstance(p, KillsProbe):
                p.configure(getattr(args, "killer", []), getattr(args, "kill_threshold_mib", 100) << 20)
        elif p.name == "pagecacheinfo":
            from memtop.probes.pagecache import PagecacheinfoProbe

            if isinstance(p, PagecacheinfoProbe):
                p.configure(cache_paths, procs=listing)
    bridge = Bridge(probes, defer_bpf=defer_bpf)
    bridge.leaks_sample_bytes = getattr(args, "sample_bytes", None)
    bridge.leaks_budget = getattr(args, "budget", None) or 0.0
    atexit.register(bridge.close)
    return bridge


def check_pid(pid: int | None, proc_root: str = "/proc") -> None:
    if pid is None:
        return
    if not os.path.exists(os.path.join(proc_root, str(pid), "stat")):
        raise PidNotFound(f"no process with pid {pid}", "pick a running pid (see `ps` or the processes pane)")
    try:
        with open(
            os.path.join(proc_root, str(pid), "status"), encoding="utf-8", errors="surrogateescape"
        ) as f:
            status = f.read()
        if "RssAnon" not in status:
            # a zombie has no memory either: it exited, its parent has not reaped it yet
            if "\nState:\tZ" in status:
                raise PidNotFound(f"pid {pid} has exited (a zombie, not yet reaped)", "pick a running pid")
            raise PidNotFound(f"pid {pid} is a kernel thread (it has no user memory)", "pick a user process")
    except OSError as exc:
        raise PidNotFound(f"pid {pid} vanished", "pick a running pid") from exc


def check_pane(pane: str | None) -> None:
    if pane:
        from memtop.views import get_view

        get_view(pane)


def check_section(view: View[Any], section: str) -> None:
    """``--section`` must name one of the pane's own sections (the view's list, not a copy)."""
    if not section:
        return
    if not view.sections:
        raise MemtopError(f"pane {view.name!r} has no sections", "--section goes with --pane process")
    if section not in view.sections:
        raise MemtopError(
            f"unknown section {section!r} for pane {view.name!r}", "sections: " + ", ".join(view.sections)
        )


def check_at(at: float, duration_s: float) -> None:
    if at > duration_s + 1e-6:
        raise MemtopError(f"--at {at:g} is past the end of the recording ({duration_s:.1f} s)")
