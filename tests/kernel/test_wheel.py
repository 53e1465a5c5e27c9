"""The wheel: it ships bpf/ and styles/, and a probe loads from an installed copy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT


@pytest.mark.bpf
def test_wheel_ships_bpf_and_styles_and_loads_a_probe(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheel = next(dist.glob("memtop-*.whl"))
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "memtop/_data/bpf/procmem.bpf.c" in names
    assert "memtop/_data/styles/memtop.tcss" in names
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(wheel)], check=True, capture_output=True
    )
    code = (
        "import memtop.runtime.resources as r, memtop.probes.procmem as p\n"
        "assert '/_data/' in str(r.bpf_dir()), r.bpf_dir()\n"
        "pr = p.ProcmemProbe(); pr.load(); print(len(pr.poll())); pr.close()\n"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert out.returncode == 0, out.stderr
