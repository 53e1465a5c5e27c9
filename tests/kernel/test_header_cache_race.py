"""Four memtops started at once on a fresh header cache all attach their probes: the first builds
the stand-in tree privately and renames it into place, the others use it."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest
from support import memtop_cmd

from memtop.linux import headers
from memtop.probes.base import BpfProbe
from memtop.probes.registry import all_probe_classes, on_demand

pytestmark = pytest.mark.bpf

#: the BPF probes memtop attaches at start (memtop/probes/registry.py)
DEFAULT_BPF = {c.name for c in all_probe_classes() if issubclass(c, BpfProbe) and not on_demand(c.name)}


def test_concurrent_first_starts_on_a_fresh_cache_all_attach(tmp_path: Path) -> None:
    info = headers.find_headers(build=False)
    if info.kind != "standin" or "/headers/" not in info.path:
        pytest.skip(f"needs stand-in headers to merge, not {info.summary}")
    cache = tmp_path / "cache"
    env = {**os.environ, "MEMTOP_CACHE_DIR": str(cache)}
    outs = [tmp_path / f"rec{i}.jsonl.gz" for i in range(4)]
    procs = [
        subprocess.Popen(
            memtop_cmd() + ["record", "--output", str(out), "--duration", "2", "--quiet"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for out in outs
    ]
    try:
        errors = [p.communicate(timeout=300)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, err in zip(procs, errors, strict=True):
        assert p.returncode == 0, err[-3000:]
    for out in outs:
        with gzip.open(out, "rt") as f:
            probes = json.loads(f.readline())["probes"]
        assert DEFAULT_BPF <= set(probes["attached"]), probes
    assert os.listdir(cache / "headers") == [info.version]  # one tree, no scratch left behind
    marker = (cache / "headers" / info.version / headers.MARKER).read_text()
    assert marker.startswith(headers.FORMAT + "\n")
