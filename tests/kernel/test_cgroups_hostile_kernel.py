"""Cgroups named as an unprivileged user with a delegated cgroup may name them: with bytes that are
not UTF-8 and with terminal escapes (OSC title change, SGR, a bidi override, markup). Real v1
memcgs, a workload charging each: the cgroups probe reads them on every poll without failing,
shows them escaped, and its usage for each is the kernel's ``memory.usage_in_bytes`` (read
around its read), in the pane and in the exporter's ``container_memory_usage_bytes`` (its ``id``
label the escaped path); the Processes pane's cgroup column names the workload's cgroup the same way; a
``memtop --batch`` run and txt/SVG snapshots show them escaped (the SVG parses as XML) and
never write a raw control character."""

from __future__ import annotations

import functools
import os
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from support import between, bracket, compile_c, memtop_cmd

from memtop.export.families import Metric
from memtop.export.metrics import Accumulators, families
from memtop.export.metrics import Options as ExportOptions
from memtop.probes.cgroups import CgroupsProbe
from memtop.probes.procfs import ProcfsProbe
from memtop.records import Batch, ProbeStatus, Record
from memtop.state import State
from memtop.stream.bridge import now_ns
from memtop.views import Options, get_view

MiB = 1 << 20
CG1 = Path("/sys/fs/cgroup/memory")
TAG = f"memtop-hostile-{os.getpid()}"
#: (the directory's name as bytes, the path memtop shows for it)
NAMES = (
    (f"{TAG}-x".encode() + b"\xff\xfe", f"/{TAG}-x\\xff\\xfe"),
    (
        f"{TAG}-\x1b]0;pwned\x07\x1b[31m\u202e[bold red]b".encode(),
        f"/{TAG}-\\x1b]0;pwned\\x07\\x1b[31m\\u202e[bold red]b",
    ),
)
RAW = ("\x1b", "\x07", "\u202e", "\ufffd")


def raw_in(text: str) -> list[str]:
    return [c for c in RAW if c in text]


class Fixed:
    """memtop's families for the library's encoder (its Collector protocol)."""

    def __init__(self, fams: list[Metric]) -> None:
        self.fams = fams

    def collect(self) -> Iterator[Any]:
        yield from self.fams


def joiner(procs: bytes) -> Callable[[], None]:
    """What the child runs before exec: join the memcg, so all it touches is charged there."""

    def join() -> None:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    return join


@contextmanager
def hostile_memcgs() -> Iterator[list[tuple[bytes, subprocess.Popen[str]]]]:
    """The memcgs, each with a workload holding 24 MiB it touched inside; removed afterwards."""
    if not (CG1 / "memory.usage_in_bytes").exists():
        pytest.skip("no v1 memory controller at /sys/fs/cgroup/memory (the machine this suite targets)")
    exe = compile_c("hog")
    made: list[tuple[bytes, subprocess.Popen[str]]] = []
    try:
        for raw, _ in NAMES:
            d = os.fsencode(CG1) + b"/" + raw
            os.mkdir(d)
            with open(d + b"/memory.limit_in_bytes", "w") as f:
                f.write(str(256 * MiB))
            proc = subprocess.Popen(
                [str(exe), "24"], stdout=subprocess.PIPE, text=True, preexec_fn=joiner(d + b"/cgroup.procs")
            )
            made.append((d, proc))
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "step 24"
            assert proc.stdout.readline().strip() == "done"
        yield made
    finally:
        for _d, proc in made:
            proc.kill()
            proc.wait()
        for raw, _ in NAMES:
            d = os.fsencode(CG1) + b"/" + raw
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)  # the killed workload's pages are still being uncharged


def usage_of(d: bytes) -> int:
    with open(d + b"/memory.usage_in_bytes") as f:
        return int(f.read())


