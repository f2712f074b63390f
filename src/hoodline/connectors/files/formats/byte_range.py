"""Line-aligned byte ranges of a text file.

A range ``[start, end)`` owns the lines that *start* at an offset in it (a line starts at offset 0
or right after a ``\\n``). :func:`align_range` turns the nominal range into the exact bytes of
those lines, so consecutive ranges cover every line exactly once wherever the cuts fall.
"""

from __future__ import annotations

import re
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


_BLANK_LINE = re.compile(rb"(?m)^[ \t\r]*\n")


def count_lines_before(f: BinaryIO, offset: int) -> tuple[int, int]:
    """(lines, blank lines) in bytes ``[0, offset)``, ``offset`` a line start: for line and
    record numbers (records are the lines that are not blank: only spaces, tabs, CR)."""
    f.seek(0)
    lines = blank = 0
    left, carry = offset, b""
    while left > 0:
        chunk = f.read(min(_SCAN_CHUNK, left))
        if not chunk:
            break
        left -= len(chunk)
        data = carry + chunk
        cut = data.rfind(b"\n") + 1  # whole lines only: a blank one may span two chunks
        lines += data.count(b"\n", 0, cut)
        blank += len(_BLANK_LINE.findall(data, 0, cut))
        carry = data[cut:]
    return lines, blank
