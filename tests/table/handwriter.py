"""A deliberately simple copy-on-write writer for table-meta tests.

Builds tables by hand with pyarrow + the timeline/commit/marker APIs (no write client), so the
metadata and read layer can be checked against hudi-rs independently of table-write's code.
Record key column: ``id`` (string). Partition values come from the partition path.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodline.table.commit_metadata import CommitMetadata, WriteStat
from hoodline.table.fs_view import base_file_name
from hoodline.table.instant import Instant
from hoodline.table.markers import Markers
from hoodline.table.schema import META_COLUMNS, arrow_to_avro_schema_json
from hoodline.table.table import HudiTable

Group = tuple[str, str]  # (partition path, file id)


@dataclass
class Pending:
    ts: str
    instant: Instant
    stats: dict[str, list[WriteStat]] = field(default_factory=dict)
    schema: pa.Schema | None = None


class HandWriter:
    def __init__(self, table: HudiTable) -> None:
        self.table = table
        self.attempt = 0

    def start(self) -> Pending:
        ts = self.table.new_instant_time()
        tl = self.table.timeline
        inst = tl.transition_to_inflight(tl.create_requested("commit", ts))
        return Pending(ts, inst)

    def _current(self, group: Group) -> pa.Table | None:
        part, fid = group
        s = self.table.fs_view().write_slice(part, fid)
        if s is None:
            return None
        return pq.read_table(self.table.absolute(s.base_file))

    def write_group(
        self,
        p: Pending,
        group: Group,
        rows: pa.Table | None = None,
        delete_keys: Sequence[str] = (),
    ) -> str:
        """Write the new version of one file group: old rows merged with ``rows`` (by id)."""
        part, fid = group
        self.attempt += 1
        name = base_file_name(fid, f"0-{self.attempt}-0", p.ts)
        old = self._current(group)
        n_new = rows.num_rows if rows is not None else 0
        if rows is not None:
            new_meta = {
                "_hoodie_commit_time": pa.array([p.ts] * n_new),
                "_hoodie_commit_seqno": pa.array([f"{p.ts}_0_{i}" for i in range(n_new)]),
                "_hoodie_record_key": rows.column("id").cast(pa.string()),
                "_hoodie_partition_path": pa.array([part] * n_new),
                "_hoodie_file_name": pa.array([name] * n_new),
            }
            new = pa.Table.from_arrays(
                [*new_meta.values(), *rows.columns], names=[*new_meta, *rows.column_names]
            )
        else:
            new = None
        pieces = []
        updated = 0
        if old is not None:
            new_ids = rows.column("id").to_pylist() if rows is not None else []
            drop = pa.array(list(delete_keys) + new_ids, pa.string())
            keep_mask = pc.invert(pc.is_in(old.column("_hoodie_record_key"), value_set=drop))
            is_update = pc.is_in(
                old.column("_hoodie_record_key"), value_set=pa.array(new_ids, pa.string())
            )
            updated = pc.sum(is_update.cast(pa.int64())).as_py() or 0
            kept = old.filter(keep_mask)
            kept = kept.set_column(
                kept.column_names.index("_hoodie_file_name"),
                "_hoodie_file_name",
                pa.array([name] * kept.num_rows, pa.string()),
            )
            pieces.append(kept)
        if new is not None:
            pieces.append(new)
        merged = pa.concat_tables(pieces, promote_options="default")
        assert merged.column_names[:5] == list(META_COLUMNS)
        Markers(self.table, p.ts).create(part, name, "MERGE" if old is not None else "CREATE")
        path = self.table.absolute(f"{part}/{name}" if part else name)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(merged, path)
        size = os.path.getsize(path)
        prev = self.table.fs_view().write_slice(part, fid)
        stat = WriteStat(
            file_id=fid,
            path=f"{part}/{name}" if part else name,
            prev_commit=prev.base_instant if prev else None,
            num_writes=merged.num_rows,
            num_deletes=len(delete_keys),
            num_update_writes=updated,
            num_inserts=n_new - updated,
            total_write_bytes=size,
            total_write_errors=0,
            partition_path=part,
            file_size_in_bytes=size,
        )
        p.stats.setdefault(part, []).append(stat)
        data_schema = pa.schema([f for f in merged.schema if f.name not in META_COLUMNS])
        p.schema = data_schema
        return stat.path

    def commit(self, p: Pending, extra: Mapping[str, str] | None = None, op: str = "UPSERT") -> str:
        assert p.schema is not None
        md = CommitMetadata(
            p.stats, op, {"schema": arrow_to_avro_schema_json(p.schema, self.table.config.name)}
        )
        self.table.timeline.complete(p.instant, md, extra_metadata=extra)
        Markers(self.table, p.ts).delete_all()
        return p.ts

    def upsert(
        self,
        groups: Mapping[Group, pa.Table | None],
        deletes: Mapping[Group, Sequence[str]] | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> str:
        p = self.start()
        deletes = deletes or {}
        for g in sorted(set(groups) | set(deletes)):
            self.write_group(p, g, groups.get(g), deletes.get(g, ()))
        return self.commit(p, extra)


def rows(
    ids: Sequence[str], region: str, val: Sequence[int], **extra: Sequence[object]
) -> pa.Table:
    cols: dict[str, pa.Array] = {
        "id": pa.array(list(ids), pa.string()),
        "region": pa.array([region] * len(ids), pa.string()),
        "val": pa.array(list(val), pa.int64()),
    }
    for k, v in extra.items():
        cols[k] = pa.array(list(v))
    return pa.table(cols)
