"""Line-aligned byte ranges of a text file.

A range ``[start, end)`` owns the lines that *start* at an offset in it (a line starts at offset 0
or right after a ``\\n``). :func:`align_range` turns the nominal range into the exact bytes of
those lines, so consecutive ranges cover every line exactly once wherever the cuts fall.
"""

from __future__ import annotations

from typing import BinaryIO

_SCAN_CHUNK = 64 * 1024


def next_line_start(f: BinaryIO, offset: int, size: int) -> int:
    """Smallest line start >= ``offset`` (``size`` if there is none)."""
    if offset <= 0:
        return 0
    if offset >= size:
        return size
    pos = offset - 1  # a line starts at `offset` iff byte offset-1 is a newline
    f.seek(pos)
    while pos < size:
        chunk = f.read(_SCAN_CHUNK)
        if not chunk:
            break
        i = chunk.find(b"\n")
        if i >= 0:
            return pos + i + 1
        pos += len(chunk)
    return size


def align_range(f: BinaryIO, start: int, end: int, size: int) -> tuple[int, int]:
    """The exact byte range ``[a, b)`` of the lines owned by the nominal range ``[start, end)``."""
    a = next_line_start(f, start, size)
    b = size if end >= size else next_line_start(f, end, size)
    return a, max(a, b)


def count_newlines_before(f: BinaryIO, offset: int) -> int:
    """Number of ``\\n`` in bytes ``[0, offset)`` (for line numbers in error messages only)."""
    f.seek(0)
    count, left = 0, offset
    while left > 0:
        chunk = f.read(min(_SCAN_CHUNK, left))
        if not chunk:
            break
        count += chunk.count(b"\n")
        left -= len(chunk)
    return count
