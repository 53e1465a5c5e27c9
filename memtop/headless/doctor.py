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


@dataclass(frozen=True)
class Feature:
    """A feature of the kernel or the machine as doctor tells of it: its line when it is there
    and when it is not. ``present``, ``absent`` and ``hint`` may name ``{values}`` the check
    fills in (a path, a setting read)."""

    name: str
    present: str
    absent: str
    #: what to do, or why it does not matter, when it is not there
    hint: str = ""
    required: bool = True
    needed: bool = True

    def check(self, ok: bool, **values: str) -> Check:
        detail = self.present if ok else self.absent
        hint = "" if ok else self.hint
        return Check(
            self.name, ok, detail.format(**values), hint.format(**values), self.required, self.needed
        )


#: the checks whose sentences do not depend on what was found, by the panes they serve; the
#: one place these are written (a check that says more than present/absent builds its Check)
FEATURES: dict[str, Feature] = {
    f.name: f
    for f in (
        # BPF itself: memtop needs tracepoints, perf events and uprobes, nothing more
        Feature(
            "BTF",
            "/sys/kernel/btf/vmlinux",
            "absent",
            "kernel built without CONFIG_DEBUG_INFO_BTF (not needed by memtop)",
            required=False,
            needed=False,
        ),
        Feature(
            "kprobes",
            "available",
            "unavailable",
            "not needed: memtop uses tracepoints, perf events and uprobes",
            required=False,
            needed=False,
        ),
        Feature(
            "fentry",
            "available",
            "unavailable",
            "not needed: optional enrichment only",
            required=False,
            needed=False,
        ),
        # the leaks pane
        Feature(
            "uprobes",
            "perf uprobe PMU",
            "absent",
            "kernel built without CONFIG_UPROBE_EVENTS: the leaks pane cannot run",
        ),
        Feature(
            "perf events",
            "perf_event_paranoid={paranoid}",
            "absent",
            "kernel built without CONFIG_PERF_EVENTS",
        ),
        Feature(
            "bcc",
            "{version}",
            "not importable",
            "apt-get install python3-bpfcc; use a venv with --system-site-packages",
        ),
        # the swap-in, cgroups and header panes
        Feature(
            "swap",
            "{swaps}",
            "no swap devices",
            "no swap: the swap-in pane will stay empty (mkswap/swapon to test)",
            required=False,
        ),
        Feature(
            "cgroup",
            "{layout}",
            "{layout}",
            "no memory controller mounted: the cgroups pane shows no usage or limits",
            required=False,
        ),
        Feature(
            "PSI",
            "/proc/pressure/memory",
            "unavailable",
            "boot with psi=1 for memory pressure figures",
            required=False,
        ),
        # the Kernel pane
        Feature(
            "slabinfo",
            "{proc}/slabinfo",
            "unreadable",
            "run memtop as root: the Kernel pane lists slab caches from /proc/slabinfo",
            required=False,
        ),
        Feature(
            "slab tracing hook",
            "raw tracepoints (the kernel's BTF describes them)",
            "regular tracepoints",
            "{why}: slab tracing (Kernel pane, t) costs more per event on regular tracepoints",
            required=False,
        ),
        # needed memory (the cgroups pane) and the drill-in's working set
        Feature(
            "working set: referenced bits",
            "/proc/PID/clear_refs and smaps Referenced (the drill-in's w)",
            "/proc/PID/clear_refs and smaps Referenced (the drill-in's w)",
            "kernel without CONFIG_PROC_PAGE_MONITOR",
            required=False,
        ),
        Feature(
            "idle page tracking",
            "/sys/kernel/mm/page_idle",
            "absent",
            "CONFIG_IDLE_PAGE_TRACKING: memtop uses referenced bits instead",
            required=False,
            needed=False,
        ),
        Feature(
            "per-cgroup zswap",
            "cgroup v2 memory.stat zswap, zswapped, zswpin, zswpout, zswpwb",
            "cgroup v1: no per-cgroup zswap figures",
            required=False,
            needed=False,
        ),
    )
}


