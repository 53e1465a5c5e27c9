"""memtop/linux/ksyms.py: kallsyms' text symbols read once for the slab tracers (with their
module), and the one line parser the vmscan and swap-in probes share with it."""

from __future__ import annotations

import os
from pathlib import Path

from memtop.linux.ksyms import KernelSymbols, text_symbols

KALLSYMS = (
    b"ffffffff81200000 T kmem_cache_alloc\n"
    b"ffffffff81100000 t kfree\n"
    b"ffffffff81150000 d some_data\n"
    b"0000000000000000 T hidden\n"
    b"zzzz T not_hex\n"
    b"ffffffffc0001000 t zs_malloc\t[zsmalloc]\n"
    b"ffffffffa0000000 W evil_\x1b]0;owned\x07\n"
)


def test_text_symbols_with_their_module() -> None:
    assert list(text_symbols(KALLSYMS.splitlines())) == [
        (0xFFFFFFFF81200000, b"kmem_cache_alloc", b""),
        (0xFFFFFFFF81100000, b"kfree", b""),
        (0xFFFFFFFFC0001000, b"zs_malloc", b"[zsmalloc]"),
        (0xFFFFFFFFA0000000, b"evil_\x1b]0;owned\x07", b""),
    ]


def test_kernel_symbols_name_functions_and_modules(tmp_path: Path) -> None:
    (tmp_path / "kallsyms").write_bytes(KALLSYMS)
    syms = KernelSymbols(str(tmp_path))
    assert syms.usable
    assert syms.name(0xFFFFFFFF81200010) == "kmem_cache_alloc+0x10"
    assert syms.function(0xFFFFFFFF81200010) == "kmem_cache_alloc"
    assert syms.name(0xFFFFFFFFC0001004).startswith("zs_malloc") and "[zsmalloc]" in syms.name(
        0xFFFFFFFFC0001004
    )
    assert syms.name(0xFFFFFFFFA0000000) == "evil_\\x1b]0;owned\\x07"
    assert syms.name(0xFFFFFFFF81000000) == "0xffffffff81000000"  # below every symbol


def test_hidden_addresses_or_a_planted_symlink_leave_it_unusable(tmp_path: Path) -> None:
    (tmp_path / "kallsyms").write_bytes(b"0000000000000000 T kfree\n")
    assert not KernelSymbols(str(tmp_path)).usable
    os.remove(tmp_path / "kallsyms")
    real = tmp_path / "real"
    real.write_bytes(KALLSYMS)
    (tmp_path / "kallsyms").symlink_to(real)
    assert not KernelSymbols(str(tmp_path)).usable  # never read through a symlink
