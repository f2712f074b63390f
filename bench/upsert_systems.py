"""The systems of the upsert benchmark: load the base table, upsert the batch, read back.

Each system is a class constructed on a path (creating nothing yet, or opening the table found
there) with ``load(base)``, ``upsert(batch) -> dict`` (facts such as bytes rewritten, taken from
the system's own commit record) and ``read() -> pa.Table``. The parent runs the load and the
upsert of each system in separate fresh processes (see :mod:`bench.upsert`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from bench.upsert_data import KEY, ORDERING, PARTITION
from hoodline.table.properties import IndexType, TableType


class System(Protocol):
    def load(self, base: pa.Table) -> None: ...
    def upsert(self, batch: pa.Table) -> dict[str, Any]: ...
    def read(self) -> pa.Table: ...


class Hoodline:
    """hoodline's table layer (``WriteClient``, with ``options``): bulk_insert the base, upsert
    the batch."""

    def __init__(
        self,
        path: Path,
        index: IndexType,
        buckets: int,
        options: dict[str, object] | None = None,
        table_type: TableType = TableType.COPY_ON_WRITE,
    ) -> None:
        from hoodline.table.properties import TableConfig
        from hoodline.table.table import HudiTable

        self.path = path
        self.options = options
        if path.exists():
            self.table = HudiTable.open(path)
            return
        config = TableConfig(
            name="bench_upsert",
            record_key_fields=(KEY,),
            partition_fields=(PARTITION,),
            precombine_field=ORDERING,
            index_type=index,
            bucket_count=buckets,
            table_type=table_type,
        )
        self.table = HudiTable.create(path, config)

    def load(self, base: pa.Table) -> None:
        from hoodline.table.write.client import WriteClient

        with WriteClient(self.table, self.options) as client:
            client.bulk_insert(base)

    def upsert(self, batch: pa.Table) -> dict[str, Any]:
        from hoodline.table.write.client import WriteClient

        with WriteClient(self.table, self.options) as client:
            ts = client.upsert(batch)
        inst = self.table.timeline.find(ts, self.table.write_action)
        assert inst is not None
        meta = self.table.timeline.read_commit_metadata(inst)
        stats = [s for group in meta.partition_to_write_stats.values() for s in group]
        return {
            "bytes_rewritten": sum(s.total_write_bytes for s in stats),
            "files_written": len(stats),
            "files_merged": sum(1 for s in stats if s.prev_commit),
            "rows_updated": sum(s.num_update_writes for s in stats),
            "rows_inserted": sum(s.num_inserts for s in stats),
            "rows_in_written_files": sum(s.num_writes for s in stats),
        }

    def compact(self) -> dict[str, Any]:
        """Merge-on-read: compact the table after the upsert (timed apart from it)."""
        from hoodline.table.write.client import WriteClient

        t0 = time.perf_counter()
        cpu0 = time.process_time()
        with WriteClient(self.table, self.options) as client:
            done = client.compact()
        assert done is not None
        return {"compact_s": time.perf_counter() - t0, "compact_cpu_s": time.process_time() - cpu0}

    def read(self) -> pa.Table:
        from hoodline.table.read import read_snapshot

        data = read_snapshot(self.table)
        return data.drop_columns([c for c in data.column_names if c.startswith("_hoodie_")])


class Delta:
    """delta-rs: ``write_deltalake`` partitioned by region, then ``DeltaTable.merge``
    (when matched update all, when not matched insert all) on the key."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def load(self, base: pa.Table) -> None:
        from deltalake import write_deltalake

        write_deltalake(self.path, base, partition_by=[PARTITION])

    def _files(self) -> dict[str, int]:
        from deltalake import DeltaTable

        actions = pa.table(DeltaTable(self.path).get_add_actions(flatten=True))
        return dict(
            zip(
                actions.column("path").to_pylist(),
                actions.column("size_bytes").to_pylist(),
                strict=True,
            )
        )

    def upsert(self, batch: pa.Table) -> dict[str, Any]:
        from deltalake import DeltaTable

        before = self._files()
        metrics = (
            DeltaTable(self.path)
            .merge(
                source=batch,
                predicate=f"t.{KEY} = s.{KEY}",
                source_alias="s",
                target_alias="t",
            )
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        after = self._files()
        added = {p: s for p, s in after.items() if p not in before}
        return {
            "bytes_rewritten": sum(added.values()),
            "files_written": len(added),
            "files_merged": int(metrics.get("num_target_files_removed", 0)),
            "rows_updated": int(metrics.get("num_target_rows_updated", 0)),
            "rows_inserted": int(metrics.get("num_target_rows_inserted", 0)),
            "rows_in_written_files": int(metrics.get("num_output_rows", 0)),
        }

    def read(self) -> pa.Table:
        from deltalake import DeltaTable

        return pa.table(DeltaTable(self.path).to_pyarrow_table())


class Iceberg:
    """pyiceberg with its SQL catalog on SQLite: identity-partitioned by region, ``append`` the
    base, ``upsert`` the batch joined on the key."""

    def __init__(self, path: Path) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        path.mkdir(parents=True, exist_ok=True)
        self.catalog = SqlCatalog(
            "bench",
            uri=f"sqlite:///{path / 'catalog.db'}",
            warehouse=f"file://{path / 'warehouse'}",
        )
        self.table: Any = None
        if self.catalog.namespace_exists("bench"):
            self.table = self.catalog.load_table("bench.upsert")
        else:
            self.catalog.create_namespace("bench")

    def load(self, base: pa.Table) -> None:
        self.table = self.catalog.create_table("bench.upsert", schema=base.schema)
        with self.table.update_spec() as spec:
            spec.add_identity(PARTITION)
        self.table.append(base)

    def upsert(self, batch: pa.Table) -> dict[str, Any]:
        before = self.table.current_snapshot().snapshot_id
        result = self.table.upsert(batch, join_cols=[KEY])
        self.table = self.catalog.load_table("bench.upsert")
        added_bytes = added_files = deleted_files = 0
        snap = self.table.current_snapshot()
        while snap is not None and snap.snapshot_id != before:
            summary = snap.summary
            added_bytes += int(summary.get("added-files-size", 0) or 0)
            added_files += int(summary.get("added-data-files", 0) or 0)
            deleted_files += int(summary.get("deleted-data-files", 0) or 0)
            snap = (
                self.table.snapshot_by_id(snap.parent_snapshot_id)
                if snap.parent_snapshot_id
                else None
            )
        return {
            "bytes_rewritten": added_bytes,
            "files_written": added_files,
            "files_merged": deleted_files,
            "rows_updated": int(result.rows_updated),
            "rows_inserted": int(result.rows_inserted),
            "rows_in_written_files": None,
        }

    def read(self) -> pa.Table:
        return self.table.scan().to_arrow()


SYSTEMS = (
    "hoodline-bucket",
    "hoodline-bloom",
    "hoodline-mor-bucket",
    "hoodline-mor-parquet",
    "delta",
    "iceberg",
)
#: the merge-on-read system: inline compaction off, the upsert is one deltacommit
_MOR_OPTIONS: dict[str, object] = {"hoodie.compact.inline": False}


def make_system(name: str, path: Path, buckets: int) -> System:
    if name == "hoodline-bucket":
        return Hoodline(path, IndexType.BUCKET, buckets)
    if name == "hoodline-bloom":
        return Hoodline(path, IndexType.BLOOM, buckets)
    if name == "hoodline-mor-bucket":
        return Hoodline(path, IndexType.BUCKET, buckets, _MOR_OPTIONS, TableType.MERGE_ON_READ)
    if name == "hoodline-mor-parquet":  # log data blocks as Parquet files instead of Avro
        options = {**_MOR_OPTIONS, "hoodie.logfile.data.block.format": "parquet"}
        return Hoodline(path, IndexType.BUCKET, buckets, options, TableType.MERGE_ON_READ)
    if name == "delta":
        return Delta(path)
    if name == "iceberg":
        return Iceberg(path)
    raise ValueError(f"unknown system '{name}'; use one of {', '.join(SYSTEMS)}")