def info(name: str, ok: bool, detail: str, hint: str = "") -> Check:
    """A check of what memtop can do without: its absence is information, not a warning."""
    return Check(name, ok, detail, hint, required=False, needed=False)


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
    checks.append(FEATURES["BTF"].check(Path("/sys/kernel/btf/vmlinux").exists()))
    checks.append(FEATURES["kprobes"].check(_kprobes_available()))
    checks.append(FEATURES["fentry"].check(_fentry_available()))
    up = Path("/sys/bus/event_source/devices/uprobe").exists()
    checks.append(FEATURES["uprobes"].check(up))
    paranoid = _read("/proc/sys/kernel/perf_event_paranoid").strip()
    pe = Path("/proc/sys/kernel/perf_event_paranoid").exists()
    checks.append(FEATURES["perf events"].check(pe, paranoid=paranoid))
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
    checks.append(FEATURES["bcc"].check(bool(ver), version=ver))
    swaps = _read("/proc/swaps").splitlines()[1:]
    checks.append(FEATURES["swap"].check(bool(swaps), swaps="; ".join(_swap_line(s) for s in swaps)))
    from memtop.linux import cgroupfs

    lay = cgroupfs.layout()
    # mount points are paths from outside
    checks.append(FEATURES["cgroup"].check(lay.memory is not None, layout=clean(lay.describe())))
    checks.append(FEATURES["PSI"].check(bool(_read("/proc/pressure/memory"))))
    checks += kernel_checks()
    checks += needed_checks(lay.memory.version if lay.memory is not None else 0)
    return checks


def damon_state(sys: str = "/sys") -> tuple[int, list[str], set[str]]:
    """(kdamonds, "state ops" of each, operations the kernel offers) from DAMON's sysfs, read only:
    a kdamond memtop did not create is someone else's, and writing ``nr_kdamonds`` would tear
    down every one of them."""
    from memtop.linux.cgroupfs import read_text

    base = os.path.join(sys, "kernel", "mm", "damon", "admin", "kdamonds")
    n = read_text(os.path.join(base, "nr_kdamonds"), 64)
    count = int(n) if n is not None and n.strip().isdigit() else 0
    running: list[str] = []
    avail: set[str] = set()
    for i in range(min(count, 16)):
        ctx = os.path.join(base, str(i), "contexts", "0")
        state = (read_text(os.path.join(base, str(i), "state"), 64) or "?").strip()
        ops = (read_text(os.path.join(ctx, "operations"), 64) or "?").strip()
        avail |= set((read_text(os.path.join(ctx, "avail_operations"), 256) or "").split())
        running.append(clean(f"{state} {ops}", 40))
    return count, running, avail


#: why memtop uses no running kdamond (Documentation/admin-guide/mm/damon/usage.rst): its results
#: show in sysfs only as a scheme's ``tried_regions``, filled when ``update_schemes_tried_regions``
#: is written to the kdamond's ``state`` file (``targets/*/regions`` are the ranges it was given,
#: not what it saw); its ``damon_aggregated`` tracepoint is read-only but names physical address
#: ranges (paddr) or a target's index, never a cgroup
DAMON_NOT_OURS = (
    "a running kdamond is not memtop's; its regions can only be read by writing to its state file, "
    "which memtop never does (its damon_aggregated tracepoint gives address ranges, no cgroup)"
)


