"""Typed configuration options (key, type, default, description), like Flink's ConfigOptions."""

from hoodline.config.options import ConfigOption, Options, option

__all__ = ["ConfigOption", "Options", "option"]
