"""The tag tree of Gatan DigitalMicrograph ``.dm3`` / ``.dm4`` files.

A DM file is a header and one tree of tags; every structural number is big-endian, 4 bytes
wide in DM3 and 8 bytes wide in DM4:

* header: version (u4: 3 or 4), file size (u4 / u8), byte order of the tag values (u4,
  1 = little-endian), then the root group;
* group: sorted (u1), open (u1), number of tags, then the tags;
* tag: kind (u1: 20 = group, 21 = data), label length (u2), label; DM4 then has the size
  of the rest of the tag (u8); then a group, or for data ``%%%%``, the number of
  definition words, the words, and the value bytes in the file's byte order.

Definition words: ``[t]`` a simple value of type ``t``; ``[18, n]`` a string;
``[15, 0, f, (0, t) x f]`` a struct of `f` fields; ``[20, t, n]`` an array of `n` values;
``[20, 15, 0, f, (0, t) x f, n]`` an array of `n` structs.

Arrays are not read here, only located (`ArrayTag`): the image data is one of them, and
is mapped straight from the file by the reader.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ltdask.exceptions import DataSetError
from ltdask.io.checks import Signature, signature_of

#: value type code -> struct format character (without byte order)
VALUE_TYPES = {
    2: "h",
    3: "i",
    4: "H",
    5: "I",
    6: "f",
    7: "d",
    8: "?",
    9: "b",
    10: "B",
    11: "q",
    12: "Q",
}
STRUCT, STRING, ARRAY = 15, 18, 20
GROUP_TAG, DATA_TAG = 20, 21
#: arrays up to this many elements are read at open time (units, names); larger ones located
SMALL_ARRAY = 4096
MAX_DEPTH = 64


@dataclass(frozen=True)
class ArrayTag:
    """An array tag's values: `count` elements of `element_bytes` at byte `offset`."""

    offset: int
    count: int
    #: value type code of the elements (15 for structs)
    element_type: int
    element_bytes: int
    #: the values, for small arrays of simple types (None otherwise)
    values: tuple | None = None

    @property
    def nbytes(self) -> int:
        return self.count * self.element_bytes

    def text(self) -> str:
        """The values as a string (DM stores text as arrays of UTF-16 code units)."""
        if self.values is None:
            return ""
        if self.element_type in (4, 2):
            units = np.array(self.values, dtype=np.uint16)
            return units.tobytes().decode("utf-16-le", errors="replace").rstrip("\0")
        if self.element_type in (9, 10):
            return bytes(v & 0xFF for v in self.values).decode("latin-1").rstrip("\0")
        return ""


class TagGroup:
    """A group of tags: ``(label, value)`` pairs in file order; unnamed tags have label ``""``.

    Values are a `TagGroup`, a number, a bool, a tuple (struct), a str or an `ArrayTag`.
    """

    def __init__(self, entries: list[tuple[str, object]]):
        self.entries = entries

    def get(self, label: str, default=None):
        for name, value in self.entries:
            if name == label:
                return value
        return default

    def path(self, dotted: tuple[str, ...], default=None):
        """The value at a path of labels (``("ImageData", "Data")``), or `default`."""
        node: object = self
        for label in dotted:
            if not isinstance(node, TagGroup):
                return default
            node = node.get(label, None)
            if node is None:
                return default
        return node

    def values(self) -> list:
        return [value for _, value in self.entries]

    def __iter__(self) -> Iterator[tuple[str, object]]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class DMFile:
    """A parsed DM file: its version, byte order and tag tree."""

    path: str
    version: int
    #: byte order of tag values and image data: "<" or ">"
    byte_order: str
    root: TagGroup
    signature: Signature


