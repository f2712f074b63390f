"""Typed configuration options (key, type, default, description), like Flink's ConfigOptions.

* :mod:`~hoodline.config.options` - :func:`option`, :class:`ConfigOption`, :class:`Options`
* :mod:`~hoodline.config.enums` - enum-typed option values (:class:`ConfigEnum`)
* :mod:`~hoodline.config.units` - sizes and durations with units (``64MiB``, ``2min``)
* :mod:`~hoodline.config.masking` - which keys are secret, and masking them for display
* :mod:`~hoodline.config.arrow_types` - the type syntax of every schema option
"""

from hoodline.config.enums import ConfigEnum, ErrorTolerance
from hoodline.config.options import ConfigOption, Options, option

__all__ = ["ConfigEnum", "ConfigOption", "ErrorTolerance", "Options", "option"]
