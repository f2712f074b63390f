"""The write operations of the table writer."""

from __future__ import annotations

from hoodline.config.enums import ConfigEnum


class WriteOperation(ConfigEnum):
    """What one write does with its records.

    The value is Hudi's ``WriteOperationType`` name, recorded as ``operationType`` in the commit
    metadata (``UPSERT``); configuration writes it in lower case, as Hudi's
    ``hoodie.datasource.write.operation`` does (``upsert``). Both spellings parse.
    """

    #: Update the records whose key the table holds, insert the others.
    UPSERT = "UPSERT"
    #: Insert without looking keys up (a key already in the table is written again).
    INSERT = "INSERT"
    #: Insert without looking keys up or filling small files.
    BULK_INSERT = "BULK_INSERT"
    #: Delete the records' keys.
    DELETE = "DELETE"

    @property
    def config_text(self) -> str:
        return self.value.lower()
