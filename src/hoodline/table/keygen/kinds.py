"""Which key generator a table uses, and the Java classes that name them.

Java Hudi records a table's generator as ``hoodie.table.keygenerator.class``; the Spark
(``org.apache.hudi.keygen.X``) and Avro (``…XAvro…``) variants of one generator make the same
keys. hoodline writes with the generators below, exactly as Java does:

* ``default``: Java's Simple (one key field, one partition field), Nonpartitioned (no partition
  field) or Complex (several key or partition fields) generator, chosen by the table's layout;
* ``timestamp``: ``TimestampBasedKeyGenerator``: one key field, one partition field whose value is
  read as a time and written with a date pattern (``hoodie.keygen.timebased.*``);
* ``custom``: ``CustomKeyGenerator``: each partition field is ``simple`` (its value) or
  ``timestamp`` (as above), one folder level per field.
"""

from __future__ import annotations

from hoodline.config.enums import ConfigEnum

KEYGEN_PACKAGE = "org.apache.hudi.keygen."
KEYGEN_SIMPLE = KEYGEN_PACKAGE + "SimpleKeyGenerator"
KEYGEN_COMPLEX = KEYGEN_PACKAGE + "ComplexKeyGenerator"
KEYGEN_NON_PARTITIONED = KEYGEN_PACKAGE + "NonpartitionedKeyGenerator"
KEYGEN_TIMESTAMP = KEYGEN_PACKAGE + "TimestampBasedKeyGenerator"
KEYGEN_CUSTOM = KEYGEN_PACKAGE + "CustomKeyGenerator"


class KeyGeneratorKind(ConfigEnum):
    """How a table's record keys and partition paths are made (``table.key-generator``)."""

    #: Simple, Nonpartitioned or Complex, chosen by the number of key and partition fields
    DEFAULT = "default"
    #: TimestampBasedKeyGenerator: the one partition field is a time written with a date pattern
    TIMESTAMP = "timestamp"
    #: CustomKeyGenerator: each partition field is `name:simple` or `name:timestamp`
    CUSTOM = "custom"


class PartitionKind(ConfigEnum):
    """How a custom key generator writes one partition field (Java's ``PartitionKeyType``)."""

    #: the value as it is
    SIMPLE = "simple"
    #: a time written with the table's date pattern, as the timestamp generator does
    TIMESTAMP = "timestamp"


def short_name(java_class: str) -> str:
    """``org.apache.hudi.keygen.SimpleAvroKeyGenerator`` -> ``SimpleKeyGenerator``."""
    return java_class.rsplit(".", 1)[-1].replace("Avro", "")


def kind_of_class(java_class: str | None) -> KeyGeneratorKind:
    """The kind a declared Java class belongs to (``default`` for Simple, Complex, ... and
    classes hoodline does not write; :meth:`TableConfig.check_key_generator` refuses those)."""
    short = short_name(java_class or "")
    if short == short_name(KEYGEN_TIMESTAMP):
        return KeyGeneratorKind.TIMESTAMP
    if short == short_name(KEYGEN_CUSTOM):
        return KeyGeneratorKind.CUSTOM
    return KeyGeneratorKind.DEFAULT


def timestamp_layout_problem(
    record_key_fields: tuple[str, ...], partition_fields: tuple[str, ...]
) -> str | None:
    """Why the timestamp generator cannot make this layout's keys (None: it can)."""
    if len(partition_fields) == 1 and len(record_key_fields) == 1:
        return None
    return (
        "the timestamp key generator takes one record key field and one partition field (it "
        f"has {list(record_key_fields)} and {list(partition_fields)}); use the custom generator "
        "for several partition fields"
    )


def parse_partition_spec(spec: str) -> tuple[str, PartitionKind]:
    """``ts:timestamp`` -> (``ts``, TIMESTAMP), as Java's custom generator splits
    ``hoodie.datasource.write.partitionpath.field``; ValueError naming the entry if malformed."""
    name, sep, kind = spec.partition(":")
    if not sep or not name.strip() or ":" in kind:
        raise ValueError(
            f"partition field {spec!r} needs the form 'name:simple' or 'name:timestamp' with "
            "the custom key generator"
        )
    try:
        return name.strip(), PartitionKind.parse(kind)
    except ValueError as exc:
        raise ValueError(f"partition field {spec!r}: type {kind!r} is unknown; {exc}") from None
