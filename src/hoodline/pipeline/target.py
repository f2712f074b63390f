"""The pipeline's target table: created from the config on first use, checked against it after.

An existing table keeps its type, index, record key, partitioning and ordering field: a pipeline
file that says otherwise is refused (never silently overridden), as Java's writers refuse it.

**Provisional tables.** A table the pipeline creates is marked ``hoodline.table.provisional`` in
its ``hoodie.properties`` until it holds a commit. A first run that fails before committing
anything (a wrong record key that makes every record bad, a source folder that does not exist)
leaves such a table behind; the next run, with the mistake fixed, gives it the pipeline's
settings instead of refusing them (with a warning naming what changed). Once anything but a
rollback is on its timeline the table is an ordinary table: the pipeline drops the mark after
its first commit (or, if that failed, on its next start) and the checks above apply. Tables
created by others never carry the mark. Java Hudi and hudi-rs ignore properties they do not
know. The settings are replaced without the writer lock (the table holds
nothing to protect yet); a first round that was interrupted (a crash, a second Ctrl-C) leaves a
pending write, which counts as history: that table keeps its settings.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from hoodline.errors import ConfigError, TableNotFoundError
from hoodline.pipeline.config import PipelineConfig
from hoodline.storage.paths import parse_location
from hoodline.table.index.declared import adopt_index, declares_index
from hoodline.table.instant import ROLLBACK, State
from hoodline.table.keygen.adopt import adopt_key_generator
from hoodline.table.keygen.kinds import KeyGeneratorKind
from hoodline.table.keygen.timestamp import creation_defaults, timestamp_settings
from hoodline.table.properties import (
    K_PAYLOAD_CLASS,
    IndexType,
    TableConfig,
    remove_properties,
    write_table_config,
)
from hoodline.table.table import HudiTable
from hoodline.table.write.options import WriteOptions

__all__ = ["K_PROVISIONAL", "open_target_table", "settle_after_commit"]

log = logging.getLogger(__name__)

#: Set in ``hoodie.properties`` of a table the pipeline created, until its first commit.
K_PROVISIONAL = "hoodline.table.provisional"

#: The settings a provisional table takes from the pipeline (TableConfig attribute -> label).
_SETTINGS = {
    "table_type": "type",
    "index_type": "index",
    "bucket_count": "bucket count",
    "record_key_fields": "record key",
    "partition_fields": "partition fields",
    "key_generator": "key generator",
    "partition_kinds": "partition field types",
    "precombine_field": "precombine field",
}


def _table_config(config: PipelineConfig) -> TableConfig:
    """The settings the pipeline gives a table it creates (marked provisional)."""
    t = config.table
    # how records merge, for every reader and writer of the table (Java's writers and
    # merge-on-read readers take it from here)
    extra = {K_PAYLOAD_CLASS: WriteOptions.from_mapping(t.options).payload_class.value,
             K_PROVISIONAL: "true"}
    if t.key_generator is not KeyGeneratorKind.DEFAULT:
        extra.update(creation_defaults(timestamp_settings(t.options)))
    return TableConfig(
        name=t.name,
        record_key_fields=t.record_key,
        partition_fields=t.partition_fields,
        key_generator=t.key_generator,
        partition_kinds=t.partition_kinds,
        precombine_field=t.precombine_field,
        table_type=t.table_type,
        index_type=t.index,
        bucket_count=t.bucket_count,
        extra=extra,
    )


def _shown(value: object) -> str:
    return str(list(value)) if isinstance(value, tuple) else str(value)


def settle_after_commit(table: HudiTable) -> None:
    """A table that holds a commit now is an ordinary table: drop the provisional mark (the
    pipeline calls this after its first commit, holding the writer lock), so Java writers and
    readers of ``hoodie.properties`` do not see a stale hoodline flag until the next start."""
    if K_PROVISIONAL in table.config.extra:
        table.config = remove_properties(table.base_path, [K_PROVISIONAL])


def _settle_provisional(table: HudiTable, desired: TableConfig) -> HudiTable:
    """A provisional table: still without a commit, it takes ``desired``; else it loses the
    mark and is checked as any table."""
    table.timeline.reload()
    history = [i for i in table.timeline.instants()
               if not (i.action == ROLLBACK and i.state is State.COMPLETED)]
    current = table.config
    if history:  # written to: an ordinary table now (its properties otherwise as they are)
        remove_properties(table.base_path, [K_PROVISIONAL])
        return HudiTable.open(table.base_path)
    changed = [
        f"{label} {_shown(getattr(current, attr))} -> {_shown(getattr(desired, attr))}"
        for attr, label in _SETTINGS.items()
        if getattr(current, attr) != getattr(desired, attr)
    ]
    if current.to_properties() == desired.to_properties():
        return table
    if changed:
        log.warning(
            "table '%s' holds no commit yet (an earlier run failed before its first one): "
            "it takes the pipeline's settings: %s", table.base_path, "; ".join(changed)
        )
    write_table_config(table.base_path, desired)
    return HudiTable.open(table.base_path)


def refuse_foreign_folder(
    path: str, storage_options: Mapping[str, str], option: str = "table.path"
) -> None:
    """A table is created in a new or empty folder only: one that holds other files (hidden
    ones aside) is likely a typo'd path or the wrong folder, and the table's partition folders
    would land between those files. ``option`` names the setting the path came from."""
    base = parse_location(path, storage_options)
    try:
        if not base.is_dir():
            return
        present = sorted(p.name for p in base.iterdir() if not p.name.startswith("."))
    except OSError:
        return  # unreadable: creating the table reports it
    if present:
        shown = ", ".join(repr(n) for n in present[:5]) + (", ..." if len(present) > 5 else "")
        raise ConfigError(
            f"{option} '{path}' is a folder that holds other files ({shown}) but no Hudi table "
            f"(no .hoodie folder); point {option} at a new or empty folder, or at an existing "
            "table"
        )


def open_target_table(config: PipelineConfig) -> HudiTable:
    """The pipeline's table, created on first use; an existing table must match the config,
    unless it is still provisional (see the module docs): then it takes the config's settings."""
    t = config.table
    desired = _table_config(config)
    try:
        table = HudiTable.open(t.path, storage_options=t.storage_options)
    except TableNotFoundError:
        refuse_foreign_folder(t.path, t.storage_options)
        table = HudiTable.create(
            t.path,
            desired,
            exist_ok=True,
            storage_options=t.storage_options,
        )
    else:
        if K_PROVISIONAL in table.config.extra:
            table = _settle_provisional(table, desired)
    if not declares_index(table):  # a table Java created: its writers hold the index settings
        adopt_index(table, t.index, t.bucket_count)
    adopt_key_generator(table, t.key_generator, t.partition_kinds, t.options)
    c = table.config
    if t.name_set and c.name != t.name:
        # as Java's writers refuse a hoodie.table.name that differs from the table's
        raise ConfigError(
            f"table '{t.path}' is named {c.name!r} (hoodie.table.name), but the pipeline sets "
            f"table.name = {t.name!r}; an existing table keeps its name: set the table's, or "
            "leave table.name out"
        )
    if t.type_set and c.table_type is not t.table_type:
        raise ConfigError(
            f"table '{t.path}' is {c.table_type}, but the pipeline sets table.type = "
            f"{t.table_type.config_text!r}; an existing table keeps its type: set the table's "
            "type, leave table.type out, or write to a new path"
        )
    index_differs = t.index_set and c.index_type != t.index
    count_differs = (t.bucket_count_set and c.index_type is IndexType.BUCKET
                     and c.bucket_count != t.bucket_count)
    if index_differs or count_differs:
        shown = ", ".join(
            [f"table.index = {str(t.index)!r}"] * t.index_set
            + [f"table.bucket-count = {t.bucket_count}"] * t.bucket_count_set)
        has = (f"index {c.index_type} with {c.bucket_count} buckets per partition"
               if c.index_type is IndexType.BUCKET else f"index {c.index_type}")
        raise ConfigError(
            f"table '{t.path}' uses {has}, but the pipeline sets {shown}; an existing table "
            "keeps its index: set the table's values, leave them out, or write to a new path"
        )
    if tuple(c.record_key_fields) != tuple(t.record_key) or (
        tuple(c.partition_fields) != tuple(t.partition_fields)
    ):
        raise ConfigError(
            f"table '{t.path}' has record key {list(c.record_key_fields)} and partition fields "
            f"{list(c.partition_fields)}, but the pipeline sets table.record-key = "
            f"{list(t.record_key)} and table.partition-fields = {list(t.partition_fields)}; "
            "make them match the table or write to a new path"
        )
    if t.precombine_field and not c.precombine_field:
        # Java's writers ignore it (their check compares two set fields): the table's "last
        # record read wins" would go on, and an older event read after a newer one would win
        raise ConfigError(
            f"table '{t.path}' has no ordering field (no hoodie.table.precombine.field: among "
            "records with the same key the last one read wins), but the pipeline sets "
            f"table.precombine-field = {t.precombine_field!r}; an existing table keeps its "
            "ordering: leave table.precombine-field out or write to a new path"
        )
    if c.precombine_field and t.precombine_field and c.precombine_field != t.precombine_field:
        # as Java's writers refuse it (HoodieWriterUtils.validateTableConfig): the table's
        # field would win, and the pipeline's setting would be ignored without a word
        raise ConfigError(
            f"table '{t.path}' orders records by {c.precombine_field!r} "
            f"(hoodie.table.precombine.field), but the pipeline sets table.precombine-field = "
            f"{t.precombine_field!r}; an existing table keeps its ordering field: set the "
            "table's or write to a new path"
        )
    return table
