"""Compressed JSON-lines and CSV files (``events.jsonl.gz``, ``orders.csv.zst``, ...).

The codec follows from the name's last suffix: ``.gz`` (gzip), ``.bz2`` (bzip2), ``.zst``
(Zstandard), decoded by pyarrow. A compressed file cannot be cut into byte ranges, so it is one
split. CSV is read as a stream. JSON lines are read by seeking within the text, so the text is
first decompressed into a spooled temporary file: in memory up to :data:`SPOOL_IN_MEMORY` bytes,
then on local disk (the temporary directory), and deleted when the split is read.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import BinaryIO, cast

import pyarrow as pa

from hoodline.connectors.files.location import open_binary

#: Name suffix -> pyarrow codec name.
CODECS: dict[str, str] = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd"}

#: Decompressed JSON lines stay in memory up to this size, then spill to a temporary file.
SPOOL_IN_MEMORY = 64 * 1024 * 1024

_COPY_CHUNK = 1024 * 1024


def codec_of(path: str) -> str | None:
    """The codec of a compressed file by its name, or None for a plain one."""
    name = path.rsplit("/", 1)[-1].lower()
    for suffix, codec in CODECS.items():
        if name.endswith(suffix):
            return codec
    return None


def with_compressed(extensions: tuple[str, ...]) -> tuple[str, ...]:
    """``extensions`` followed by each of them with every compression suffix."""
    return extensions + tuple(e + s for e in extensions for s in CODECS)


def open_stream(path: str, codec: str) -> BinaryIO:
    """The decompressed bytes of ``path`` as a forward-only stream."""
    return cast(BinaryIO, pa.CompressedInputStream(open_binary(path), codec))


def open_decompressed(path: str, codec: str) -> tuple[BinaryIO, int]:
    """The decompressed bytes of ``path`` as a seekable file, and their length."""
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY, prefix="hoodline-")
    try:
        with open_stream(path, codec) as stream:
            shutil.copyfileobj(stream, spool, _COPY_CHUNK)
        size = spool.tell()
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    return cast(BinaryIO, spool), size


def describe_extensions(extensions: tuple[str, ...]) -> str:
    """``extensions`` for messages, with compressed variants of listed ones folded in."""
    plain = [e for e in extensions if codec_of(e) is None]
    folded = set(with_compressed(tuple(plain))) - set(plain)
    text = ", ".join(plain)
    if folded and folded <= set(extensions):
        text += f" (each also {', '.join(CODECS)})"
        extra = [e for e in extensions if codec_of(e) is not None and e not in folded]
    else:
        extra = [e for e in extensions if codec_of(e) is not None]
    return ", ".join([text, *extra]) if text else ", ".join(extra)
