"""User-space stack symbolization for one process: ``function+0xoff [module] file:line``.

Names come from BCC's symbolizer (through memtop.bcc_compat, under its lock). Source lines come
from ``addr2line`` where the module has debug info (best effort, one batched call per module):
the address is turned into the ELF virtual address the debug info speaks of, through the
mapping's file offset and the module's PT_LOAD headers, so PIE, non-PIE and shared objects work.
Results are cached per address; text is cleaned (symbol names and paths are untrusted).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

from memtop import bcc_compat
from memtop.probes.procmaps import AddressMap, read_maps
from memtop.text import clean

ADDR2LINE_TIMEOUT_S = 5.0


def _load_segments(path: str) -> list[tuple[int, int, int]] | None:
    """(p_offset, p_vaddr, p_filesz) of the PT_LOAD headers of a 64-bit little-endian ELF."""
    try:
        with open(path, "rb") as f:
            ehdr = f.read(64)
            if len(ehdr) < 64 or ehdr[:4] != b"\x7fELF" or ehdr[4] != 2 or ehdr[5] != 1:
                return None
            (phoff,) = struct.unpack_from("<Q", ehdr, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", ehdr, 0x36)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return None
    segs = []
    for i in range(phnum):
        base = i * phentsize
        if base + 56 > len(table):
            break
        (p_type,) = struct.unpack_from("<I", table, base)
        if p_type != 1:  # PT_LOAD
            continue
        p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from("<QQQQ", table, base + 8)
        segs.append((p_offset, p_vaddr, p_filesz))
    return segs


class Symbolizer:
    def __init__(self, pid: int, proc_root: str = "/proc", lines: bool = True) -> None:
        self.pid = pid
        self.proc_root = proc_root
        self.lines = lines and shutil.which("addr2line") is not None
        self._cache: dict[int, str] = {}
        self._segments: dict[str, list[tuple[int, int, int]] | None] = {}
        self._amap: AddressMap | None = None

    def _module_vaddr(self, addr: int) -> tuple[str, int] | None:
        if self._amap is None or self._amap.find(addr) is None:
            entries = read_maps(self.pid, self.proc_root)
            if entries is None:
                return None
            self._amap = AddressMap(entries)
        m = self._amap.find(addr)
        if m is None or not m.path.startswith("/"):
            return None
        file_off = addr - m.start + m.offset
        path = f"{self.proc_root}/{self.pid}/root{m.path}"
        if path not in self._segments:
            self._segments[path] = _load_segments(path)
        for p_offset, p_vaddr, p_filesz in self._segments[path] or ():
            if p_offset <= file_off < p_offset + p_filesz:
                return path, file_off - p_offset + p_vaddr
        return None

    def _lines(self, module: str, vaddrs: list[int]) -> list[str]:
        try:
            out = subprocess.run(
                ["addr2line", "-e", module] + [f"0x{v:x}" for v in vaddrs],
                capture_output=True,
                text=True,
                timeout=ADDR2LINE_TIMEOUT_S,
                check=False,
            ).stdout.splitlines()
        except (OSError, subprocess.SubprocessError):
            return [""] * len(vaddrs)
        res = []
        for i in range(len(vaddrs)):
            text = out[i].split(" (discriminator")[0].strip() if i < len(out) else ""
            if not text or text.startswith("??"):
                res.append("")
            else:
                file, _, line = text.rpartition(":")
                res.append(f"{os.path.basename(file)}:{line}" if line not in ("0", "?") else "")
        return res

    def stack_frames(self, stacks: Any, sid: int, alive: bool) -> tuple[str, ...]:
        """Frames of stack ``sid`` in a BPF stack-trace map: symbolized while the process lives,
        raw addresses after; a failed or evicted stack says why."""
        if sid < 0:
            err = -sid
            why = {17: "hash collision", 14: "no user stack"}.get(err, f"errno {err}")
            return (f"[stack not taken: {why}]",)
        try:
            addrs = [int(a) for a in stacks.walk(sid)]
        except KeyError:
            return ("[stack evicted]",)
        if not alive:
            return tuple(f"0x{a:x}" for a in addrs)
        return self.frames(addrs)

    def frames(self, addrs: list[int]) -> tuple[str, ...]:
        """Symbolize a stack (innermost first). Return addresses (all but the first) are looked up
        at addr-1 for their line, so the call site shows rather than the line after it."""
        todo = [a for a in dict.fromkeys(addrs) if a not in self._cache]
        by_module: dict[str, list[tuple[int, int]]] = {}
        for a in todo:
            try:
                name, offset, module = bcc_compat.sym_resolve(a, self.pid)
            except Exception:  # noqa: BLE001 - symbolization is best effort
                name, offset, module = None, 0, None
            text = f"{clean(name, 256)}+0x{offset:x}" if name else f"0x{a:x}"
            if module:
                text += f" [{clean(os.path.basename(module), 256)}]"
            self._cache[a] = text
            if self.lines:
                mv = self._module_vaddr(a)
                if mv is not None:
                    by_module.setdefault(mv[0], []).append((a, mv[1]))
        first = addrs[0] if addrs else None
        for module, pairs in by_module.items():
            vaddrs = [v if a == first else max(0, v - 1) for a, v in pairs]
            for (a, _), line in zip(pairs, self._lines(module, vaddrs), strict=True):
                if line:
                    self._cache[a] += f" {clean(line, 256)}"
        return tuple(self._cache[a] for a in addrs)

    def close(self) -> None:
        try:
            bcc_compat.forget_sym_cache(self.pid)
        except Exception:  # noqa: BLE001
            pass


def proc_exists(pid: int, proc_root: str = "/proc") -> bool:
    return Path(proc_root, str(pid), "stat").exists()
