"""The header line and the BPF banner, as data: text segments with a style name each, from the
state only (a replay shows the recorded machine's facts, never the viewer's). The TUI draws the
segments (memtop/ui/app.py); ``--batch`` puts :func:`host_text` in its head line.

Style names are Rich style strings ("bold green"); nothing here imports Rich or Textual.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtop.core import fmt
from memtop.records.host import HostFacts
from memtop.state import State
from memtop.state.host import HostState
from memtop.views.levels import level

#: the style names of levels in the header (Rich style strings, as the other segments'); the UI
#: shows them by weight only under NO_COLOR
LEVEL_STYLES = {"": "", "warn": "yellow", "bad": "bold red"}


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    style: str = ""


@dataclass(frozen=True, slots=True)
class HeaderLine:
    """``lead`` goes first; the UI puts its recording / replay indicator between the two, so it
    is never cut off on a narrow terminal; ``rest`` follows. ``banner`` is empty when BPF can run
    (or has not been tried), else why it cannot and what to do."""

    lead: tuple[Segment, ...]
    rest: tuple[Segment, ...]
    banner: tuple[Segment, ...]


@dataclass(frozen=True, slots=True)
class ProbeCount:
    attached: int
    total: int  # the probes that should run now: a probe detached on purpose is not one of them
    loading: int
    failed: tuple[str, ...]
    #: attached, but their polls fail (retried): what they fed is not current
    erroring: tuple[str, ...] = ()


def probe_count(state: State) -> ProbeCount:
    """How many of the probes meant to run now are attached (a drill-in left behind detached
    probes: they are not missing)."""
    sts = [st for st in state.statuses.values() if st.state != "detached"]
    return ProbeCount(
        attached=sum(1 for s in sts if s.state == "attached"),
        total=len(sts),
        loading=sum(1 for s in sts if s.state in ("pending", "attaching")),
        failed=tuple(s.probe for s in sts if s.state == "failed"),
        erroring=tuple(s.probe for s in sts if s.state == "erroring"),
    )


def host_text(facts: HostFacts | None) -> str:
    """``host NAME (KERNEL)``, or "" before the facts are known."""
    if facts is None:
        return ""
    return f"host {facts.hostname or '?'} ({facts.kernel_release or '?'})"


def headers_text(facts: HostFacts | None) -> str:
    """What the header line says of the kernel headers: only a stand-in is worth a mention."""
    if facts is None or facts.headers_kind != "standin":
        return ""
    return f"headers: stand-in {facts.headers_version}"


def banner(facts: HostFacts | None) -> tuple[Segment, ...]:
    if facts is None or not facts.bpf_error:
        return ()
    out = [Segment(f" BPF unavailable: {facts.bpf_error}. Showing the /proc view. ", "bold")]
    if facts.bpf_hint:
        out.append(Segment(f"Fix: {facts.bpf_hint}", "bold"))
    return tuple(out)


def summary_line(state: State) -> str:
    """``top -b``'s summary, for text snapshots and --batch: memory, swap, memory pressure (empty
    before /proc was read)."""
    host = state.get(HostState)
    parts = []
    m = host.meminfo
    if m is not None:
        parts.append(
            f"Mem {fmt.bytes_h(m.total_bytes)} used {fmt.bytes_h(m.used_bytes)} free {fmt.bytes_h(m.free_bytes)}"
            f" avail {fmt.bytes_h(m.available_bytes)} cached {fmt.bytes_h(m.cached_bytes)}"
        )
        parts.append(
            f"Swap {fmt.bytes_h(m.swap_total_bytes - m.swap_free_bytes)}/{fmt.bytes_h(m.swap_total_bytes)}"
        )
    p = host.pressure
    if p is not None:
        parts.append(f"PSI some {p.some_avg10:.2f} full {p.full_avg10:.2f}")
    return "  ".join(parts)


def header_line(state: State, *, paused: bool = False, interval_s: float = 1.0) -> HeaderLine:
    host = state.get(HostState)
    mode = state.mode
    lead = [
        Segment(" memtop ", "bold reverse"),
        Segment(f" {mode} ", "bold green" if mode == "bpf" else "bold yellow"),
    ]
    if paused:
        lead.append(Segment(" PAUSED ", "bold reverse yellow"))
    rest: list[Segment] = []
    where = host_text(host.facts)
    if where and mode == "replay":  # whose figures these are: next to the replay's position
        rest.append(Segment(f" {where}", "cyan"))
    m = host.meminfo
    if m is not None:
        rest.append(
            Segment(
                f"  Mem {fmt.bytes_h(m.total_bytes)} used {fmt.bytes_h(m.used_bytes)} "
                f"free {fmt.bytes_h(m.free_bytes)} avail {fmt.bytes_h(m.available_bytes)} "
                f"cached {fmt.bytes_h(m.cached_bytes)}"
            )
        )
        swap_used = m.swap_total_bytes - m.swap_free_bytes
        rest.append(Segment(f"  Swap {fmt.bytes_h(swap_used)}/{fmt.bytes_h(m.swap_total_bytes)}"))
    p = host.pressure
    if p is not None:
        # coloured past the thresholds users read as pressure (memtop/views/levels.py)
        some, full = level("psi_some_avg10", p.some_avg10), level("psi_full_avg10", p.full_avg10)
        rest.append(Segment("  PSI some "))
        rest.append(Segment(f"{p.some_avg10:.2f}", LEVEL_STYLES[some]))
        rest.append(Segment(" full "))
        rest.append(Segment(f"{p.full_avg10:.2f}", LEVEL_STYLES[full]))
    n = probe_count(state)
    rest.append(Segment(f"  probes {n.attached}/{n.total}"))
    if n.loading:
        rest.append(Segment(f" (attaching {n.loading}…)", "yellow"))
    if n.failed:
        rest.append(Segment(f" {len(n.failed)} failed", "red"))
    if n.erroring:
        rest.append(Segment(f" {len(n.erroring)} erroring", "bold red"))
    # stand-in kernel headers are said in the help and by doctor: in the header they crowded
    # out what a user reads it for (memory, swap, pressure)
    rest.append(Segment(f"  every {interval_s:g}s", "dim"))
    # live it is this machine: last, where a narrow terminal cuts first
    if where and mode != "replay":
        rest.append(Segment(f"  {where}", "dim"))
    return HeaderLine(tuple(lead), tuple(rest), banner(host.facts))
