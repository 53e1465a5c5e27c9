"""The swap-in pane: who waits on swap and for how long, the wait histogram, and the swap system
line (pswpin/pswpout rates, swap devices, zswap, PSI)."""

from __future__ import annotations

from typing import ClassVar, Literal, TypedDict, get_args

from memtop.core import fmt
from memtop.linux import cgroupfs
from memtop.records.swapin import SwapInfo
from memtop.state import State
from memtop.state.base import log2_le
from memtop.state.cgroups import CgroupsState
from memtop.state.host import HostState
from memtop.state.processes import ProcessesState
from memtop.state.swapin import SwapinState
from memtop.views import Column, Head, Options, View, measuring, render_table
from memtop.views.header import compressed_swap
from memtop.views.segments import Sentence

#: the table's columns
RowKey = Literal[
    "pid",
    "command",
    "comm",
    "swapins",
    "swapins_per_s",
    "wait_ns_total",
    "wait_ns_avg",
    "wait_ns_max",
    "file_major_faults",
    "cgroup",
]


class SwapinRow(TypedDict):
    """A process that waited on swap-ins or file major faults (``rows[]``)."""

    pid: int
    comm: str
    exited: bool
    command: str
    swapins: int
    wait_ns_total: int
    wait_ns_max: int
    file_major_faults: int
    swapins_per_s: float
    wait_ns_avg: int
    swapins_nowait: int
    file_wait_ns_total: int
    file_wait_ns_max: int
    cgroup: str | None


class Bucket(TypedDict):
    le_ns: int
    count: int


class SwapDevice(TypedDict):
    name: str
    type: str
    size_bytes: int
    used_bytes: int
    priority: int


class Zswap(TypedDict):
    """zswap's parameters and pool, and debugfs' counters where mounted (``system.zswap``)."""

    enabled: bool
    compressor: str | None
    zpool: str | None
    max_pool_percent: int | None
    shrinker_enabled: bool | None
    pool_bytes: int
    stored_bytes: int
    ratio: float | None
    debugfs: str | None
    stored_pages: int | None
    pool_total_size_bytes: int | None
    written_back_pages: int | None
    pool_limit_hit: int | None
    rejected: dict[str, int] | None
    zswpin_per_s: float
    zswpout_per_s: float
    zswpwb_per_s: float


class Zram(TypedDict):
    """A zram device's mm_stat, io_stat and bd_stat (``system.zram[]``)."""

    name: str
    algorithm: str | None
    disksize_bytes: int
    orig_data_bytes: int | None
    compr_data_bytes: int | None
    mem_used_bytes: int | None
    mem_limit_bytes: int | None
    mem_used_max_bytes: int | None
    ratio: float | None
    same_pages: int | None
    huge_pages: int | None
    pages_compacted: int | None
    failed_reads: int | None
    failed_writes: int | None
    bd_count_pages: int | None
    bd_reads_pages: int | None
    bd_writes_pages: int | None


class Psi(TypedDict):
    some_avg10: float
    full_avg10: float
    some_avg60: float
    full_avg60: float


class SystemLine(TypedDict):
    """The swap system line (``system``): swapping rates, devices, zswap, pressure."""

    pswpin_per_s: float
    pswpout_per_s: float
    pswpin_since_start: int
    pswpout_since_start: int
    swap_used_bytes: int | None
    swap_compressed_bytes: int | None
    swap_on_disk_bytes: int | None
    swap_devices: list[SwapDevice] | None
    zswap: Zswap | None
    zram: list[Zram] | None
    psi: Psi | None


class SwapinDoc(Head):
    """The Swap-in waiters pane's document (docs/panes/swapin.md)."""

    rows: list[SwapinRow]
    histogram: list[Bucket]
    file_histogram: list[Bucket]
    system: SystemLine


#: what the table sorts by
SortKey = Literal[
    "pid",
    "comm",
    "swapins",
    "swapins_per_s",
    "wait_ns_total",
    "wait_ns_avg",
    "wait_ns_max",
    "file_major_faults",
]
SORT_KEYS: tuple[SortKey, ...] = get_args(SortKey)


def histogram(counts: tuple[int, ...]) -> list[Bucket]:
    """``[{"le_ns", "count"}]`` from bucket 0 up to the highest non-empty bucket."""
    top = max((i for i, c in enumerate(counts) if c), default=-1)
    return [{"le_ns": log2_le(i), "count": int(counts[i])} for i in range(top + 1)]


