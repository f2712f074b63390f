"""A Parquet file read one row group after the other, with columns the caller holds already.

A merge that holds one row group of an old base file at a time (a compaction, a copy-on-write
write that replaces rows) reads the file this way: it has read some whole columns before --
the record keys, to decide what the merge does -- and each row group takes its rows of those
instead of reading them again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq


def row_groups(
    pf: pq.ParquetFile,
    columns: Sequence[str],
    held: Mapping[str, pa.Array | pa.ChunkedArray],
    use_threads: bool = False,
) -> Iterator[pa.Table]:
    """Each row group of ``pf`` in order: ``columns`` read from it (those named in ``held``
    are not read), then the row group's rows of every ``held`` column (whole-file columns, in
    file order) appended."""
    wanted = [c for c in columns if c not in held]
    at = 0
    for i in range(pf.num_row_groups):
        data = pf.read_row_group(i, columns=wanted, use_threads=use_threads)
        n = data.num_rows
        for name, column in held.items():
            data = data.append_column(name, column.slice(at, n))
        at += n
        yield data
