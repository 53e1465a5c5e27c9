"""Nothing in the working directory is compiled into the kernel. BCC puts the process's working
directory first on clang's include path; memtop started in a directory another user can write
(/tmp) must not read a header from it. Every header name memtop's programs can reach is planted
there holding ``#error planted``: a probe that attaches read none of them."""

from __future__ import annotations

import gzip
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import compile_c, memtop_cmd

from memtop.linux import headers
from memtop.probes.base import BpfProbe
from memtop.probes.registry import all_probe_classes, on_demand
from memtop.runtime import resources

pytestmark = pytest.mark.bpf

PLANTED = "#error planted\n"
#: the BPF probes memtop attaches at start (memtop/probes/registry.py)
DEFAULT_BPF = {c.name for c in all_probe_classes() if issubclass(c, BpfProbe) and not on_demand(c.name)}
ON_DEMAND = {"faultstack", "growth", "leaks"}
#: BCC's own virtual headers (it -includes helpers.h, which includes the kernel's)
BCC_VIRTUAL = ["bcc/helpers.h", "bcc/proto.h", "bcc/bpf.h", "bcc/bpf_workaround.h"]


def header_names() -> set[str]:
    """Every name an #include of memtop's programs, of BCC's helpers or of the kernel headers
    they pull in can be looked up by: each header of the tree BCC compiles against, relative to
    each of the tree's include directories; memtop's own quoted and angle includes; the kconfig
    header BCC -includes by a relative path."""
    names = set(BCC_VIRTUAL) | {"include/linux/kconfig.h"}
    for src in resources.bpf_dir().iterdir():
        names |= set(re.findall(r'^\s*#\s*include\s*["<]([^">]+)[">]', src.read_text(), re.M))
    info = headers.find_headers()
    if info.kind == "missing":
        pytest.fail(f"no kernel headers: {info.hint}")
    tree = Path(info.path)
    arch = {"x86_64": "x86", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    roots = ["include", "include/uapi", "include/generated", "include/generated/uapi"]
    roots += [f"arch/{arch}/{r}" for r in roots if not r.endswith("generated")]
    roots += [f"arch/{arch}/include/generated", f"arch/{arch}/include/generated/uapi"]
    for root in roots:
        for dirpath, _dirs, files in os.walk(tree / root):
            for f in files:
                if f.endswith(".h"):
                    names.add(os.path.relpath(os.path.join(dirpath, f), tree / root))
    return names


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory like /tmp (mode 1777) holding a planted file under every header name."""
    cwd = tmp_path_factory.mktemp("cwd")
    cwd.chmod(0o1777)
    names = header_names()
    assert "perf_ctx.h" in names and "uapi/linux/ptrace.h" in names and "linux/types.h" in names
    for rel in sorted(names):
        path = cwd / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(PLANTED)
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            pass  # a name that is a file under one root and a directory under another
    return cwd


@pytest.fixture
def target() -> Iterator[int]:
    """A dynamically linked process for the on-demand probes (memleak needs its libc)."""
    proc = subprocess.Popen([str(compile_c("named")), "memtop-cwd-target"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


LOAD_ALL = """
import json, sys
from memtop.probes.base import BpfProbe, load_together
from memtop.probes.faultstack import FaultStackProbe
from memtop.probes.growth import GrowthProbe
from memtop.probes.leaks import LeaksProbe
from memtop.probes.registry import default_probes

pid = int(sys.argv[1])
out = {}
probes = [p for p in default_probes() if isinstance(p, BpfProbe)]
for p, exc in load_together(probes):
    out[p.name] = None if exc is None else str(exc)
for p in (FaultStackProbe(pid), GrowthProbe(pid), LeaksProbe([pid])):
    probes.append(p)
    try:
        p.load()
        out[p.name] = None
    except Exception as exc:
        out[p.name] = str(exc)
for p in probes:
    p.close()
print(json.dumps(out))
"""


def test_probes_started_in_a_planted_directory_compile_only_memtop_s_headers(
    planted: Path, target: int
) -> None:
    # -P: Python itself must not import from the planted directory either
    proc = subprocess.run(
        [sys.executable, "-P", "-c", LOAD_ALL, str(target)],
        cwd=planted,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcomes = json.loads(proc.stdout.splitlines()[-1])
    assert outcomes == {name: None for name in DEFAULT_BPF | ON_DEMAND}, proc.stderr[-3000:]
    assert "planted" not in proc.stderr


def test_record_started_in_a_planted_directory_attaches_every_probe(planted: Path, tmp_path: Path) -> None:
    """The user's view: `memtop record` run from /tmp with a planted perf_ctx.h and the rest."""
    out = tmp_path / "rec.jsonl.gz"
    proc = subprocess.run(
        memtop_cmd() + ["record", "--output", str(out), "--duration", "1", "--quiet"],
        cwd=planted,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with gzip.open(out, "rt") as f:
        probes = json.loads(f.readline())["probes"]
    assert DEFAULT_BPF <= set(probes["attached"]), probes
    assert "planted" not in proc.stderr
