"""Enum-typed option values: :class:`ConfigEnum` and the value sets shared by several components.

A component declares the fixed set of values one of its options takes as a :class:`ConfigEnum`
next to the code that interprets it (index types in the table package, startup modes in the Kafka
connector, ...) and uses it as the option's type::

    INDEX = option("table.index", IndexType, IndexType.BUCKET, "Index locating records.")
"""

from __future__ import annotations

import enum
from typing import Self


class ConfigEnum(enum.StrEnum):
    """A fixed set of option values.

    Members are strings (``StrEnum``): they compare equal to their value, so code comparing with
    plain strings keeps working. In configuration a member is written as :attr:`config_text` (its
    value unless the enum defines another spelling), matched case-insensitively; :meth:`parse`
    accepts the value itself too. ``repr`` is the value's (``'BLOOM'``), as for the plain string
    the member equals, so messages quoting a value with ``!r`` read the same for both.
    """

    def __repr__(self) -> str:
        return repr(self.value)

    @property
    def config_text(self) -> str:
        """How the member is written in configuration files and shown in the option reference."""
        return str(self.value)

    @classmethod
    def parse(cls, raw: object) -> Self:
        """The member written as ``raw``; :class:`ValueError` listing the allowed values if none."""
        if isinstance(raw, cls):
            return raw
        if isinstance(raw, str):
            wanted = raw.strip().lower()
            for member in cls:
                if wanted in (member.config_text.lower(), member.value.lower()):
                    return member
        raise ValueError(f"allowed: {cls.allowed_text()}")

    @classmethod
    def allowed_text(cls) -> str:
        """The allowed spellings, for messages: ``'none', 'all'``."""
        return ", ".join(repr(m.config_text) for m in cls)


class ErrorTolerance(ConfigEnum):
    """What happens to records (or files) that cannot be read: the ``errors.tolerance`` option of
    the pipeline and of the file source."""

    #: Fail, naming the bad record or file.
    NONE = "none"
    #: Record the bad record or file (error table, rejected files) and go on.
    ALL = "all"
