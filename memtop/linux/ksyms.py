"""Kernel text addresses to function names, from /proc/kallsyms (read once, bounded, no symlink
followed). With kernel.kptr_restrict=2, or without CAP_SYSLOG at 1, the kernel prints every
address as 0: :attr:`KernelSymbols.usable` is False and addresses stay hex (the pane says why)."""

from __future__ import annotations

import bisect
import os

from memtop.core.text import clean
from memtop.linux.cgroupfs import read_text

MAX_KALLSYMS = 64 << 20


class KernelSymbols:
    def __init__(self, proc_root: str = "/proc") -> None:
        self.addrs: list[int] = []
        self.names: list[str] = []
        text = read_text(os.path.join(proc_root, "kallsyms"), MAX_KALLSYMS) or ""
        pairs = []
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 3 or parts[1] not in "tTwW":
                continue
            try:
                addr = int(parts[0], 16)
            except ValueError:
                continue
            if addr:
                name = parts[2] + (f" {parts[3]}" if len(parts) > 3 else "")
                pairs.append((addr, clean(name, 160)))
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