def dense(pairs: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """(bucket, count) pairs as a dense tuple of counts."""
    out = [0] * (max((b for b, _ in pairs), default=-1) + 1)
    for b, c in pairs:
        out[b] += c
    return tuple(out)


def bar(count: int, most: int, width: int = 40) -> str:
    return "█" * (round(count * width / most) if most else 0)


def hist_lines(hist: list[Bucket]) -> list[tuple[str, int]]:
    """(label, count) per bucket to show: bucket 0 as "no wait" (faults that never blocked),
    then from the first non-empty bucket on (empty leading buckets say nothing)."""
    out: list[tuple[str, int]] = []
    if hist and hist[0]["count"]:
        out.append(("no wait", hist[0]["count"]))
    first = next((i for i, h in enumerate(hist) if i and h["count"]), len(hist))
    for i in range(first, len(hist)):
        lo = hist[i - 1]["le_ns"] + 1
        out.append((f"{fmt.ns_h(lo)}-{fmt.ns_h(hist[i]['le_ns'])}", hist[i]["count"]))
    return out


class SwapinView(View[SwapinDoc]):
    name = "swapin"
    title = "Swap-in waiters"
    tab_title = "Swap"  # nine tabs fit 80 columns unshortened (the pane is titled "Swap-in waiters")
    order = 40
    probes = ("swapin", "swapinfo")
    legend = (
        ("†", "after a name: the process has exited; its row keeps the figures it ended with"),
        (
            "N swap-ins waited T",
            "totals since memtop started of every process listed, and their "
            "file major faults (the same wait, on the page cache)",
        ),
    )
    vmstat_fallback = ("swapin", (("pswpin", "swap-ins", "rate"), ("pgmajfault", "major faults", "rate")))
    columns: ClassVar[tuple[Column[RowKey], ...]] = (
        Column("pid", "PID"),
        Column("command", "COMMAND", numeric=False, min_width=8),
        Column("swapins", "SWAPINS", fmt.count_h),
        Column("swapins_per_s", "SWAPIN/s", fmt.count_h, priority=1),
        Column("wait_ns_total", "WAITED", fmt.ns_h),
        Column("wait_ns_avg", "AVG WAIT", fmt.ns_h, priority=1),
        Column("wait_ns_max", "MAX WAIT", fmt.ns_h, priority=1),
        Column("file_major_faults", "FILE MAJFLT", fmt.count_h, priority=3),
        Column("cgroup", "CGROUP", cgroupfs.short_path, numeric=False, priority=3, min_width=10),
    )

    def document(self, state: State, opts: Options) -> SwapinDoc:
        st = state.get(SwapinState)
        running = state.get(ProcessesState).rows
        rows: list[SwapinRow] = []
        memcg = state.get(CgroupsState).pid_memcg
        for pid, r in st.rows.items():
            rec = r.rec
            if opts.pid is not None and pid != opts.pid:
                continue
            if opts.pid is None and not rec.swapins and not rec.file_major_faults:
                continue  # nothing to show (a dead sub-second process): not a row of waiters
            exited = bool(running) and pid not in running
            row: SwapinRow = {
                "pid": pid,
                "comm": rec.comm,
                "exited": exited,
                "command": rec.comm + (" †" if exited else ""),  # short: the columns stay put
                "swapins": rec.swapins,
                "wait_ns_total": rec.swapin_wait_ns,
                "wait_ns_max": rec.swapin_wait_max_ns,
                "file_major_faults": rec.file_major_faults,
                "swapins_per_s": round(r.swapins_per_s, 3),
                "wait_ns_avg": rec.swapin_wait_ns // rec.swapins if rec.swapins else 0,
                "swapins_nowait": rec.swapins_nowait,
                "file_wait_ns_total": rec.file_wait_ns,
                "file_wait_ns_max": rec.file_wait_max_ns,
                "cgroup": memcg.get(pid),
            }
            if opts.filter and opts.filter.lower() not in rec.comm.lower() and opts.filter != str(pid):
                continue
            rows.append(row)
        key: SortKey = next((k for k in SORT_KEYS if k == opts.sort), "wait_ns_total")
        rows.sort(key=lambda row: (row[key], row["pid"]), reverse=opts.reverse)
        hist = st.hist
        swap_counts: tuple[int, ...] = hist.swapin_counts if hist else ()
        file_counts: tuple[int, ...] = hist.file_counts if hist else ()
        if opts.pid is not None:  # one process: its own histograms
            row_rec = st.rows[opts.pid].rec if opts.pid in st.rows else None
            swap_counts = dense(row_rec.swapin_hist if row_rec else ())
            file_counts = dense(row_rec.file_hist if row_rec else ())
        measured = measuring(state, "swapin") or bool(st.rows)  # no wait seen is not "no wait"
        head = self.head(state)
        return {
            "pane": head["pane"],
            "source": head["source"],
            "taken_at_ns": head["taken_at_ns"],
            "taken_at": head["taken_at"],
            "probes": head["probes"],
            "rows": rows if measured else [],
            "histogram": histogram(swap_counts) if measured else [],
            "file_histogram": histogram(file_counts) if measured else [],
            "system": system_line(state),
        }

    def text_extra(self, doc: SwapinDoc) -> str:
        out = ["", "Swap-in wait (log2 ns)"]
        lines = hist_lines(doc["histogram"])
        most = max((c for _, c in lines), default=0)
        for label, count in lines:
            out.append(f"{label:>19} {count:>9}  {bar(count, most)}")
        out.append("")
        out.extend(system_text(doc["system"]))
        return "\n".join(out) + "\n"


def zswap_doc(info: SwapInfo, host: HostState) -> Zswap:
    params = dict(info.zswap_params)
    debug = dict(info.zswap_debug)
    pool = info.zswap_pool_bytes
    has_debug = bool(debug)

    def counter(name: str) -> int | None:
        return debug.get(name) if has_debug else None

    return {
        "enabled": info.zswap_enabled,
        "compressor": params.get("compressor"),
        "zpool": params.get("zpool"),
        "max_pool_percent": int(params["max_pool_percent"])
        if params.get("max_pool_percent", "").isdigit()
        else None,
        "shrinker_enabled": params["shrinker_enabled"] in ("Y", "1")
        if "shrinker_enabled" in params
        else None,
        "pool_bytes": pool,
        "stored_bytes": info.zswapped_bytes,
        "ratio": round(info.zswapped_bytes / pool, 3) if pool else None,
        "debugfs": info.debugfs or None,
        "stored_pages": counter("stored_pages"),
        "pool_total_size_bytes": counter("pool_total_size"),
        "written_back_pages": counter("written_back_pages"),
        "pool_limit_hit": counter("pool_limit_hit"),
        "rejected": {k: v for k, v in debug.items() if k.startswith("reject_")} if has_debug else None,
        "zswpin_per_s": round(host.vmstat_rate("zswpin"), 3),
        "zswpout_per_s": round(host.vmstat_rate("zswpout"), 3),
        "zswpwb_per_s": round(host.vmstat_rate("zswpwb"), 3),
    }


def zram_doc(dev: tuple[str, str, int, tuple[tuple[str, int], ...]]) -> Zram:
    name, algorithm, disksize, pairs = dev
    st = dict(pairs)
    orig, compr = st.get("orig_data_size"), st.get("compr_data_size")
    return {
        "name": name,
        "algorithm": algorithm or None,
        "disksize_bytes": disksize,
        "orig_data_bytes": orig,
        "compr_data_bytes": compr,
        "mem_used_bytes": st.get("mem_used_total"),
        "mem_limit_bytes": st.get("mem_limit") or None,
        "mem_used_max_bytes": st.get("mem_used_max"),
        "ratio": round(orig / compr, 3) if orig and compr else None,
        "same_pages": st.get("same_pages"),
        "huge_pages": st.get("huge_pages"),
        "pages_compacted": st.get("pages_compacted"),
        "failed_reads": st.get("failed_reads"),
        "failed_writes": st.get("failed_writes"),
        "bd_count_pages": st.get("bd_count"),
        "bd_reads_pages": st.get("bd_reads"),
        "bd_writes_pages": st.get("bd_writes"),
    }


def system_line(state: State) -> SystemLine:
    sys_state = state.get(HostState)
    info = state.get(SwapinState).swapinfo
    p = sys_state.pressure
    zswap: Zswap | None = None
    if info is not None and (info.zswap_enabled or info.zswapped_bytes):
        zswap = zswap_doc(info, sys_state)
    m = sys_state.meminfo
    used = m.swap_total_bytes - m.swap_free_bytes if m is not None else None
    in_ram = compressed_swap(info, m.zswapped_bytes if m is not None else None) if info is not None else None
    return {
        "pswpin_per_s": round(sys_state.vmstat_rate("pswpin"), 3),
        "pswpout_per_s": round(sys_state.vmstat_rate("pswpout"), 3),
        "pswpin_since_start": sys_state.vmstat_since_start("pswpin"),
        "pswpout_since_start": sys_state.vmstat_since_start("pswpout"),
        "swap_used_bytes": used,
        "swap_compressed_bytes": in_ram,
        "swap_on_disk_bytes": None if used is None or in_ram is None else max(0, used - in_ram),
        "swap_devices": [
            {"name": d[0], "type": d[1], "size_bytes": d[2], "used_bytes": d[3], "priority": d[4]}
            for d in (info.devices if info else ())
        ]
        if info is not None or measuring(state, "swapinfo")
        else None,
        "zswap": zswap,
        "zram": [zram_doc(d) for d in info.zram] if info is not None else None,
        "psi": None
        if p is None
        else {
            "some_avg10": p.some_avg10,
            "full_avg10": p.full_avg10,
            "some_avg60": p.some_avg60,
            "full_avg60": p.full_avg60,
        },
    }


def zswap_text(z: Zswap) -> str:
    """One line of zswap: what it holds in how much, the ratio, its traffic and, from debugfs,
    what it wrote back to disk and refused."""
    ratio = f" ratio {z['ratio']:.1f}" if z["ratio"] else ""
    line = (
        f"zswap {'on' if z['enabled'] else 'off'} {z['compressor'] or ''}: {fmt.bytes_h(z['stored_bytes'])} stored in "
        f"{fmt.bytes_h(z['pool_bytes'])}{ratio}  in {fmt.count_h(z['zswpin_per_s'])}/s out {fmt.count_h(z['zswpout_per_s'])}/s"
    )
    if z["written_back_pages"] is not None:
        rejected = sum((z["rejected"] or {}).values())
        line += (
            f"  written back {fmt.count_h(z['written_back_pages'])} rejected {fmt.count_h(rejected)} pages"
        )
    else:
        line += "  (written back, rejected: mount debugfs)"
    return line


def system_text(sysline: SystemLine) -> list[str]:
    """The system line as plain text lines (text snapshot and the pane's header)."""
    lines = [
        f"pswpin {fmt.count_h(sysline['pswpin_per_s'])}/s  pswpout {fmt.count_h(sysline['pswpout_per_s'])}/s"
        f"  (since start: in {fmt.count_h(sysline['pswpin_since_start'])}"
        f" out {fmt.count_h(sysline['pswpout_since_start'])} pages)"
    ]
    psi = sysline.get("psi")
    if psi:
        lines[0] += f"  PSI memory some {psi['some_avg10']:.2f} full {psi['full_avg10']:.2f} (avg10)"
    z = sysline.get("zswap")
    if z:
        lines.append(zswap_text(z))
    for zr in sysline.get("zram") or ():
        ratio = f" ratio {zr['ratio']:.1f}" if zr["ratio"] else ""
        lines.append(
            f"{zr['name']} {zr['algorithm'] or '?'}: {fmt.bytes_h(zr['orig_data_bytes'] or 0)} stored in "
            f"{fmt.bytes_h(zr['mem_used_bytes'] or 0)}{ratio}  same-filled {fmt.count_h(zr['same_pages'] or 0)} pages"
            f"  written back {fmt.count_h(zr['bd_writes_pages'] or 0)} pages"
        )
    if sysline.get("swap_compressed_bytes"):
        lines.append(
            f"swap used {fmt.bytes_h(sysline['swap_used_bytes'] or 0)}: "
            f"{fmt.bytes_h(sysline['swap_compressed_bytes'])} compressed in RAM, "
            f"{fmt.bytes_h(sysline['swap_on_disk_bytes'] or 0)} on disk (pswpin/pswpout count disk only)"
        )
    devs = sysline.get("swap_devices")
    if devs is None:
        lines.append("swap devices not read (swapinfo not running)")
        devs = []
    elif not devs:
        lines.append("no swap device")
    for d in devs:
        used = d["used_bytes"] / d["size_bytes"] * 100 if d["size_bytes"] else 0.0
        lines.append(
            f"{d['name']}  {d['type']}  {fmt.bytes_h(d['used_bytes'])} / {fmt.bytes_h(d['size_bytes'])}"
            f" ({used:.1f}%)  prio {d['priority']}"
        )
    return lines


# -- the pane's sentences (the TUI lays them out: memtop/ui/panes/swapin.py) ----------------------
def summary(doc: SwapinDoc, state: State, opts: Options) -> Sentence:
    """What the status line says after the probes: processes, swap-ins and their wait, file
    major faults (once the probe measures or has rows), the sort."""
    t = Sentence()
    st = state.get(SwapinState)
    swapins, files, waited = st.totals()
    label = next((c.label for c in SwapinView.columns if c.key == opts.sort), opts.sort)
    if measuring(state, "swapin") or st.rows:
        t.add(
            f"   {fmt.plural(len(doc['rows']), 'process', 'processes')} · {fmt.count_h(swapins)} swap-ins"
            f" waited {fmt.ns_h(waited)} · {fmt.count_h(files)} file major faults"
        )
    t.add(f" · sort {label} {'↓' if opts.reverse else '↑'}")
    return t


def hist_title(doc: SwapinDoc) -> Sentence:
    """The wait histogram's title line, a line break before the histogram when there is one."""
    t = Sentence()
    t.add("Swap-in wait per fault", style="bold")
    if doc["histogram"]:
        t.add("\n")
    else:
        t.add("  no swap-in yet", style="dim")
    return t


__all__ = [
    "SwapinView",
    "render_table",
    "histogram",
    "hist_lines",
    "system_line",
    "system_text",
    "compressed_swap",
    "SORT_KEYS",
]
