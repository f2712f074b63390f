"""The pipeline configuration (TOML) of the event demo and the crash tests."""

from __future__ import annotations

from pathlib import Path

from hoodline.config import ErrorTolerance
from hoodline.demo.events import (
    DELETE_FIELD,
    EVENT_SCHEMA,
    PARTITION_FIELD,
    PRECOMBINE_FIELD,
    RECORD_KEY,
)
from hoodline.pipeline.config import SourceFormat
from hoodline.pipeline.plugins import SourceType
from hoodline.table.properties import IndexType, TableType
from hoodline.table.write.operation import WriteOperation


def event_pipeline_toml(
    *,
    bootstrap: str,
    topic: str,
    table_path: Path | str,
    operation: WriteOperation = WriteOperation.UPSERT,
    index: IndexType = IndexType.BUCKET,
    master: str = "local[2]",
    readers: int = 2,
    bucket_count: int = 2,
    max_records: int = 2000,
    min_interval: str = "500ms",
    max_interval: str = "2s",
    tolerance: ErrorTolerance = ErrorTolerance.ALL,
    spark_conf: dict[str, str] | None = None,
    table_type: TableType = TableType.COPY_ON_WRITE,
    table_options: dict[str, str] | None = None,
    table_storage: dict[str, str] | None = None,
) -> str:
    """TOML for the event stream of :mod:`hoodline.demo.events` read from ``topic``.

    Upserts keyed by ``id``, partitioned by ``region``, newest ``seq`` wins, ``_deleted`` records
    (and tombstones) delete; with ``WriteOperation.INSERT`` every record is appended.
    """
    schema = "\n".join(f'{name} = "{typ}"' for name, typ in EVENT_SCHEMA.items())
    delete = f'delete-field = "{DELETE_FIELD}"' if operation is WriteOperation.UPSERT else ""
    conf = {"spark.ui.enabled": "false", **(spark_conf or {})}
    conf_lines = "\n".join(f'"{k}" = "{v}"' for k, v in conf.items())
    table_lines = "\n".join(f'"{k}" = "{v}"' for k, v in (table_options or {}).items())
    storage_lines = "\n".join(f'"{k}" = "{v}"' for k, v in (table_storage or {}).items())
    return f"""# hoodline event demo pipeline
[source]
type = "{SourceType.KAFKA.config_text}"
format = "{SourceFormat.JSON.config_text}"

[source.options]
topic = "{topic}"
"properties.bootstrap.servers" = "{bootstrap}"
"scan.startup.mode" = "earliest-offset"

[table]
path = "{table_path}"
record-key = ["{RECORD_KEY}"]
partition-fields = ["{PARTITION_FIELD}"]
precombine-field = "{PRECOMBINE_FIELD}"
operation = "{operation.config_text}"
type = "{table_type.config_text}"
index = "{index.config_text}"
bucket-count = {bucket_count}
{delete}

[table.options]
{table_lines}

[table.storage]
{storage_lines}

[schema]
{schema}

[runtime]
master = "{master}"
reader-parallelism = {readers}
round.max-records = {max_records}
round.min-interval = "{min_interval}"
round.max-interval = "{max_interval}"
max-consecutive-failures = 6
retry-backoff = "200ms"
retry-backoff-max = "2s"

[runtime.spark-conf]
{conf_lines}

[errors]
tolerance = "{tolerance.config_text}"
"""
