"""The ``.gtg`` file of a Gatan K2 IS acquisition: a DigitalMicrograph tag file (DM3 or DM4)
without an image. Only its scalar tags are read, as ``{"Group.Sub.Name": value}``; the scan
shape of a STEM acquisition is ``SI Dimensions.Size Y`` x ``Size X``.

Layout (all structure words big-endian; data in the byte order the header names): a header
(version 3 or 4, the root length, the data byte order, 1 = little-endian), then the root tag
group: two flag bytes and the number of tags. Each tag is a type byte (20 group, 21 data), a
name (u2 length + bytes) and, in DM4, the tag's size in bytes (u8); a data tag continues with
``%%%%``, the number of type words and the words (u4 in DM3, u8 in DM4), then its data.
"""

from __future__ import annotations

import struct

from ltdask.exceptions import DataSetError

#: simple DM data types: code -> (struct code, size)
_SIMPLE = {
    2: ("h", 2),
    3: ("i", 4),
    4: ("H", 2),
    5: ("I", 4),
    6: ("f", 4),
    7: ("d", 8),
    8: ("?", 1),
    9: ("b", 1),
    10: ("b", 1),
    11: ("q", 8),
    12: ("Q", 8),
}
_STRUCT, _STRING, _ARRAY = 15, 18, 20
_MAX_TAGS = 1_000_000


class _Reader:
    def __init__(self, raw: bytes, path: str):
        self.raw = raw
        self.path = path
        self.pos = 0
        if len(raw) < 16:
            raise DataSetError(f"{path!r}: {len(raw)} bytes, too short for a DM tag file")
        self.version = struct.unpack_from(">I", raw, 0)[0]
        if self.version not in (3, 4):
            raise DataSetError(
                f"{path!r}: not a DigitalMicrograph tag file (version {self.version} at byte 0, "
                "expected 3 or 4)"
            )
        self.wide = self.version == 4  # DM4: 8-byte counts and tag sizes
        self.pos = 16 if self.wide else 12
        order = struct.unpack_from(">I", raw, self.pos - 4)[0]
        self.order = "<" if order == 1 else ">"

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.raw):
            raise DataSetError(f"{self.path!r}: the tag structure ends early (byte {self.pos})")
        value = struct.unpack_from(fmt, self.raw, self.pos)
        self.pos += size
        return value if len(value) > 1 else value[0]

    def count(self) -> int:
        return self.take(">Q" if self.wide else ">I")

    def group(self, prefix: str, out: dict, depth: int = 0) -> None:
        if depth > 64:
            raise DataSetError(f"{self.path!r}: tag groups nested more than 64 deep")
        self.take(">BB")  # sorted, open
        n = self.count()
        if n > _MAX_TAGS:
            raise DataSetError(f"{self.path!r}: a tag group claims {n} tags")
        for i in range(n):
            kind = self.take(">B")
            name_len = self.take(">H")
            name = self.raw[self.pos : self.pos + name_len].decode("latin-1")
            self.pos += name_len
            key = f"{prefix}{name or i}"
            size = self.take(">Q") if self.wide else None
            end = None if size is None else self.pos + size
            if kind == 20:
                self.group(key + ".", out, depth + 1)
            elif kind == 21:
                self.data(key, out)
            elif kind == 0:
                return
            else:
                raise DataSetError(
                    f"{self.path!r}: tag {key!r} has type byte {kind} at byte {self.pos}; "
                    "expected 20 (group) or 21 (data)"
                )
            if end is not None:
                self.pos = end

    def data(self, key: str, out: dict) -> None:
        if self.raw[self.pos : self.pos + 4] != b"%%%%":
            raise DataSetError(f"{self.path!r}: data tag {key!r} lacks its '%%%%' marker")
        self.pos += 4
        n = self.count()
        if n > 1024:
            raise DataSetError(f"{self.path!r}: data tag {key!r} claims {n} type words")
        info = [self.count() for _ in range(n)]
        if not info:
            return
        code = info[0]
        if code in _SIMPLE:
            fmt, _ = _SIMPLE[code]
            out[key] = self.take(self.order + fmt)
        else:
            self.pos += self._size(info, key)

    def _size(self, info: list[int], key: str) -> int:
        """Bytes of a data tag that is not kept (strings, arrays, structs)."""
        code = info[0]
        if code == _STRING:
            return 2 * info[1]
        if code == _STRUCT:
            fields = info[2]
            return sum(_SIMPLE[info[4 + 2 * k]][1] for k in range(fields))
        if code == _ARRAY:
            elem = info[1]
            if elem == _STRUCT:
                fields = info[3]
                size = sum(_SIMPLE[info[5 + 2 * k]][1] for k in range(fields))
                return size * info[-1]
            if elem in _SIMPLE:
                return _SIMPLE[elem][1] * info[2]
        raise DataSetError(f"{self.path!r}: data tag {key!r} has an unknown type {info}")


def read_tags(path: str) -> dict:
    """The scalar tags of a DM3/DM4 tag file: ``{"Group.Name": value}``."""
    with open(path, "rb") as f:
        raw = f.read()
    reader = _Reader(raw, path)
    out: dict = {}
    try:
        reader.group("", out)
    except (KeyError, IndexError, struct.error) as e:
        raise DataSetError(f"{path!r}: malformed tag structure ({type(e).__name__}: {e})") from None
    return out


def scan_shape(tags: dict) -> tuple[int, int] | None:
    """``(Size Y, Size X)`` of the ``SI Dimensions`` group (a STEM scan), or None."""
    y = tags.get("SI Dimensions.Size Y")
    x = tags.get("SI Dimensions.Size X")
    if y is None or x is None:
        return None
    return int(y), int(x)