def mglru_check(sys: str, debugfs: str | None) -> Check:
    """Whether MGLRU is on (``lru_gen/enabled``), whether debugfs' ``lru_gen`` is readable, and
    so whether a cgroup's needed memory uses its page ages (the cgroups probe reads it then)."""
    from memtop.linux import kernelfs

    text, on = kernelfs.lru_gen_enabled(sys)
    if not text:
        return info(
            "MGLRU",
            False,
            "absent",
            "kernel without CONFIG_LRU_GEN: a cgroup's needed memory is estimated from memory.stat "
            "(anonymous memory counts whole)",
        )
    if not on:
        return info(
            "MGLRU",
            False,
            f"lru_gen {text}: off",
            "echo y > /sys/kernel/mm/lru_gen/enabled to turn it on (and mount debugfs): needed memory "
            "then uses its page ages; until then it is estimated from memory.stat",
        )
    if debugfs is None:
        return info(
            "MGLRU",
            False,
            f"lru_gen {text}: on; debugfs not mounted (memtop never mounts it)",
            "mount -t debugfs none /sys/kernel/debug: a cgroup's needed memory then uses lru_gen's "
            "page ages; until then it is estimated from memory.stat",
        )
    ages, why = kernelfs.read_lru_gen(debugfs)
    if ages is None:
        return info(
            "MGLRU",
            False,
            f"lru_gen {text}: on; {why}",
            "a cgroup's needed memory is estimated from memory.stat",
        )
    return info(
        "MGLRU",
        True,
        f"lru_gen {text}: on; {clean(debugfs)}/lru_gen readable ({len(ages)} memcgs)",
        "a cgroup's needed memory uses its page ages (source lru_gen; read only, every 5 s)",
    )


def needed_checks(memory_version: int, sys: str = "/sys", proc: str = "/proc") -> list[Check]:
    """What the needed-memory figures can use here: page aging (idle page tracking, MGLRU,
    DAMON), the referenced bits a working-set measurement clears, compressed swap (zswap, its
    debugfs counters, zram) and per-cgroup zswap figures (cgroup v2 only)."""
    from memtop.linux import kernelfs
    from memtop.linux.cgroupfs import read_text

    j = os.path.join
    idle = os.path.exists(j(sys, "kernel", "mm", "page_idle", "bitmap"))
    kdamonds, running, avail = damon_state(sys)
    damon_admin = os.path.isdir(j(sys, "kernel", "mm", "damon", "admin"))
    params = kernelfs.read_zswap_params(sys)
    debugfs = kernelfs.debugfs_mount(read_text(j(proc, "self", "mountinfo"), errors="surrogateescape"))
    zram = kernelfs.read_zram(sys)
    return [
        FEATURES["working set: referenced bits"].check(os.path.exists(j(proc, "self", "clear_refs"))),
        FEATURES["idle page tracking"].check(idle),
        mglru_check(sys, debugfs),
        info(
            "DAMON",
            damon_admin and "vaddr" in avail,
            (f"{kdamonds} kdamond(s): {', '.join(running)}; operations {' '.join(sorted(avail)) or '?'}")
            if damon_admin
            else "absent",
            (DAMON_NOT_OURS + "; " if kdamonds else "")
            + "memtop reads no DAMON context it did not create and creates none (a new kdamond means "
            "rewriting nr_kdamonds, which stops the others): referenced bits instead",
        ),
        info(
            "zswap",
            params.get("enabled") in ("Y", "1"),
            (f"{'on' if params.get('enabled') in ('Y', '1') else 'off'}, {params.get('compressor', '?')}")
            + (f"; debugfs counters at {clean(debugfs)}/zswap" if debugfs else "; debugfs not mounted")
            if params
            else "not built",
            ""
            if debugfs or not params
            else "mount -t debugfs none /sys/kernel/debug for zswap's stored pages, written back, rejected",
        ),
        info(
            "zram",
            bool(zram),
            ", ".join(f"{z.name} {z.algorithm}" for z in zram) or "no initialised zram device",
        ),
        FEATURES["per-cgroup zswap"].check(memory_version == 2),
    ]


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
        FEATURES["slabinfo"].check(slab, proc=proc),
        FEATURES["slab tracing hook"].check(not why_not_raw, why=why_not_raw),
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
