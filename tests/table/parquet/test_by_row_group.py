from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from hoodline.table.parquet.by_row_group import row_groups


def test_each_row_group_takes_its_rows_of_the_held_columns(tmp_path: Path) -> None:
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"k": [f"k{i}" for i in range(25)], "v": list(range(25))}), path,
                   row_group_size=10)
    pf = pq.ParquetFile(path)
    held = pa.chunked_array([[f"h{i}" for i in range(12)], [f"h{i}" for i in range(12, 25)]])
    pieces = list(row_groups(pf, ["k", "v"], {"k": held}))
    assert [p.num_rows for p in pieces] == [10, 10, 5]
    assert all(p.column_names == ["v", "k"] for p in pieces)  # "k" not read: appended
    assert [k for p in pieces for k in p.column("k").to_pylist()] == [f"h{i}" for i in range(25)]
    assert [v for p in pieces for v in p.column("v").to_pylist()] == list(range(25))
