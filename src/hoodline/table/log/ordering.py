"""Ordering values as Java Hudi compares them when a delete meets an earlier log record.

Java Hudi 0.14/0.15 (``HoodieMergedLogRecordScanner.processNextDeletedRecord``) keeps a key's
earlier log record over a later delete of it when all of these hold (hoodline applies the rule
to ``DefaultHoodieRecordPayload`` tables, as hudi-rs does; with the default payload the last
write wins and every delete deletes, see :mod:`hoodline.table.log.merge`):

* the delete's ordering value is not the Integer 0 (Java's "natural order": Spark SQL's DELETE
  writes ``IntWrapper(0)``, which always deletes, as hoodline does for deletes without an
  ordering value and with the default payload);
* it is of the same Java class as the record's ordering value;
* the record's ordering value is greater.

A delete block stores each ordering value in a wrapper record (``IntWrapper``, ``LongWrapper``
...; Java unwraps it into Integer, Long ...). A log record's ordering value is the raw Avro value
of its precombine field (``SpillableMapUtils.getPreCombineVal``): Integer for ``int`` and
``date``, Long for ``long`` and the timestamps, Utf8 for ``string`` (never the class of an
unwrapped ``StringWrapper``, a String). Java writes such orderings for records an upsert
deletes (``_hoodie_is_deleted``, ``HoodieAppendHandle``).

hoodline compares the numeric and boolean classes; a delete whose value is of any other class
(bytes, decimals, strings, times) always deletes, as in Java but for ``bytes`` orderings (Java
compares two ByteBuffers, hoodline does not). A null ordering value deletes too (Java throws a
NullPointerException there).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import pyarrow as pa


class JavaClass(enum.Enum):
    """The Java class of an ordering value."""

    BOOLEAN = "Boolean"
    INTEGER = "Integer"
    LONG = "Long"
    FLOAT = "Float"
    DOUBLE = "Double"
    BYTE_BUFFER = "ByteBuffer"
    STRING = "String"
    UTF8 = "Utf8"
    LOCAL_DATE = "LocalDate"
    BIG_DECIMAL = "BigDecimal"
    LOCAL_TIME = "LocalTime"
    TIMESTAMP = "Timestamp"
    #: a raw Avro value hoodline does not compare (fixed, records ...)
    OTHER = "Object"


#: classes whose values hoodline compares (Python compares their values as Java does)
_COMPARED = frozenset(
    {JavaClass.BOOLEAN, JavaClass.INTEGER, JavaClass.LONG, JavaClass.FLOAT, JavaClass.DOUBLE})

#: ``HoodieDeleteRecord.orderingVal``'s wrapper records and the class Java unwraps them into
WRAPPERS: dict[str, JavaClass] = {
    "BooleanWrapper": JavaClass.BOOLEAN,
    "IntWrapper": JavaClass.INTEGER,
    "LongWrapper": JavaClass.LONG,
    "FloatWrapper": JavaClass.FLOAT,
    "DoubleWrapper": JavaClass.DOUBLE,
    "BytesWrapper": JavaClass.BYTE_BUFFER,
    "StringWrapper": JavaClass.STRING,
    "DateWrapper": JavaClass.LOCAL_DATE,
    "DecimalWrapper": JavaClass.BIG_DECIMAL,
    "TimeMicrosWrapper": JavaClass.LOCAL_TIME,
    "TimestampMicrosWrapper": JavaClass.TIMESTAMP,
}


@dataclass(frozen=True)
class OrderingValue:
    """One ordering value and its Java class."""

    java_class: JavaClass
    value: Any

    @property
    def natural(self) -> bool:
        """Java's "no ordering": the Integer 0 (``deleteOrderingVal.equals(0)``)."""
        return self.java_class is JavaClass.INTEGER and self.value == 0


def unwrapped(datum: Any) -> OrderingValue | None:
    """The ordering value of a decoded ``orderingVal`` union: fastavro's ``(record name,
    {"value": v})`` pair with ``return_record_name``, or None for the null branch."""
    if datum is None:
        return None
    name, record = datum
    short = str(name).rsplit(".", 1)[-1]
    return OrderingValue(WRAPPERS.get(short, JavaClass.OTHER), record["value"])


def record_class(t: pa.DataType) -> JavaClass:
    """The Java class of the raw Avro value of a precombine field of Arrow type ``t``."""
    if pa.types.is_boolean(t):
        return JavaClass.BOOLEAN
    if (pa.types.is_integer(t) and t.bit_width <= 32) or pa.types.is_date32(t) or (
            pa.types.is_time32(t)):
        return JavaClass.INTEGER
    if pa.types.is_int64(t) or pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return JavaClass.LONG
    if pa.types.is_float32(t):
        return JavaClass.FLOAT
    if pa.types.is_float64(t):
        return JavaClass.DOUBLE
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return JavaClass.UTF8
    return JavaClass.OTHER


def raw_values(values: pa.Array | pa.ChunkedArray) -> list[Any]:
    """``values`` as Python values comparable as Java compares their raw Avro values (dates,
    times and timestamps as their integers)."""
    t = values.type
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        values = values.cast(pa.int32())
    elif pa.types.is_timestamp(t) or pa.types.is_time64(t):
        values = values.cast(pa.int64())
    out: list[Any] = values.to_pylist()
    return out


def delete_is_outranked(record: OrderingValue, delete: OrderingValue | None) -> bool:
    """Whether a key's earlier log record (ordering ``record``) stays over a later delete with
    ordering ``delete`` (see the module's rules)."""
    if delete is None or delete.natural:
        return False
    if record.java_class is not delete.java_class or record.java_class not in _COMPARED:
        return False
    if record.value is None or delete.value is None:
        return False
    return bool(record.value > delete.value)
