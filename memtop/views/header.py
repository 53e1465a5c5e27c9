"""The header line and the BPF banner, as data: text segments with a style name each, from the
state only (a replay shows the recorded machine's facts, never the viewer's). The TUI draws the
segments (memtop/ui/app.py); ``--batch`` puts :func:`host_text` in its head line.

Style names are Rich style strings ("bold green"); nothing here imports Rich or Textual.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtop.core import fmt
from memtop.records.host import HostFacts
from memtop.records.swapin import SwapInfo
from memtop.state import State
from memtop.state.host import HostState
from memtop.state.swapin import SwapinState
from memtop.views.layout import cell_len
from memtop.views.levels import level
from memtop.views.segments import Segment

#: the style names of levels in the header (Rich style strings, as the other segments'); the UI
#: shows them by weight only under NO_COLOR
LEVEL_STYLES = {"": "", "warn": "yellow", "bad": "bold red"}


@dataclass(frozen=True, slots=True)
class Part:
    """A piece of the narrow header: its segments, and its priority (0 always shown, higher
    left out sooner)."""

    priority: int
    segments: tuple[Segment, ...]

    @property
    def width(self) -> int:
        return sum(cell_len(s.text) for s in self.segments)


@dataclass(frozen=True, slots=True)
class HeaderLine:
    """``lead`` goes first; the UI puts its recording / replay indicator between the two, so it
    is never cut off on a narrow terminal; ``rest`` follows. ``banner`` is empty when BPF can run
    (or has not been tried), else why it cannot and what to do. ``narrow``: what a terminal too
    narrow for ``rest`` shows instead, in short words (``sw 273M/4G psi 24/22``), by priority."""

    lead: tuple[Segment, ...]
    rest: tuple[Segment, ...]
    banner: tuple[Segment, ...]
    narrow: tuple[Part, ...] = ()

    def fit(self, room: int, width: int) -> tuple[tuple[Segment, ...], tuple[Segment, ...]]:
        """What follows the lead and the replay indicator on the first line, which has ``room``
        cells left, and a second line of ``width`` cells (empty when not needed). The whole
        ``rest`` when it fits; else the short parts that fit, by priority; when even swap and
        pressure (priority 0) do not fit after the indicator, they go on a second line: a narrow
        terminal never loses them."""
        if sum(cell_len(s.text) for s in self.rest) <= room:
            return self.rest, ()
        essential = sum(p.width for p in self.narrow if p.priority == 0)
        if essential <= room:
            return _by_priority(self.narrow, room), ()
        return (), _by_priority(self.narrow, width)


def compressed_swap(info: SwapInfo | None, zswapped_bytes: int | None = None) -> int:
    """Bytes of used swap that are held compressed in RAM, not on a disk: what zswap holds plus
    what swap devices on zram use (``zswapped_bytes`` from a fresher meminfo when given). Here,
    not in the swap-in view, so the header does not import that view into every TUI."""
    if info is None:
        return zswapped_bytes or 0
    zram = sum(d[3] for d in info.devices if d[0].startswith("/dev/zram"))
    return (info.zswapped_bytes if zswapped_bytes is None else zswapped_bytes) + zram


def _by_priority(parts: tuple[Part, ...], room: int) -> tuple[Segment, ...]:
    """The parts that fit ``room`` cells, the lowest priority left out first, in their order."""
    kept = list(parts)
    while kept and sum(p.width for p in kept) > room:
        kept.remove(max(reversed(kept), key=lambda p: p.priority))
    return tuple(s for p in kept for s in p.segments)


def bytes_short(n: int) -> str:
    """A size in at most four characters for the narrow header: ``273M``, ``4G``, ``1.5G``."""
    out = fmt.bytes_h(n)
    number, unit = out[:-1], out[-1]
    try:
        value = float(number)
    except ValueError:
        return out
    if value >= 10 or value == int(value):
        return f"{value:.0f}{unit}"
    return f"{value:.1f}{unit}"


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
        swap = f"Swap {fmt.bytes_h(m.swap_total_bytes - m.swap_free_bytes)}/{fmt.bytes_h(m.swap_total_bytes)}"
        in_ram = compressed_swap(state.get(SwapinState).swapinfo, m.zswapped_bytes)
        parts.append(swap + (f" ({fmt.bytes_h(in_ram)} compressed)" if in_ram else ""))
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
        # zswap's pages hold swap slots but sit in RAM (zram's too): said apart, so the figure
        # is not read as what went to disk
        in_ram = compressed_swap(state.get(SwapinState).swapinfo, m.zswapped_bytes)
        if in_ram:
            rest.append(Segment(f" ({fmt.bytes_h(in_ram)} compressed)", "cyan"))
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
    return HeaderLine(tuple(lead), tuple(rest), banner(host.facts), narrow_parts(state, interval_s))


def narrow_parts(state: State, interval_s: float) -> tuple[Part, ...]:
    """The header in short words, for a terminal too narrow for the whole line: swap used and
    memory pressure always (what a user reads the header for), then memory, the probes, the
    host and the interval as room allows."""
    host = state.get(HostState)
    parts: list[Part] = []
    where = host.facts.hostname if host.facts is not None else ""
    if where and state.mode == "replay":  # whose figures these are
        parts.append(Part(3, (Segment(f" {where}", "cyan"),)))
    m = host.meminfo
    if m is not None:
        parts.append(Part(2, (Segment(f"  mem {bytes_short(m.used_bytes)}/{bytes_short(m.total_bytes)}"),)))
        swap_used = m.swap_total_bytes - m.swap_free_bytes
        parts.append(Part(0, (Segment(f"  sw {bytes_short(swap_used)}/{bytes_short(m.swap_total_bytes)}"),)))
    p = host.pressure
    if p is not None:
        some, full = level("psi_some_avg10", p.some_avg10), level("psi_full_avg10", p.full_avg10)
        parts.append(
            Part(
                0,
                (
                    Segment("  psi "),
                    Segment(f"{p.some_avg10:.0f}", LEVEL_STYLES[some]),
                    Segment("/"),
                    Segment(f"{p.full_avg10:.0f}", LEVEL_STYLES[full]),
                ),
            )
        )
    n = probe_count(state)
    probes = [Segment(f"  probes {n.attached}/{n.total}")]
    if n.loading:
        probes.append(Segment(f" ({n.loading}…)", "yellow"))
    if n.failed:
        probes.append(Segment(f" {len(n.failed)} failed", "red"))
    if n.erroring:
        probes.append(Segment(f" {len(n.erroring)} erroring", "bold red"))
    parts.append(Part(1, tuple(probes)))
    parts.append(Part(4, (Segment(f"  every {interval_s:g}s", "dim"),)))
    if where and state.mode != "replay":
        parts.append(Part(5, (Segment(f"  {where}", "dim"),)))
    return tuple(parts)