class _Parser:
    def __init__(self, buf, path: str, version: int, order: str):
        self.buf = buf
        self.size = len(buf)
        self.path = path
        self.count_fmt = ">Q" if version == 4 else ">I"
        self.count_bytes = 8 if version == 4 else 4
        self.order = order
        self.pos = 0

    def fail(self, what: str) -> DataSetError:
        return DataSetError(f"{self.path!r}: malformed DM tag tree at byte {self.pos}: {what}")

    def take(self, fmt: str) -> tuple:
        n = struct.calcsize(fmt)
        if self.pos + n > self.size:
            raise DataSetError(
                f"{self.path!r} is truncated: the tag tree needs bytes {self.pos}..{self.pos + n}"
                f", the file has {self.size}"
            )
        values = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return values

    def count(self) -> int:
        return self.take(self.count_fmt)[0]

    def group(self, depth: int) -> TagGroup:
        if depth > MAX_DEPTH:
            raise self.fail(f"groups nested more than {MAX_DEPTH} deep")
        self.take(">BB")  # sorted, open
        ntags = self.count()
        # every tag takes at least 3 bytes: a count beyond that is a hostile header
        if ntags > (self.size - self.pos) // 3:
            raise self.fail(f"a group of {ntags} tags, more than the rest of the file can hold")
        entries: list[tuple[str, object]] = []
        for _ in range(ntags):
            kind, length = self.take(">BH")
            label = bytes(self.take(f">{length}s")[0]).decode("latin-1")
            if self.count_bytes == 8:
                self.count()  # DM4: the size of the rest of the tag
            if kind == GROUP_TAG:
                entries.append((label, self.group(depth + 1)))
            elif kind == DATA_TAG:
                entries.append((label, self.data(label)))
            else:
                raise self.fail(f"tag {label!r} has kind {kind}; expected 20 (group) or 21 (data)")
        return TagGroup(entries)

    def scalar(self, code: int):
        fmt = VALUE_TYPES.get(code)
        if fmt is None:
            raise self.fail(f"unknown value type {code}")
        return self.take(self.order + fmt)[0]

    def struct_fields(self, words: list[int], what: str) -> list[int]:
        """The field types of a struct definition ``[0, f, (0, t) x f]``."""
        if len(words) < 2 or len(words) != 2 + 2 * words[1]:
            raise self.fail(f"{what}: a struct definition of {len(words)} words is inconsistent")
        types = words[3::2]
        for t in types:
            if t not in VALUE_TYPES:
                raise self.fail(f"{what}: a struct field of type {t} is not supported")
        return types

    def data(self, label: str):
        if bytes(self.take(">4s")[0]) != b"%%%%":
            raise self.fail(f"data tag {label!r} does not start with '%%%%'")
        nwords = self.count()
        if not 1 <= nwords <= min(1 << 16, (self.size - self.pos) // self.count_bytes):
            raise self.fail(f"data tag {label!r} has {nwords} definition words")
        words = [self.count() for _ in range(nwords)]
        kind = words[0]
        if nwords == 1:
            return self.scalar(kind)
        if kind == STRING and nwords == 2:
            n = self.skip(words[1], 1, label)
            return bytes(self.buf[n : n + words[1]]).decode("latin-1")
        if kind == STRUCT:
            return tuple(self.scalar(t) for t in self.struct_fields(words[1:], label))
        if kind == ARRAY and nwords >= 3:
            element, count = words[1], words[-1]
            if element == STRUCT:
                types = self.struct_fields(words[2:-1], label)
                element_bytes = sum(struct.calcsize(VALUE_TYPES[t]) for t in types)
                offset = self.skip(count, element_bytes, label)
                return ArrayTag(offset, count, STRUCT, element_bytes)
            if element not in VALUE_TYPES or nwords != 3:
                raise self.fail(f"data tag {label!r}: arrays of type {element} are not supported")
            fmt = VALUE_TYPES[element]
            element_bytes = struct.calcsize(fmt)
            offset = self.skip(count, element_bytes, label)
            values = None
            if count <= SMALL_ARRAY:
                values = struct.unpack_from(f"{self.order}{count}{fmt}", self.buf, offset)
            return ArrayTag(offset, count, element, element_bytes, values)
        raise self.fail(f"data tag {label!r} has an unknown definition {words[:8]}")

    def skip(self, count: int, element_bytes: int, label: str) -> int:
        """Step over `count` values of `element_bytes`; returns where they start."""
        start = self.pos
        if count * element_bytes > self.size - start:
            raise DataSetError(
                f"{self.path!r} is truncated or its tag {label!r} is wrong: {count} values of "
                f"{element_bytes} bytes from byte {start} need {count * element_bytes} bytes, "
                f"the file has {self.size - start} left"
            )
        self.pos = start + count * element_bytes
        return start


def read_dm(path: str) -> DMFile:
    """Parse the header and the tag tree of the DM3/DM4 file at `path` (the image data is
    located, not read).

    Raises
    ------
    ltdask.DataSetError
        Not a DM3/DM4 file, or a malformed or truncated tag tree.
    """
    with open(path, "rb") as f:
        signature = signature_of(os.fstat(f.fileno()))
        head = f.read(16)
        if len(head) < 16:
            raise DataSetError(f"{path!r} is not a DM3/DM4 file: only {len(head)} bytes")
        version = struct.unpack_from(">I", head, 0)[0]
        if version not in (3, 4):
            raise DataSetError(
                f"{path!r} is not a DM3/DM4 file: it starts with version {version}, expected 3 or 4"
            )
        # the header's file-size field is not checked: writers disagree on what it counts
        flag_at = 8 if version == 3 else 12
        flag = struct.unpack_from(">I", head, flag_at)[0]
        if flag not in (0, 1):
            raise DataSetError(
                f"{path!r}: the byte order flag of the DM{version} header is {flag}; expected "
                "1 (little-endian) or 0 (big-endian)"
            )
        order = "<" if flag == 1 else ">"
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            parser = _Parser(buf, path, version, order)
            parser.pos = flag_at + 4
            root = parser.group(0)
    return DMFile(path, version, order, root, signature)


def finite(value) -> float | None:
    """`value` as a finite float, or None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
