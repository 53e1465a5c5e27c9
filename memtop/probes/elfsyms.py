"""Function names from ELF files, read by memtop itself, for the symbol helper process.

Every file read here comes from the traced system, which any local user may control: the target
binary, its ``.gnu_debuglink`` file beside it, a perf map in its /tmp. BCC's symbolizer opened such
files with a plain ``open()``, so a FIFO named by a debuglink blocked it forever (issue 19, item 4).
Here no file is opened unless it is a regular file: :func:`open_regular` checks before opening,
opens with O_NONBLOCK (a FIFO swapped in meanwhile, or a file lease, returns at once instead of
blocking) and checks the opened file again. Sizes read are bounded. The helper process that runs
this (memtop.probes.symbols) is itself bounded in time, for what no check can see (a stalled
network or FUSE file system).

Debug files are looked for as GDB does: by build id under ``/usr/lib/debug/.build-id``, then by
``.gnu_debuglink`` name (beside the binary, in its ``.debug/``, under ``/usr/lib/debug``; the CRC
must match), then the LZMA-compressed ``.gnu_debugdata`` (MiniDebugInfo). Paths of the target are
looked up through ``/proc/PID/root``, so a process in a container is symbolized from its own files.
"""

from __future__ import annotations

import bisect
import lzma
import os
import stat
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

#: a debug file is CRC-checked in full: larger ones are not used
MAX_DEBUG_FILE_BYTES = 2 << 30
#: largest symbol or string table read (a table past it is skipped)
MAX_TABLE_BYTES = 256 << 20
#: MiniDebugInfo: compressed and decompressed bounds (BCC's limit for the latter)
MAX_DEBUGDATA_BYTES = 32 << 20
MAX_DEBUGDATA_OUT_BYTES = 128 << 20
#: perf maps (JIT symbols, /tmp/perf-PID.map) larger than this are not read
MAX_PERF_MAP_BYTES = 64 << 20

PT_LOAD = 1
SHT_SYMTAB, SHT_DYNAMIC, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 2, 6, 7, 8, 11
DT_NULL, DT_NEEDED, DT_SONAME = 0, 1, 14
#: DT_NEEDED entries read at most (a real program has tens)
MAX_NEEDED = 1024
STT_FUNC, STT_GNU_IFUNC = 2, 10
NT_GNU_BUILD_ID = 3

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")


def open_regular(path: str) -> int | None:
    """A read-only fd on ``path`` if it is a regular file, else None. Never blocks on a FIFO,
    a device or a leased file, and never opens one that was not a regular file when checked."""
    try:
        before = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(before.st_mode):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
        os.close(fd)
        return None
    return fd


class _Source:
    """Bytes of an ELF image: an open regular file or a buffer (MiniDebugInfo)."""

    def __init__(self, fd: int | None = None, data: bytes | None = None) -> None:
        self.fd = fd
        self.data = data
        self.size = os.fstat(fd).st_size if fd is not None else len(data or b"")

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size <= 0 or offset >= self.size:
            return b""
        size = min(size, self.size - offset)
        if self.data is not None:
            return self.data[offset : offset + size]
        assert self.fd is not None
        out = bytearray()
        while len(out) < size:
            chunk = os.pread(self.fd, size - len(out), offset + len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)


@dataclass(frozen=True, slots=True)
class Section:
    name: str
    type: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


