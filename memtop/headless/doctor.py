"""`memtop doctor`: can each pane run here, and if not, why and what to do."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from memtop.core import fmt
from memtop.core.text import clean
from memtop.linux import bcc_compat, headers, tracefs
from memtop.probes.base import Probe
from memtop.probes.registry import PROBES, all_probe_classes
from memtop.views import panes_of_probes


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    hint: str = ""
    required: bool = True  # a failing required check means some pane cannot run
    #: False: memtop does not use it (kprobes, fentry, BTF: tracepoints, perf events and uprobes
    #: are enough), so its absence is said as information, not as a warning
    needed: bool = True


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _kprobes_available() -> bool:
    if Path("/sys/bus/event_source/devices/kprobe").exists():
        return True
    base = tracefs.root()
    return base is not None and (base / "kprobe_events").exists()


def _fentry_available() -> bool:
    # fentry needs BTF and a trampoline-capable kernel; DYNAMIC_FTRACE_WITH_DIRECT_CALLS shows as
    # "direct" functions support in tracefs
    base = tracefs.root()
    if base is None or not Path("/sys/kernel/btf/vmlinux").exists():
        return False
    return (base / "available_filter_functions").exists() and _kprobes_available()


def run_checks() -> list[Check]:
    checks: list[Check] = []
    priv = bcc_compat.have_privilege()
    checks.append(
        Check(
            "privileges",
            priv,
            "root" if os.geteuid() == 0 else ("CAP_BPF+CAP_PERFMON" if priv else f"uid {os.geteuid()}"),
            "" if priv else "run as root (sudo memtop) or grant CAP_BPF and CAP_PERFMON",
        )
    )
    tr = tracefs.root(mount=priv)
    if tr is not None:
        checks.append(Check("tracefs", True, str(tr)))
    elif not priv:
        checks.append(Check("tracefs", False, "not accessible without root", "run as root (sudo memtop)"))
    else:
        checks.append(
            Check(
                "tracefs",
                False,
                "not mounted and could not be mounted",
                "mount -t tracefs tracefs /sys/kernel/tracing",
            )
        )
    btf = Path("/sys/kernel/btf/vmlinux").exists()
    checks.append(
        Check(
            "BTF",
            btf,
            "/sys/kernel/btf/vmlinux" if btf else "absent",
            "" if btf else "kernel built without CONFIG_DEBUG_INFO_BTF (not needed by memtop)",
            required=False,
            needed=False,
        )
    )
    kp = _kprobes_available()
    checks.append(
        Check(
            "kprobes",
            kp,
            "available" if kp else "unavailable",
            "" if kp else "not needed: memtop uses tracepoints, perf events and uprobes",
            required=False,
            needed=False,
        )
    )
    fe = _fentry_available()
    checks.append(
        Check(
            "fentry",
            fe,
            "available" if fe else "unavailable",
            "" if fe else "not needed: optional enrichment only",
            required=False,
            needed=False,
        )
    )
    up = Path("/sys/bus/event_source/devices/uprobe").exists()
    checks.append(
        Check(
            "uprobes",
            up,
            "perf uprobe PMU" if up else "absent",
            "" if up else "kernel built without CONFIG_UPROBE_EVENTS: the leaks pane cannot run",
        )
    )
    paranoid = _read("/proc/sys/kernel/perf_event_paranoid").strip()
    pe = Path("/proc/sys/kernel/perf_event_paranoid").exists()
    checks.append(
        Check(
            "perf events",
            pe,
            f"perf_event_paranoid={paranoid}" if pe else "absent",
            "" if pe else "kernel built without CONFIG_PERF_EVENTS",
        )
    )
    # one line per tracepoint, naming every probe (and so pane) that needs it; which panes a probe
    # feeds is what the views declare (View.probes)
    classes = all_probe_classes()
    fed = panes_of_probes()
    need: dict[str, list[str]] = {}
    optional: dict[str, list[str]] = {}
    panes_of: dict[str, set[str]] = {}
    for cls in classes:
        for tp in cls.tracepoints:
            need.setdefault(tp, []).append(cls.name)
            panes_of.setdefault(tp, set()).update(fed.get(cls.name, ()))
        for tp in cls.optional_tracepoints:
            optional.setdefault(tp, []).append(cls.name)
    for tp, who in list(need.items()) + [(t, w) for t, w in optional.items() if t not in need]:
        required = tp in need
        label = ", ".join(who) + ("" if required else ", optional")
        if tr is None:
            checks.append(
                Check(
                    f"tracepoint {tp}",
                    False,
                    f"unknown: tracefs not readable ({label})",
                    "run `sudo memtop doctor` to check tracepoints",
                    required,
                )
            )
            continue
        present = tracefs.tracepoint_exists(tp)
        hint = ""
        if not present:
            hint = (
                f"pane(s) {', '.join(sorted(panes_of.get(tp, set())))} cannot run on this kernel"
                if required
                else "optional: a detail of the pane is missing"
            )
        checks.append(
            Check(
                f"tracepoint {tp}",
                present,
                f"{'present' if present else 'missing'} ({label})",
                hint,
                required,
            )
        )
    checks += probe_checks(classes, fed, tr is not None, {"uprobes": up, "perf_events": pe}, priv)
    # look only: doctor creates, repairs and deletes nothing (the tree is built by the first start)
    info = headers.find_headers(build=False)
    checks.append(
        Check(
            "headers",
            info.kind != "missing",
            info.summary
            + (f" at {info.path}" if info.path else "")
            + (f" ({info.note})" if info.note else ""),
            info.hint
            if info.kind == "missing"
            else (
                "stand-in: safe because memtop's programs read only tracepoint fields"
                if info.kind == "standin"
                else ""
            ),
        )
    )
    ver = bcc_compat.bcc_version()
    checks.append(
        Check(
            "bcc",
            bool(ver),
            ver or "not importable",
            "" if ver else "apt-get install python3-bpfcc; use a venv with --system-site-packages",
        )
    )
    swaps = _read("/proc/swaps").splitlines()[1:]
    checks.append(
        Check(
            "swap",
            bool(swaps),
            "; ".join(_swap_line(s) for s in swaps) or "no swap devices",
            "" if swaps else "no swap: the swap-in pane will stay empty (mkswap/swapon to test)",
            required=False,
        )
    )
    from memtop.linux import cgroupfs

    lay = cgroupfs.layout()
    checks.append(
        Check(
            "cgroup",
            lay.memory is not None,
            clean(lay.describe()),  # mount points are paths from outside
            ""
            if lay.memory is not None
            else "no memory controller mounted: the cgroups pane shows no usage or limits",
            required=False,
        )
    )
    psi = bool(_read("/proc/pressure/memory"))
    checks.append(
        Check(
            "PSI",
            psi,
            "/proc/pressure/memory" if psi else "unavailable",
            "" if psi else "boot with psi=1 for memory pressure figures",
            required=False,
        )
    )
    checks += kernel_checks()
    return checks


def kernel_checks(proc: str = "/proc") -> list[Check]:
    """The Kernel pane's files: /proc/slabinfo (root only) and allocation profiling's state
    (not built, never, off, on: memtop.linux.kernelfs.profiling_state)."""
    from memtop.linux import kernelfs
    from memtop.linux.cgroupfs import read_text
    from memtop.probes.slabtrace import raw_config

    slab = read_text(os.path.join(proc, "slabinfo"), 256) is not None
    state, hint = kernelfs.profiling_state(proc)
    _flags, why_not_raw = raw_config()
    return [
        Check(
            "slabinfo",
            slab,
            f"{proc}/slabinfo" if slab else "unreadable",
            "" if slab else "run memtop as root: the Kernel pane lists slab caches from /proc/slabinfo",
            required=False,
        ),
        Check(
            "slab tracing hook",
            not why_not_raw,
            "raw tracepoints (the kernel's BTF describes them)" if not why_not_raw else "regular tracepoints",
            ""
            if not why_not_raw
            else f"{why_not_raw}: slab tracing (Kernel pane, t) costs more per event on regular tracepoints",
            required=False,
        ),
        Check(
            "allocation profiling",
            state == "on",
            state + (f" ({proc}/allocinfo)" if state == "on" else ""),
            hint,
            required=False,
        ),
    ]


def probe_checks(
    classes: list[type[Probe]],
    fed: dict[str, tuple[str, ...]],
    tracefs_readable: bool,
    features: dict[str, bool],
    priv: bool,
) -> list[Check]:
    """A line per probe: the panes it feeds (as the views say) and whether what it needs is here.
    Not required: the line of what it lacks (a tracepoint, uprobes) is the failing one."""
    out = []
    for cls in classes:
        lacks = [f for f in cls.features if not features.get(f, True)]
        if cls.needs_bpf and not priv:
            lacks.insert(0, "privileges")
        if tracefs_readable:
            lacks += [tp for tp in cls.tracepoints if not tracefs.tracepoint_exists(tp)]
        panes = ", ".join(fed.get(cls.name, ())) or "no pane"
        when = PROBES[cls.name][1]
        detail = f"feeds {panes} ({when}{', BPF' if cls.needs_bpf else ', no BPF'})"
        hint = f"lacks {', '.join(lacks)}: see the lines above" if lacks else ""
        out.append(Check(f"probe {cls.name}", not lacks, detail, hint, required=False))
    return out


def _swap_line(line: str) -> str:
    """One /proc/swaps line as people read it: ``/swapfile (file) 4.0G, 225.2M used``."""
    parts = line.split()
    if len(parts) < 4:
        return clean(line, 200)
    try:
        size, used = int(parts[2]) * 1024, int(parts[3]) * 1024  # /proc/swaps counts KiB
    except ValueError:
        return clean(" ".join(parts[:4]), 200)
    return f"{clean(parts[0], 160)} ({clean(parts[1], 20)}) {fmt.bytes_h(size)}, {fmt.bytes_h(used)} used"


def report(as_json: bool = False) -> tuple[str, int]:
    checks = run_checks()
    code = 0 if all(c.ok for c in checks if c.required) else 1
    if as_json:
        doc: dict[str, Any] = {"ok": code == 0, "checks": [asdict(c) for c in checks]}
        return json.dumps(doc, indent=1) + "\n", code
    lines = []
    for c in checks:
        mark = "ok  " if c.ok else ("FAIL" if c.required else "warn" if c.needed else "info")
        lines.append(f"[{mark}] {c.name:<44} {c.detail}")
        if not c.ok and c.hint:
            lines.append(f"       hint: {c.hint}")
        elif c.ok and c.hint:
            lines.append(f"       note: {c.hint}")
    lines.append("")
    lines.append("all panes can run" if code == 0 else "some panes cannot run (see FAIL lines)")
    return "\n".join(lines) + "\n", code
