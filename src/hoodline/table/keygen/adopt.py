"""Key generator settings a table's properties do not hold, taken from the writer's.

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
from hoodline.table.keygen.kinds import KeyGeneratorKind, PartitionKind
from hoodline.table.keygen.timestamp import timestamp_settings
from hoodline.table.properties import K_CUSTOM_PARTITIONS, update_properties
from hoodline.table.table import HudiTable

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
