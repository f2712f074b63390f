"""Which connector plug-in serves which ``source.type`` (the one place naming connectors).

Plug-ins are named by import path and imported on first use, so the pipeline package does not
import its connectors (they import the pipeline's plug-in contract, not the other way round).
A new source adds its connector folder with a :class:`~hoodline.pipeline.plugin.SourcePlugin`
and, here, its :class:`SourceType` member with the plug-in's import path.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from hoodline.config.enums import ConfigEnum
from hoodline.errors import ConfigError
from hoodline.pipeline.plugin import SourcePlugin

if TYPE_CHECKING:
    from hoodline.pipeline.config import PipelineConfig


class SourceType(ConfigEnum):
    """Where records come from (``source.type``): one member per connector plug-in."""

    KAFKA = "kafka"
    FILES = "files"


#: source.type -> "module:class" of its plug-in.
PLUGINS: dict[SourceType, str] = {
    SourceType.KAFKA: "hoodline.connectors.kafka.plugin:KafkaPlugin",
    SourceType.FILES: "hoodline.connectors.files.plugin:FilesPlugin",
}


def plugin_class(source_type: SourceType) -> type[SourcePlugin]:
    """The plug-in class registered for ``source_type``."""
    try:
        target = PLUGINS[source_type]
    except KeyError:
        raise ConfigError(
            f"source.type {str(source_type)!r} has no connector; use one of "
            f"{', '.join(sorted(PLUGINS))}"
        ) from None
    module, _, name = target.partition(":")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, SourcePlugin)):
        raise TypeError(f"{target} is not a SourcePlugin")
    return cls


def load_plugin(config: PipelineConfig) -> SourcePlugin:
    """The plug-in for the pipeline's source, built from its configuration."""
    return plugin_class(config.source.type).from_config(config)
