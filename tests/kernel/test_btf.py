"""memtop.linux.btf against bpftool's reading of the same kernel BTF (/sys/kernel/btf/vmlinux).

The slab tracer reads ``struct kmem_cache`` at the offsets memtop.linux.btf finds and trusts a raw
tracepoint's arguments to be what memtop.linux.btf says the prototype is: both are compared with
bpftool's dump here, for the structs and tracepoints memtop uses and a spread of others.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from memtop.linux import btf
from memtop.probes.slabtrace import RAW_PROTOTYPES, raw_config

VMLINUX = Path("/sys/kernel/btf/vmlinux")
pytestmark = pytest.mark.skipif(not VMLINUX.exists(), reason="kernel has no BTF")


@pytest.fixture(scope="module")
def types() -> btf.Btf:
    return btf.Btf.vmlinux()


@pytest.fixture(scope="module")
def c_dump() -> str:
    return subprocess.run(
        ["bpftool", "btf", "dump", "file", str(VMLINUX), "format", "c"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture(scope="module")
def raw_dump() -> str:
    return subprocess.run(
        ["bpftool", "btf", "dump", "file", str(VMLINUX)], check=True, capture_output=True, text=True
    ).stdout


def bpftool_members(raw_dump: str, struct: str) -> dict[str, int]:
    """member -> bit offset of the first STRUCT named ``struct`` in bpftool's raw dump."""
    m = re.search(rf"^\[\d+\] STRUCT '{re.escape(struct)}' size=\d+ vlen=(\d+)\n", raw_dump, re.M)
    assert m, struct
    lines = raw_dump[m.end() :].splitlines()[: int(m.group(1))]
    out = {}
    for line in lines:
        mm = re.match(r"\s+'([^']*)' type_id=\d+ bits_offset=(\d+)", line)
        assert mm, line
        out[mm.group(1)] = int(mm.group(2))
    return out


@pytest.mark.parametrize("struct", ["kmem_cache", "task_struct", "mm_struct", "page", "file", "dentry"])
def test_member_offsets_are_bpftools(types: btf.Btf, raw_dump: str, struct: str) -> None:
    theirs = bpftool_members(raw_dump, struct)
    named = {k: v for k, v in theirs.items() if k != "(anon)" and v % 8 == 0}
    assert named
    for member, bits in named.items():
        assert types.member_offset(struct, member) == bits // 8, (struct, member)


def test_raw_tracepoint_prototypes_are_bpftools(types: btf.Btf, c_dump: str) -> None:
    """Every btf_trace_* typedef bpftool prints as a plain prototype, spelled the same."""
    protos = re.findall(r"^typedef void \(\*btf_trace_(\w+)\)\(void \*(?:, ([^()]*))?\);$", c_dump, re.M)
    assert len(protos) > 500
    for event in RAW_PROTOTYPES:
        assert event in dict(protos)
    checked = 0
    for event, args in protos:
        if "(" in args or "[" in args:  # function pointers, arrays: not spelled by memtop.linux.btf
            continue
        want = [a.strip() for a in args.split(",")] if args else []
        assert types.raw_tracepoint_args(event) == want, event
        checked += 1
    assert checked > 500


def test_this_kernel_gets_the_raw_slab_tracer(types: btf.Btf) -> None:
    flags, why_not = raw_config()
    assert why_not == ""
    name = types.member_offset("kmem_cache", "name")
    assert flags == [
        "-DRAW",
        f"-DKC_NAME_OFF={name}",
        f"-DKC_SIZE_OFF={types.member_offset('kmem_cache', 'size')}",
    ]
