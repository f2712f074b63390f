"""Key generator settings a table's properties do not hold, taken from the writer's or read
from the table's own keys.

Java Hudi (table version 6) keeps the timestamp type and a custom generator's partition field
types only in each writer's configuration, and the date formats and zones in the table's
properties once a writer has set them. A hoodline writer states them all (``table.key-generator``,
``table.partition-fields``, ``[table.options]``); here they are checked against the table — a
value the table records differently is refused — and the missing ones recorded, so that later
writers (hoodline's, and Java's, which read the persisted ``hoodie.keygen.timebased.*``) agree.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from hoodline.errors import ConfigError
from hoodline.storage.ops import read_parquet, read_parquet_metadata
from hoodline.table.bloom import MAX_RECORD_KEY, MIN_RECORD_KEY
from hoodline.table.keygen.kinds import KeyGeneratorKind, PartitionKind
from hoodline.table.keygen.timestamp import timestamp_settings
from hoodline.table.properties import (
    K_CUSTOM_PARTITIONS,
    K_SINGLE_KEY_WITH_NAME,
    update_properties,
)
from hoodline.table.read import read_snapshot
from hoodline.table.table import HudiTable
from hoodline.table.write.records import RECORD_KEY

log = logging.getLogger(__name__)


def adopt_key_generator(
    table: HudiTable,
    kind: KeyGeneratorKind,
    partition_kinds: tuple[PartitionKind, ...],
    options: Mapping[str, object],
) -> None:
    """Check the writer's key generator against ``table`` and record what the table lacks
    (:class:`ConfigError` naming the setting that differs)."""
    c = table.config
    if c.key_generator is not kind:
        raise ConfigError(
            f"table '{table.base_path}' makes keys with {c.key_generator_class} "
            f"(table.key-generator = {c.key_generator.config_text!r}), but the pipeline sets "
            f"table.key-generator = {kind.config_text!r}; an existing table keeps its key "
            "generator"
        )
    changes: dict[str, str] = {}
    if kind is KeyGeneratorKind.CUSTOM:
        if not c.partition_kinds:
            changes[K_CUSTOM_PARTITIONS] = ",".join(
                f"{n}:{k.value}" for n, k in zip(c.partition_fields, partition_kinds, strict=True)
            )
        elif c.partition_kinds != partition_kinds:
            wanted = [f"{n}:{k.value}"
                      for n, k in zip(c.partition_fields, partition_kinds, strict=True)]
            raise ConfigError(
                f"table '{table.base_path}' writes partition fields as "
                f"{c.custom_partition_spec!r}, but the pipeline's table.partition-fields say "
                f"{wanted}"
            )
    recorded = timestamp_settings(c.extra)
    for key, value in timestamp_settings(options).items():
        if key not in recorded:
            changes[key] = value
        elif recorded[key] != value:
            raise ConfigError(
                f"table '{table.base_path}' records {key}={recorded[key]!r}, but the pipeline's "
                f"[table.options] set {value!r}; partition paths would differ from the "
                "table's: use the table's value"
            )
    if changes:
        table.config = update_properties(table.base_path, changes)
        log.info("table '%s': recorded the key generator settings %s from the pipeline",
                 table.base_path, ", ".join(f"{k}={v}" for k, v in sorted(changes.items())))


def detect_single_key_form(table: HudiTable) -> None:
    """For a table declared with Java's ComplexKeyGenerator over one key field, read from its
    stored keys whether they carry the field name (``id:5``, as Java 0.14.0 writes them) or not
    (``5``, after HUDI-7001) and record it, so hoodline writes the same form. A table without
    files takes the bare form of current Java versions."""
    c = table.config
    if not c.complex_single_key or c.single_key_with_field_name is not None:
        return
    keys = stored_keys_sample(table)
    prefix = f"{c.record_key_fields[0]}:"
    with_name = bool(keys) and all(k.startswith(prefix) for k in keys)
    table.config = update_properties(
        table.base_path, {K_SINGLE_KEY_WITH_NAME: str(with_name).lower()}
    )
    log.info("table '%s' is declared ComplexKeyGenerator over the key field '%s': its keys "
             "read %s (from %s), and hoodline writes them so", table.base_path,
             c.record_key_fields[0], f"'{prefix}<value>'" if with_name else "'<value>'",
             f"stored keys such as {keys[0]!r}" if keys else "an empty table")


def stored_keys_sample(table: HudiTable) -> list[str]:
    """The smallest and largest record key of the first base file (from its footer), else
    of the snapshot's first rows; empty for a table without records."""
    for file_slice in table.fs_view().latest_file_slices():
        if file_slice.base_file is None:
            continue
        meta = read_parquet_metadata(table.base_path / file_slice.base_file).metadata or {}
        keys = [meta[k].decode() for k in (MIN_RECORD_KEY.encode(), MAX_RECORD_KEY.encode())
                if k in meta]
        if keys:
            return keys
        column = read_parquet(table.base_path / file_slice.base_file,
                              [RECORD_KEY]).column(RECORD_KEY)
        if len(column):
            return [str(column[0].as_py()), str(column[len(column) - 1].as_py())]
    snapshot = read_snapshot(table, columns=[RECORD_KEY])
    return [str(k) for k in snapshot.column(RECORD_KEY).slice(0, 2).to_pylist()]
