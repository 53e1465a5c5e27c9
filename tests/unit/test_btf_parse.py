"""memtop.linux.btf on BTF blobs built here: what the slab tracer does when the kernel's BTF is missing,
malformed or describes a raw tracepoint differently (tests/kernel/test_btf.py compares the real
kernel's BTF with bpftool)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from memtop.linux import btf
from memtop.probes.slabtrace import ALLOC_EVENTS, SlabFreesProbe, SlabTraceProbe, raw_config


class Blob:
    """A BTF blob: types added in order (ids from 1), strings interned."""

    def __init__(self) -> None:
        self.types = b""
        self.strings = b"\0"
        self.n = 0

    def name(self, s: str) -> int:
        if not s:
            return 0
        off = len(self.strings)
        self.strings += s.encode() + b"\0"
        return off

    def add(self, kind: int, name: str, size_or_type: int, extra: bytes = b"", vlen: int = 0) -> int:
        self.types += struct.pack("<III", self.name(name), (kind << 24) | vlen, size_or_type) + extra
        self.n += 1
        return self.n

    def proto(self, event: str, *params: int) -> None:
        fp = self.add(btf.FUNC_PROTO, "", 0, b"".join(struct.pack("<II", 0, p) for p in params), len(params))
        self.add(btf.TYPEDEF, f"btf_trace_{event}", self.add(btf.PTR, "", fp))

    def bytes(self) -> bytes:
        hdr = struct.pack(
            "<HBBIIIII", btf.MAGIC, 1, 0, 24, 0, len(self.types), len(self.types), len(self.strings)
        )
        return hdr + self.types + self.strings


def kernel_like(kfree_params: int = 2) -> Blob:
    b = Blob()
    ulong = b.add(btf.INT, "long unsigned int", 8, struct.pack("<I", 64))
    uint = b.add(btf.INT, "unsigned int", 4, struct.pack("<I", 32))
    int_ = b.add(btf.INT, "int", 4, struct.pack("<I", 32))
    char = b.add(btf.INT, "char", 1, struct.pack("<I", 8))
    voidp = b.add(btf.PTR, "", 0)
    cvoidp = b.add(btf.PTR, "", b.add(btf.CONST, "", 0))
    namep = b.add(btf.PTR, "", b.add(btf.CONST, "", char))
    members = struct.pack("<III", b.name("size"), uint, 32 * 8) + struct.pack(
        "<III", b.name("name"), namep, 104 * 8
    )
    cache = b.add(btf.STRUCT, "kmem_cache", 200, members, 2)
    cachep = b.add(btf.PTR, "", cache)
    ccachep = b.add(btf.PTR, "", b.add(btf.CONST, "", cache))
    gfp = b.add(btf.TYPEDEF, "gfp_t", uint)
    size_t = b.add(btf.TYPEDEF, "size_t", ulong)
    b.proto("kmem_cache_alloc", voidp, ulong, cvoidp, cachep, gfp, int_)
    b.proto("kmalloc", voidp, ulong, cvoidp, size_t, size_t, gfp, int_)
    b.proto("kfree", *[voidp, ulong, cvoidp][: kfree_params + 1])
    b.proto("kmem_cache_free", voidp, ulong, cvoidp, ccachep)
    return b


def test_a_kernel_like_blob_gets_the_raw_program(tmp_path: Path) -> None:
    path = tmp_path / "vmlinux"
    path.write_bytes(kernel_like().bytes())
    assert raw_config(path) == (["-DRAW", "-DKC_NAME_OFF=104", "-DKC_SIZE_OFF=32"], "")


def test_a_different_prototype_falls_back_to_tracepoints(tmp_path: Path) -> None:
    path = tmp_path / "vmlinux"
    path.write_bytes(kernel_like(kfree_params=1).bytes())
    assert btf.Btf.vmlinux(path).raw_tracepoint_args("kfree") == ["long unsigned int"]
    flags, why = raw_config(path)
    assert flags == [] and "raw tracepoint kfree is ['long unsigned int']" in why
    # the allocations-only tracer hooks no free: a free hook it does not attach cannot stop it
    assert raw_config(path, ALLOC_EVENTS)[0][0] == "-DRAW"


def test_no_or_broken_btf_falls_back_with_the_reason(tmp_path: Path) -> None:
    assert raw_config(tmp_path / "absent") == (
        [],
        f"no kernel BTF (cannot read {tmp_path / 'absent'}: No such file or directory)",
    )
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x00" * 64)
    assert raw_config(bad)[1].startswith("no kernel BTF (not BTF")
    whole = kernel_like().bytes()
    for cut in (len(whole) - 40, 24 + 30, 30):  # in the strings, in the types, in the header
        truncated = tmp_path / f"truncated-{cut}"
        truncated.write_bytes(whole[:cut])
        flags, why = raw_config(truncated)
        assert flags == [] and why.startswith("no kernel BTF"), why


def test_the_probe_says_which_hook_it_uses() -> None:
    assert (
        SlabTraceProbe(raw=False).note()
        == "allocations, 1 in 64 sampled, tracepoints (regular tracepoints asked for)"
    )
    assert "-DRAW" not in SlabTraceProbe(raw=False).cflags()


def test_only_the_slabfrees_probe_hooks_the_frees() -> None:
    """The default slab tracer is the program without -DFREES on the two allocation hooks; the
    slabfrees probe builds it with -DFREES and needs the four."""
    plain, frees = SlabTraceProbe(raw=False), SlabFreesProbe(raw=False)
    assert "-DFREES" not in plain.cflags() and "-DFREES" in frees.cflags()
    assert plain.tracepoints == ("kmem:kmem_cache_alloc", "kmem:kmalloc")
    assert set(frees.tracepoints) == {*plain.tracepoints, "kmem:kfree", "kmem:kmem_cache_free"}
    assert frees.note().startswith("allocations and frees, 1 in 64 sampled")


def test_doctor_says_which_hook_slab_tracing_gets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memtop.headless import doctor
    from memtop.probes import slabtrace

    path = tmp_path / "vmlinux"
    path.write_bytes(kernel_like(kfree_params=1).bytes())
    monkeypatch.setattr(slabtrace, "raw_config", lambda: raw_config(path))
    check = {c.name: c for c in doctor.kernel_checks(str(tmp_path))}["slab tracing hook"]
    assert not check.ok and check.detail == "regular tracepoints"
    assert "raw tracepoint kfree is" in check.hint and "costs more" in check.hint
    path.write_bytes(kernel_like().bytes())
    check = {c.name: c for c in doctor.kernel_checks(str(tmp_path))}["slab tracing hook"]
    assert check.ok and check.detail.startswith("raw tracepoints")
