"""Byte-level mutation of a model file: what a damaged download or disk gives.

Bit flips, "interesting" bytes (0x00, 0xff, 0x7f, 0x80) and little-endian int32 values (0, -1,
2^31-1, sizes) written at random offsets, chunks deleted, duplicated or inserted, truncation,
and splicing with another file.
"""

from __future__ import annotations

import struct

import numpy as np

INTERESTING32 = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x10000, 0x40000000]


def mutate(data: bytes, rng, other: bytes | None = None, count: int | None = None) -> tuple[bytes, list[str]]:
    """``count`` (1-4 by default) random byte mutations of ``data``; ``other`` is used for splicing."""
    buf = bytearray(data)
    done = []
    for _ in range(count or int(rng.integers(1, 5))):
        if not buf:
            buf = bytearray(b"\x00")
        n = len(buf)
        kind = int(rng.integers(8))
        at = int(rng.integers(n))
        if kind == 0:
            buf[at] ^= 1 << int(rng.integers(8))
            done.append("bitflip")
        elif kind == 1:
            buf[at] = int(rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x01]))
            done.append("byte")
        elif kind == 2 and n >= 4:
            at = min(at, n - 4) & ~3  # flatbuffers and protobuf fixed32 fields are 4-aligned
            buf[at:at + 4] = struct.pack("<I", int(rng.choice(INTERESTING32)))
            done.append("int32")
        elif kind == 3:
            del buf[at:at + int(rng.integers(1, 65))]
            done.append("delete")
        elif kind == 4:
            size = int(rng.integers(1, 65))
            buf[at:at] = buf[at:at + size]
            done.append("duplicate")
        elif kind == 5:
            buf[at:at] = bytes(rng.integers(0, 256, int(rng.integers(1, 33)), dtype=np.uint8))
            done.append("insert")
        elif kind == 6:
            del buf[int(rng.integers(max(n // 2, 1), n + 1)):]
            done.append("truncate")
        elif other:
            cut = int(rng.integers(len(other)))
            buf = buf[:at] + bytearray(other[cut:])
            done.append("splice")
        else:
            buf[at] = (buf[at] + int(rng.integers(1, 255))) & 0xFF
            done.append("byte+")
    return bytes(buf), done