@pytest.mark.bpf
def test_hostile_cgroup_names_are_read_and_shown_escaped() -> None:
    with hostile_memcgs() as made:
        cgroups, procfs = CgroupsProbe(), ProcfsProbe()
        cgroups.load()
        procfs.load()
        state = State(mode="procfs")

        def tick() -> None:
            # attached, as the bridge says of probes that poll: the exporter serves only those
            recs: list[Record] = [ProbeStatus("cgroups", "attached"), ProbeStatus("procfs", "attached")]
            recs += [*cgroups.poll(), *procfs.poll()]
            state.apply(Batch(now_ns(), tuple(recs)))

        def scrape() -> dict[tuple[str, str], float]:
            """The exposition as a scraper reads it: (sample, id label) -> value."""
            reg = CollectorRegistry(auto_describe=False)
            reg.register(Fixed(list(families(state, ExportOptions(), Accumulators()))))
            body = generate_latest(reg).decode("utf-8")
            assert not raw_in(body)
            return {
                (s.name, s.labels["id"]): s.value
                for fam in text_string_to_metric_families(body)
                for s in fam.samples
                if "id" in s.labels
            }

        try:
            tick()
            tick()
            doc = get_view("cgroups").document(state, Options(sort="path"))
            rows = {r["path"]: r for r in doc["rows"]}
            for (d, proc), (_, shown) in zip(made, NAMES, strict=True):
                assert shown in rows, sorted(p for p in rows if TAG in p)

                def ours(shown: str = shown) -> int:
                    tick()
                    row = get_view("cgroups").document(state, Options(sort="path"))
                    return int(next(r for r in row["rows"] if r["path"] == shown)["usage_bytes"])

                before, value, after = bracket(functools.partial(usage_of, d), ours)
                assert before >= 24 * MiB
                assert between(value, before, after), (shown, before, value, after)
                procs = get_view("processes").document(state, Options(extra={"group": "cgroup"}))
                mine = next(r for r in procs["rows"] if r["pid"] == proc.pid)
                assert mine["cgroup"] == shown

                # the exporter: cAdvisor's id label is the escaped path, its value the kernel's
                def exported(shown: str = shown) -> int:
                    tick()
                    return int(scrape()[("container_memory_usage_bytes", shown)])

                before, value, after = bracket(functools.partial(usage_of, d), exported)
                assert between(value, before, after), (shown, before, value, after)
            text = get_view("cgroups").text(state, Options(sort="path"))
            assert not raw_in(text)
            # the tree shows a long name's ends (memtop.views.cgroups.tree_label)
            assert "\\xff\\xfe" in text and "[bold red]b" in text
        finally:
            cgroups.close()
            procfs.close()

        # the front ends, as a user runs them: every line escaped, none raw
        batch = subprocess.run(
            memtop_cmd() + ["--batch", "--no-bpf", "--pane", "cgroups", "--count", "2", "--interval", "0.2"],
            capture_output=True,
            timeout=120,
        )
        assert batch.returncode == 0, batch.stderr
        out = batch.stdout.decode("utf-8")  # strict: nothing that is not UTF-8 came out
        assert not raw_in(out)
        assert "\\xff\\xfe" in out and "[bold red]b" in out
        for fmt in ("txt", "svg"):
            snap = Path(f"/tmp/{TAG}.{fmt}")
            try:
                run = subprocess.run(
                    memtop_cmd()
                    + ["snapshot", "--no-bpf", "--pane", "cgroups", "--format", fmt]
                    + ["--output", str(snap), "--after", "0.3"],
                    capture_output=True,
                    timeout=120,
                )
                assert run.returncode == 0, run.stderr
                text = snap.read_bytes().decode("utf-8")
            finally:
                snap.unlink(missing_ok=True)
            assert not raw_in(text)
            if fmt == "svg":
                ET.fromstring(text)  # valid XML: no control character in it
                text = text.replace("&#160;", " ").replace("&amp;", "&")
            assert "\\xff\\xfe" in text and "[bold red]b" in text, fmt
