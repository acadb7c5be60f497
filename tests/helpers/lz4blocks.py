"""LZ4 blocks written sequence by sequence, for tests of the decoders' bounds checks."""

from __future__ import annotations


def lz4_sequences(*seqs) -> bytes:
    """LZ4 block bytes from (literals, offset, match length) sequences (offset None: last)."""
    out = bytearray()
    for literals, offset, length in seqs:
        lit = len(literals)
        token = (min(lit, 15) << 4) | (0 if offset is None else min(length - 4, 15))
        out.append(token)
        if lit >= 15:
            out += b"\xff" * ((lit - 15) // 255) + bytes([(lit - 15) % 255])
        out += literals
        if offset is not None:
            out += offset.to_bytes(2, "little")
            if length - 4 >= 15:
                out += b"\xff" * ((length - 19) // 255) + bytes([(length - 19) % 255])
    return bytes(out)
