"""Reading a PNG's header, for the chart tests: is it one, and how big."""

from __future__ import annotations

import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a valid PNG; AssertionError when it is not one."""
    assert data[:8] == SIGNATURE, "not a PNG"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    width, height = struct.unpack(">II", data[16:24])
    crc = struct.unpack(">I", data[29:33])[0]
    assert zlib.crc32(data[12:29]) == crc, "IHDR checksum"
    assert data.endswith(b"IEND\xaeB`\x82"), "truncated"
    return width, height
