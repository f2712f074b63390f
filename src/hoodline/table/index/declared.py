"""Index settings of tables whose ``hoodie.properties`` do not name them.

Java Hudi (table version 6) keeps the index type and bucket count in each writer's
configuration (``hoodie.index.type``, ``hoodie.bucket.index.num.buckets``), not in the table, so a
table a Java writer created says nothing about them. hoodline records them in
``hoodie.properties`` (Java ignores the keys there). For a table without them, the writer's
settings are adopted once they agree with the file groups on disk: with the BUCKET index every
file id must name a bucket below the count; with BLOOM, a table whose file ids all name buckets
is refused, since new file groups without bucket ids would break Java's bucket index.
"""

from __future__ import annotations

import logging

from hoodline.errors import ConfigError
from hoodline.table.index.bucket import bucket_of_file_id
from hoodline.table.properties import (
    K_BUCKET_COUNT,
    K_BUCKET_HASH_FIELD,
    K_INDEX_TYPE,
    IndexType,
    loads_properties,
    properties_path,
    update_properties,
)
from hoodline.table.table import HudiTable

log = logging.getLogger(__name__)


def declares_index(table: HudiTable) -> bool:
    """Whether the table's properties name its index type."""
    props = loads_properties(properties_path(table.base_path).read_text(encoding="utf-8"))
    return bool(props.get(K_INDEX_TYPE))


def adopt_index(table: HudiTable, index_type: IndexType, bucket_count: int) -> None:
    """Check ``index_type`` / ``bucket_count`` against the table's file groups and record them
    in its properties (:class:`ConfigError` naming a file group that disagrees)."""
    file_ids = sorted({g.file_id for g in table.fs_view().file_groups()})
    buckets = {f: bucket_of_file_id(f) for f in file_ids}
    if index_type is IndexType.BUCKET:
        bad = [f for f, b in buckets.items() if b is None or b >= bucket_count]
        if bad:
            raise ConfigError(
                f"table '{table.base_path}' does not record its index; the pipeline sets the "
                f"BUCKET index with {bucket_count} buckets, but file group '{bad[0]}' "
                f"({len(bad)} of {len(file_ids)}) is not one of those buckets: set "
                "table.index and table.bucket-count as the table's Java writers have them "
                "(hoodie.index.type, hoodie.bucket.index.num.buckets)"
            )
    elif file_ids and all(b is not None for b in buckets.values()):
        raise ConfigError(
            f"table '{table.base_path}' does not record its index, and all its "
            f"{len(file_ids)} file groups carry bucket numbers (e.g. '{file_ids[0]}'): it looks "
            "written with Java's bucket index, which new BLOOM file groups would break; set "
            "table.index = 'BUCKET' and table.bucket-count as its writers have them"
        )
    changes = {K_INDEX_TYPE: index_type.value}
    if index_type is IndexType.BUCKET:
        changes[K_BUCKET_COUNT] = str(bucket_count)
        changes[K_BUCKET_HASH_FIELD] = ",".join(table.config.bucket_hash_fields)
    table.config = update_properties(table.base_path, changes)
    log.info("table '%s' did not record its index: recorded %s%s from the pipeline's settings",
             table.base_path, index_type.value,
             f" with {bucket_count} buckets" if index_type is IndexType.BUCKET else "")