class ElfImage:
    """The headers of a 64-bit little-endian ELF file (x86-64, arm64, riscv64…): its PT_LOAD
    segments and named sections. Anything else raises ValueError."""

    def __init__(self, src: _Source) -> None:
        self.src = src
        ehdr = src.read(0, _EHDR.size)
        if len(ehdr) < _EHDR.size or ehdr[:4] != b"\x7fELF" or ehdr[4] != 2 or ehdr[5] != 1:
            raise ValueError("not a 64-bit little-endian ELF file")
        (
            _ident,
            self.type,
            _mach,
            _ver,
            _entry,
            phoff,
            shoff,
            _flags,
            _ehsz,
            phentsize,
            phnum,
            shentsize,
            shnum,
            shstrndx,
        ) = _EHDR.unpack(ehdr)
        #: (p_offset, p_vaddr, p_filesz, p_memsz) of each PT_LOAD
        self.loads: list[tuple[int, int, int, int]] = []
        if phoff and phentsize >= _PHDR.size and phnum:
            table = src.read(phoff, phentsize * phnum)
            for i in range(min(phnum, len(table) // phentsize)):
                p_type, _pf, p_offset, p_vaddr, _pa, p_filesz, p_memsz, _al = _PHDR.unpack_from(
                    table, i * phentsize
                )
                if p_type == PT_LOAD:
                    self.loads.append((p_offset, p_vaddr, p_filesz, p_memsz))
        self.sections: list[Section] = []
        self.by_name: dict[str, Section] = {}
        if not shoff or shentsize < _SHDR.size:
            return
        if shnum == 0:  # more than 0xff00 sections: the count is in section 0
            first = src.read(shoff, _SHDR.size)
            if len(first) == _SHDR.size:
                shnum = min(_SHDR.unpack(first)[5], 1 << 20)
        table = src.read(shoff, shentsize * shnum)
        raw = [_SHDR.unpack_from(table, i * shentsize) for i in range(len(table) // shentsize)]
        names = b""
        if shstrndx < len(raw):
            sh = raw[shstrndx]
            names = src.read(sh[4], min(sh[5], MAX_TABLE_BYTES))
        for sh_name, sh_type, _fl, sh_addr, sh_offset, sh_size, sh_link, _info, _align, sh_entsize in raw:
            end = names.find(b"\0", sh_name)
            name = names[sh_name : end if end >= 0 else len(names)].decode("utf-8", "replace")
            sec = Section(name, sh_type, sh_addr, sh_offset, sh_size, sh_link, sh_entsize)
            self.sections.append(sec)
            self.by_name.setdefault(name, sec)

    def data(self, sec: Section, limit: int = MAX_TABLE_BYTES) -> bytes:
        if sec.type == SHT_NOBITS or sec.size > limit:
            return b""
        return self.src.read(sec.offset, sec.size)

    def has(self, name: str) -> bool:
        sec = self.by_name.get(name)
        return sec is not None and sec.type != SHT_NOBITS and sec.size > 0

    # -- addresses ----------------------------------------------------------------------------
    def vaddr_of_file_offset(self, off: int) -> int | None:
        """The ELF virtual address (the one symbols and debug info use) of file offset ``off``."""
        for p_offset, p_vaddr, p_filesz, _memsz in self.loads:
            if p_offset <= off < p_offset + p_filesz:
                return off - p_offset + p_vaddr
        return None

    def file_offset_of_vaddr(self, vaddr: int) -> int | None:
        for p_offset, p_vaddr, _filesz, p_memsz in self.loads:
            if p_vaddr <= vaddr < p_vaddr + p_memsz:
                return vaddr - p_vaddr + p_offset
        return None

    # -- symbols ------------------------------------------------------------------------------
    def functions(self) -> Iterator[tuple[int, int, bytes]]:
        """(start vaddr, size, name) of every defined function in .symtab and .dynsym."""
        for sec in self.sections:
            if sec.type not in (SHT_SYMTAB, SHT_DYNSYM) or sec.link >= len(self.sections):
                continue
            table = self.data(sec)
            strings = self.data(self.sections[sec.link])
            if not table or not strings:
                continue
            n = len(table) // _SYM.size
            for st_name, st_info, _other, st_shndx, st_value, st_size in _SYM.iter_unpack(
                table[: n * _SYM.size]
            ):
                if st_info & 0xF not in (STT_FUNC, STT_GNU_IFUNC) or st_shndx == 0 or not st_value:
                    continue
                end = strings.find(b"\0", st_name)
                name = strings[st_name : end if end >= 0 else len(strings)]
                if name:
                    yield st_value, st_size, name

    def find_function(self, name: str) -> int | None:
        """The vaddr of the defined function ``name`` (a global one first), or None."""
        want = name.encode()
        found = None
        for start, _size, fname in self.functions():
            at = fname.find(b"@")  # a versioned name in .symtab: malloc@@GLIBC_2.2.5
            if (fname if at < 0 else fname[:at]) == want:
                if at < 0 or fname[at : at + 2] == b"@@":
                    return start
                found = found if found is not None else start
        return found

    def dynamic(self) -> tuple[list[str], str]:
        """(the libraries this object needs, its DT_NEEDED entries in order; its DT_SONAME, "" when
        none), surrogate-escaped."""
        sec = next((x for x in self.sections if x.type == SHT_DYNAMIC), None)
        if sec is None or sec.link >= len(self.sections):
            return [], ""
        table = self.data(sec, 1 << 20)
        strings = self.data(self.sections[sec.link], 1 << 24)

        def string(at: int) -> str:
            end = strings.find(b"\0", at)
            return strings[at : end if end >= 0 else len(strings)].decode("utf-8", "surrogateescape")

        needed: list[str] = []
        soname = ""
        for tag, val in struct.iter_unpack("<qQ", table[: len(table) // 16 * 16]):
            if tag == DT_NULL or len(needed) >= MAX_NEEDED:
                break
            if tag == DT_NEEDED and val < len(strings) and string(val):
                needed.append(string(val))
            elif tag == DT_SONAME and val < len(strings):
                soname = string(val)
        return needed, soname

    # -- debug links ----------------------------------------------------------------------------
    def build_id(self) -> str | None:
        for sec in self.sections:
            if sec.type != SHT_NOTE:
                continue
            data = self.data(sec, 1 << 16)
            pos = 0
            while pos + 12 <= len(data):
                namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
                name_end = pos + 12 + ((namesz + 3) & ~3)
                desc_end = name_end + ((descsz + 3) & ~3)
                if ntype == NT_GNU_BUILD_ID and data[pos + 12 : pos + 12 + namesz].rstrip(b"\0") == b"GNU":
                    desc = data[name_end : name_end + descsz]
                    return desc.hex() if 2 <= len(desc) <= 64 else None
                pos = desc_end
        return None

    def debuglink(self) -> tuple[str, int] | None:
        """(file name, CRC-32) from .gnu_debuglink; None when absent or not a plain file name."""
        sec = self.by_name.get(".gnu_debuglink")
        if sec is None:
            return None
        data = self.data(sec, 4096)
        end = data.find(b"\0")
        if end <= 0:
            return None
        crc_at = (end + 4) & ~3
        if crc_at + 4 > len(data):
            return None
        name = data[:end].decode("utf-8", "replace")
        if "/" in name or name in (".", ".."):
            return None
        return name, struct.unpack_from("<I", data, crc_at)[0]

    def debugaltlink(self) -> str | None:
        """The dwz supplementary file named by .gnu_debugaltlink (addr2line opens it)."""
        sec = self.by_name.get(".gnu_debugaltlink")
        if sec is None:
            return None
        data = self.data(sec, 4096)
        end = data.find(b"\0")
        return data[: end if end >= 0 else len(data)].decode("utf-8", "replace")

    def debugdata(self) -> ElfImage | None:
        """The MiniDebugInfo image (.gnu_debugdata, LZMA), bounded in size."""
        sec = self.by_name.get(".gnu_debugdata")
        if sec is None:
            return None
        raw = self.data(sec, MAX_DEBUGDATA_BYTES)
        if not raw:
            return None
        try:
            dec = lzma.LZMADecompressor(memlimit=MAX_DEBUGDATA_OUT_BYTES)
            out = dec.decompress(raw, MAX_DEBUGDATA_OUT_BYTES)
            return ElfImage(_Source(data=out))
        except (lzma.LZMAError, ValueError, EOFError, MemoryError, struct.error):
            return None

    def has_lines(self) -> bool:
        return self.has(".debug_line") and self.has(".debug_info")


def open_elf(path: str) -> tuple[int, ElfImage] | None:
    """(fd, image) of ``path`` when it is a regular ELF file; the caller closes the fd."""
    fd = open_regular(path)
    if fd is None:
        return None
    try:
        return fd, ElfImage(_Source(fd))
    except (ValueError, OSError, struct.error):
        os.close(fd)
        return None


def file_crc32(fd: int) -> int | None:
    """The GNU debuglink CRC (zlib's CRC-32) of the whole file, None when it is too large."""
    size = os.fstat(fd).st_size
    if size > MAX_DEBUG_FILE_BYTES:
        return None
    crc, pos = 0, 0
    while pos < size:
        chunk = os.pread(fd, 1 << 20, pos)
        if not chunk:
            break
        crc = zlib.crc32(chunk, crc)
        pos += len(chunk)
    return crc


# -- a module's symbols -------------------------------------------------------------------------


@dataclass
class ModuleSymbols:
    """The function symbols of one mapped file, from it and its debug files, for address lookups;
    and which file, if any, has the line tables addr2line needs (an open fd)."""

    image: ElfImage | None
    #: fds this module holds open (the file itself, its debug file)
    fds: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    names: list[bytes] = field(default_factory=list)
    #: the fd addr2line reads (the module itself or its debug file), None when neither has lines
    lines_fd: int | None = None

    def add(self, functions: Iterator[tuple[int, int, bytes]]) -> None:
        seen = set(zip(self.starts, self.names, strict=True))
        rows = [(s, max(1, z), n) for s, z, n in functions if (s, n) not in seen]
        if not rows:
            return
        rows += list(
            zip(
                self.starts,
                (e - s for s, e in zip(self.starts, self.ends, strict=True)),
                self.names,
                strict=True,
            )
        )
        rows.sort(key=lambda r: (r[0], -r[1]))
        self.starts = [r[0] for r in rows]
        self.ends = [r[0] + r[1] for r in rows]
        self.names = [r[2] for r in rows]

    def lookup(self, vaddr: int) -> tuple[str, int] | None:
        """(name, offset into it) of the function containing ``vaddr``. Functions nest (a local
        label sized 0 inside another): the nearest start at or below that still covers wins."""
        i = bisect.bisect_right(self.starts, vaddr) - 1
        for j in range(i, max(-1, i - 64), -1):
            if self.starts[j] <= vaddr < self.ends[j]:
                return self.names[j].decode("utf-8", "replace"), vaddr - self.starts[j]
        return None

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds.clear()


def load_module(fd: int, image: ElfImage, path: str, root: str) -> ModuleSymbols:
    """The symbols of the mapped file ``path`` (as the process sees it; opened as ``fd``), with
    its debug file found under ``root`` (``/proc/PID/root``) or the host's /usr/lib/debug."""
    mod = ModuleSymbols(image, [fd])
    mod.add(image.functions())
    if image.has_lines():
        mod.lines_fd = fd
    debug = find_debug_file(image, path, root, os.fstat(fd))
    if debug is not None:
        dfd, dimage = debug
        mod.fds.append(dfd)
        mod.add(dimage.functions())
        if mod.lines_fd is None and dimage.has_lines() and altlink_ok(dimage):
            mod.lines_fd = dfd
    if not mod.starts or debug is None:
        mini = image.debugdata()
        if mini is not None:
            mod.add(mini.functions())
    if mod.lines_fd is not None and mod.lines_fd == fd and not altlink_ok(image):
        mod.lines_fd = None
    return mod


def find_debug_file(
    image: ElfImage, path: str, root: str, module: os.stat_result
) -> tuple[int, ElfImage] | None:
    """The separate debug file of ``image``: by build id, then by debuglink (CRC checked)."""
    bid = image.build_id()
    if bid is not None:
        for base in (f"{root}/usr/lib/debug", "/usr/lib/debug"):
            found = open_elf(f"{base}/.build-id/{bid[:2]}/{bid[2:]}.debug")
            if found is None:
                continue
            if found[1].build_id() == bid:
                return found
            os.close(found[0])
    link = image.debuglink()
    if link is None:
        return None
    name, crc = link
    bindir = os.path.dirname(path)
    for cand in (
        f"{root}{bindir}/{name}",
        f"{root}{bindir}/.debug/{name}",
        f"{root}/usr/lib/debug{bindir}/{name}",
    ):
        found = open_elf(cand)
        if found is None:
            continue
        st = os.fstat(found[0])
        if (st.st_dev, st.st_ino) != (module.st_dev, module.st_ino) and file_crc32(found[0]) == crc:
            return found
        os.close(found[0])
    return None


def altlink_ok(image: ElfImage) -> bool:
    """addr2line opens the dwz file a .gnu_debugaltlink names: only let it when that is a
    regular file (an absolute path; a relative one resolves beside /proc/self/fd, where it is
    not found)."""
    alt = image.debugaltlink()
    if alt is None or not alt.startswith("/"):
        return True
    fd = open_regular(alt)
    if fd is None:
        return False
    os.close(fd)
    return True


# -- perf maps (JIT code) -----------------------------------------------------------------------


def load_perf_map(path: str) -> ModuleSymbols | None:
    """``START SIZE name`` lines (hex) of a /tmp/perf-PID.map, as written by JITs."""
    fd = open_regular(path)
    if fd is None:
        return None
    try:
        if os.fstat(fd).st_size > MAX_PERF_MAP_BYTES:
            return None
        text = _Source(fd).read(0, MAX_PERF_MAP_BYTES)
    finally:
        os.close(fd)
    rows: list[tuple[int, int, bytes]] = []
    for line in text.splitlines():
        parts = line.split(None, 2)
        if len(parts) != 3:
            continue
        try:
            rows.append((int(parts[0], 16), int(parts[1], 16), parts[2].strip()))
        except ValueError:
            continue
    mod = ModuleSymbols(None)
    mod.add(iter(rows))
    return mod
