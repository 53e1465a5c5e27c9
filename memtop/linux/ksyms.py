"""Kernel text addresses to function names, from /proc/kallsyms (read once, bounded, no symlink
followed). With kernel.kptr_restrict=2, or without CAP_SYSLOG at 1, the kernel prints every
address as 0: :attr:`KernelSymbols.usable` is False and addresses stay hex (the pane says why)."""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable, Iterator

from memtop.core.text import clean
from memtop.linux.cgroupfs import read_bytes

MAX_KALLSYMS = 64 << 20
#: kallsyms' types of text (code) symbols: global, local, weak
TEXT_TYPES = (b"t", b"T", b"w", b"W")


def text_symbols(lines: Iterable[bytes]) -> Iterator[tuple[int, bytes, bytes]]:
    """(address, name, module) of each text symbol among /proc/kallsyms' ``lines`` (module: the
    ``[name]`` a module's symbol carries, b"" for the kernel's own). An address the kernel hides
    (0: kptr_restrict) or that is not hex is left out."""
    for line in lines:
        parts = line.split()
        if len(parts) < 3 or parts[1] not in TEXT_TYPES:
            continue
        try:
            addr = int(parts[0], 16)
        except ValueError:
            continue
        if addr:
            yield addr, parts[2], parts[3] if len(parts) > 3 else b""


class KernelSymbols:
    def __init__(self, proc_root: str = "/proc") -> None:
        self.addrs: list[int] = []
        self.names: list[str] = []
        data = read_bytes(os.path.join(proc_root, "kallsyms"), MAX_KALLSYMS) or b""
        pairs = [
            (addr, clean((name + (b" " + module if module else b"")).decode("utf-8", "replace"), 160))
            for addr, name, module in text_symbols(data.splitlines())
        ]
        pairs.sort()
        self.addrs = [a for a, _ in pairs]
        self.names = [n for _, n in pairs]

    @property
    def usable(self) -> bool:
        return bool(self.addrs)

    def name(self, addr: int) -> str:
        """``function+0xoff`` (``function`` at offset 0), or the address in hex."""
        i = bisect.bisect_right(self.addrs, addr) - 1
        if i < 0 or not addr:
            return f"0x{addr:x}"
        off = addr - self.addrs[i]
        if off > 1 << 20:  # past the last symbol: not kernel text memtop knows
            return f"0x{addr:x}"
        return self.names[i] + (f"+0x{off:x}" if off else "")

    def function(self, addr: int) -> str:
        """The function's name alone (one row per function, whatever the offset)."""
        return self.name(addr).split("+", 1)[0]
