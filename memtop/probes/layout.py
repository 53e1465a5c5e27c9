"""How memtop reads the structs a BPF program hands to user space (ring buffer events, map keys
and values), declared next to the code that reads them so a test can hold each to the C struct
of the compiled program (tests/kernel/test_struct_layouts.py): the same size and every field at
the same offset with the same size. A drift reads garbage silently; the test names it.

Two kinds of declaration: a ctypes.Structure with ``C_STRUCT = "struct name_t"``, or a
:class:`Packed` for what is read with ``struct.unpack_from`` (a format without padding)."""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """``c_struct``'s fields as Python reads them: (name, offset, size) each; ``size`` is the
    whole struct's, or None when only a leading part is read."""

    c_struct: str
    fields: tuple[tuple[str, int, int], ...]
    size: int | None


@dataclass(frozen=True)
class Packed:
    """A C struct read with ``struct.unpack_from(fmt, ...)``: ``names`` for the format's items
    in order; ``whole``: the format covers the whole struct (else a leading part of it)."""

    c_struct: str
    fmt: str
    names: tuple[str, ...]
    whole: bool = True

    @property
    def layout(self) -> Layout:
        order, codes = self.fmt[0], self.fmt[1:]
        if order not in "<>=!" or len(codes) != len(self.names):
            raise ValueError(f"{self.fmt!r}: one item per name, with an explicit byte order")
        fields, offset = [], 0
        for name, code in zip(self.names, codes, strict=True):
            size = struct.calcsize(order + code)
            fields.append((name, offset, size))
            offset += size
        return Layout(self.c_struct, tuple(fields), offset if self.whole else None)

    def unpack_from(self, buffer: bytes | bytearray | memoryview, offset: int = 0) -> tuple[int, ...]:
        return struct.unpack_from(self.fmt, buffer, offset)


def of_ctypes(cls: type[ctypes.Structure]) -> Layout:
    """The layout of a ctypes.Structure that says which C struct it mirrors (``C_STRUCT``)."""
    c_struct = getattr(cls, "C_STRUCT", "")
    if not c_struct:
        raise ValueError(f"{cls.__name__} does not say which C struct it mirrors (C_STRUCT)")
    fields = []
    for name, _ctype, *_ in cls._fields_:
        desc = getattr(cls, name)
        fields.append((name, int(desc.offset), int(desc.size)))
    return Layout(c_struct, tuple(fields), ctypes.sizeof(cls))
