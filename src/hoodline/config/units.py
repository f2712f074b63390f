"""Option value types with units: :class:`ByteSize` (``"64MiB"``), :class:`Duration` (``"2min"``).

Both are numbers (``int`` / ``float`` subclasses) built from a number or a string with a unit, so
an option declared with one of them as its type accepts either in TOML, on the CLI or in Python.
"""

from __future__ import annotations

import re

_SIZE_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3,
    "k": 1024, "m": 1024**2, "g": 1024**3,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3,
}
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0}
_NUM_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


class ByteSize(int):
    """A number of bytes: an integer or a string like ``"64MiB"``, ``"10MB"``, ``"512k"``."""

    def __new__(cls, raw: object) -> ByteSize:
        if isinstance(raw, bool):
            raise ValueError("expected a size like 64MiB")
        if isinstance(raw, int):
            return super().__new__(cls, raw)
        if isinstance(raw, str):
            m = _NUM_UNIT.match(raw)
            if m and m.group(2).lower() in _SIZE_UNITS:
                unit = _SIZE_UNITS[m.group(2).lower()]
                return super().__new__(cls, int(float(m.group(1)) * unit))
        raise ValueError("expected bytes as an integer or a size like 64MiB, 10MB, 512k")


class Duration(float):
    """Seconds: a number or a string like ``"500ms"``, ``"10s"``, ``"2min"``, ``"1h"``."""

    def __new__(cls, raw: object) -> Duration:
        if isinstance(raw, bool):
            raise ValueError("expected a duration like 10s")
        if isinstance(raw, (int, float)):
            return super().__new__(cls, float(raw))
        if isinstance(raw, str):
            m = _NUM_UNIT.match(raw)
            if m and m.group(2).lower() in _DURATION_UNITS:
                return super().__new__(cls, float(m.group(1)) * _DURATION_UNITS[m.group(2).lower()])
        raise ValueError("expected seconds as a number or a duration like 500ms, 10s, 2min")
