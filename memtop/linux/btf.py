"""The little memtop needs from the kernel's BTF (/sys/kernel/btf/vmlinux): a struct member's byte
offset and a raw tracepoint's prototype.

memtop compiles against a stand-in header tree of another kernel version, so its programs never
dereference a kernel struct by the headers' layout. Where a program must (the slab tracer reads
``struct kmem_cache``'s name from a raw tracepoint's argument), the offset comes from the running
kernel's own type information, read here, and is passed in as a -D flag; a kernel whose BTF lacks
the type, or a raw tracepoint whose prototype is not the one the program reads, gets the
program's slower path instead (regular tracepoints), never a guess.

The format (Documentation/bpf/btf.rst): a header, then the type section (type ids from 1, each a
12-byte ``btf_type`` and kind-specific data after it), then the string section. Parsed in one
pass over the types; only the names asked for are decoded.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

VMLINUX = Path("/sys/kernel/btf/vmlinux")
MAGIC = 0xEB9F

# kinds (include/uapi/linux/btf.h)
INT, PTR, ARRAY, STRUCT, UNION, ENUM, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT = range(1, 12)
FUNC, FUNC_PROTO, VAR, DATASEC, FLOAT, DECL_TAG, TYPE_TAG, ENUM64 = range(12, 20)

#: bytes of kind-specific data after a btf_type: fixed, or per member (vlen)
_EXTRA = {INT: 4, ARRAY: 12, VAR: 4, DECL_TAG: 4}
_PER_MEMBER = {STRUCT: 12, UNION: 12, ENUM: 8, FUNC_PROTO: 8, DATASEC: 12, ENUM64: 12}
_QUALIFIERS = {VOLATILE: "volatile", CONST: "const", RESTRICT: "restrict"}


class BtfError(Exception):
    pass


@dataclass(frozen=True)
class _Type:
    kind: int
    name: str
    vlen: int
    kind_flag: bool
    #: size (INT, STRUCT, UNION, ENUM) or the referenced type (PTR, TYPEDEF, qualifiers, FUNC...)
    size_or_type: int
    #: STRUCT/UNION: (name, type, bit offset); FUNC_PROTO: ("", type, 0) per parameter
    members: tuple[tuple[str, int, int], ...] = ()


class Btf:
    """The types of one BTF blob, decoded on demand."""

    def __init__(self, data: bytes) -> None:
        if len(data) < 24:
            raise BtfError("BTF too short")
        magic, _version, _flags, hdr_len = struct.unpack_from("<HBBI", data, 0)
        if magic != MAGIC:
            raise BtfError(f"not BTF (magic 0x{magic:x})")
        type_off, type_len, str_off, str_len = struct.unpack_from("<IIII", data, 8)
        if max(hdr_len + type_off + type_len, hdr_len + str_off + str_len) > len(data):
            raise BtfError("BTF sections run past its end")
        self._types = memoryview(data)[hdr_len + type_off : hdr_len + type_off + type_len]
        self._strings = bytes(data[hdr_len + str_off : hdr_len + str_off + str_len])
        self._offsets: list[int] = [0]  # type id -> offset in the type section (id 0 is void)
        pos, end = 0, len(self._types)
        unpack = struct.Struct("<III").unpack_from
        while pos + 12 <= end:
            self._offsets.append(pos)
            _name, info, _size = unpack(self._types, pos)
            kind, vlen = (info >> 24) & 0x1F, info & 0xFFFF
            pos += 12 + _EXTRA.get(kind, 0) + _PER_MEMBER.get(kind, 0) * vlen
        if pos != end:
            raise BtfError("BTF type section does not parse")

    @classmethod
    def vmlinux(cls, path: Path = VMLINUX) -> Btf:
        try:
            return cls(path.read_bytes())
        except OSError as exc:
            raise BtfError(f"cannot read {path}: {exc.strerror}") from exc

    def _string(self, off: int) -> str:
        end = self._strings.find(b"\0", off)
        return self._strings[off : end if end >= 0 else len(self._strings)].decode("ascii", "replace")

    def type(self, type_id: int) -> _Type:
        if type_id == 0:
            return _Type(0, "void", 0, False, 0)
        pos = self._offsets[type_id]
        name_off, info, size = struct.unpack_from("<III", self._types, pos)
        kind, vlen, kind_flag = (info >> 24) & 0x1F, info & 0xFFFF, bool(info >> 31)
        members: tuple[tuple[str, int, int], ...] = ()
        if kind in (STRUCT, UNION):
            raw = [struct.unpack_from("<III", self._types, pos + 12 + 12 * i) for i in range(vlen)]
            # with kind_flag, the offset's low 24 bits are the bit offset (the high 8: bitfield size)
            members = tuple((self._string(n), t, (o & 0xFFFFFF) if kind_flag else o) for n, t, o in raw)
        elif kind == FUNC_PROTO:
            members = tuple(
                ("", struct.unpack_from("<II", self._types, pos + 12 + 8 * i)[1], 0) for i in range(vlen)
            )
        return _Type(kind, self._string(name_off), vlen, kind_flag, size, members)

    def find(self, kind: int, name: str) -> int | None:
        """The id of the first type of ``kind`` named ``name``."""
        want = b"\0" + name.encode() + b"\0"
        offs = set()
        at = self._strings.find(want)
        while at >= 0:
            offs.add(at + 1)
            at = self._strings.find(want, at + 1)
        if self._strings.startswith(want[1:]):
            offs.add(0)
        if not offs:
            return None
        for type_id in range(1, len(self._offsets)):
            name_off, info, _ = struct.unpack_from("<III", self._types, self._offsets[type_id])
            if name_off in offs and (info >> 24) & 0x1F == kind:
                return type_id
        return None

    def member_offset(self, struct_name: str, member: str) -> int | None:
        """Byte offset of ``struct_name.member`` (a direct member, not a bitfield); None when the
        struct or member is not there."""
        type_id = self.find(STRUCT, struct_name)
        if type_id is None:
            return None
        for name, _t, bits in self.type(type_id).members:
            if name == member:
                return bits // 8 if bits % 8 == 0 else None
        return None

    def c_type(self, type_id: int) -> str:
        """``type_id`` spelled as bpftool's C dump spells a parameter (``const struct kmem_cache *``,
        ``long unsigned int``, ``gfp_t``); function pointers and arrays are not spelled out."""
        t = self.type(type_id)
        if t.kind == PTR:
            return self.c_type(t.size_or_type) + " *"
        if t.kind in _QUALIFIERS:  # of a pointer: after its star (``const char * const``)
            inner = self.c_type(t.size_or_type)
            if self.type(t.size_or_type).kind == PTR:
                return f"{inner} {_QUALIFIERS[t.kind]}"
            return f"{_QUALIFIERS[t.kind]} {inner}"
        if t.kind in (STRUCT, UNION, ENUM, ENUM64):
            tag = {STRUCT: "struct", UNION: "union"}.get(t.kind, "enum")
            return f"{tag} {t.name}"
        if t.kind == FWD:
            return f"{'union' if t.kind_flag else 'struct'} {t.name}"
        return t.name

    def raw_tracepoint_args(self, event: str) -> list[str] | None:
        """The C types of raw tracepoint ``event``'s arguments (the ``btf_trace_<event>``
        typedef's prototype, without its leading ``void *`` context), or None when the kernel does
        not describe it."""
        type_id = self.find(TYPEDEF, f"btf_trace_{event}")
        if type_id is None:
            return None
        ptr = self.type(self.type(type_id).size_or_type)
        if ptr.kind != PTR:
            return None
        proto = self.type(ptr.size_or_type)
        if proto.kind != FUNC_PROTO:
            return None
        args = [self.c_type(t) for _n, t, _o in proto.members]
        return args[1:] if args and args[0] == "void *" else None
