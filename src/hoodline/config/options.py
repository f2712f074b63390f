"""Typed options with documented defaults.

An option is declared once, with its key, type, default and description::

    MAX_FILE_SIZE = option("hoodie.parquet.max.file.size", int, 120 * 1024 * 1024,
                           "Target maximum size in bytes of a base file.", minimum=1)

and read from an :class:`Options` mapping (parsed from TOML, CLI or a dict). Reading validates the
value and raises :class:`~hoodline.errors.ConfigError` naming the option and the bad value.

An option whose type is a :class:`~hoodline.config.enums.ConfigEnum` takes one of the enum's
members, written as its text (``"BLOOM"``); an invalid value is refused with the allowed ones.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from hoodline.config.enums import ConfigEnum
from hoodline.config.masking import MASK
from hoodline.errors import ConfigError

T = TypeVar("T")

#: the texts a flag takes: Java Hudi (Boolean.parseBoolean) and Kafka clients read "true" as
#: true and every other text as false, so "yes" or "1" would mean the opposite there
_TRUE = {"true"}
_FALSE = {"false"}


@dataclass(frozen=True)
class ConfigOption(Generic[T]):
    """One documented option."""

    key: str
    type: type[T]
    default: T
    description: str
    choices: tuple[T, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    secret: bool = False
    validator: Callable[[T], str | None] | None = field(default=None, compare=False)

    def convert(self, raw: object) -> T:
        """Convert ``raw`` (from TOML, CLI strings or Python) to this option's type and check it."""
        value = self._coerce(raw)
        if isinstance(value, float) and not math.isfinite(value):
            # TOML's nan and inf: nan passed every range check (a timeout that never ran out)
            raise ConfigError(
                f"option '{self.key}' has invalid value {self._show(raw)}; must be a finite "
                "number"
            )
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(repr(c) for c in self.allowed_values() or ())
            raise ConfigError(
                f"option '{self.key}' has invalid value {self._show(raw)}; allowed: {allowed}"
            )
        if self.minimum is not None and value < self.minimum:  # type: ignore[operator]
            raise ConfigError(
                f"option '{self.key}' has invalid value {self._show(raw)}; "
                f"must be >= {self.minimum}"
            )
        if self.maximum is not None and value > self.maximum:  # type: ignore[operator]
            raise ConfigError(
                f"option '{self.key}' has invalid value {self._show(raw)}; "
                f"must be <= {self.maximum}"
            )
        if self.validator is not None:
            problem = self.validator(value)
            if problem:
                raise ConfigError(
                    f"option '{self.key}' has invalid value {self._show(raw)}: {problem}"
                )
        return value

    def allowed_values(self) -> tuple[str, ...] | None:
        """The values this option accepts as written in configuration (None: not a fixed set)."""
        if issubclass(self.type, ConfigEnum):
            members = self.choices if self.choices is not None else tuple(self.type)
            return tuple(m.config_text for m in cast(tuple[ConfigEnum, ...], members))
        if self.choices is not None:
            return tuple(str(c) for c in self.choices)
        return None

    def _show(self, raw: object) -> str:
        return f"'{MASK}'" if self.secret else repr(raw)

    def _coerce(self, raw: object) -> T:
        t = self.type
        try:
            if issubclass(t, ConfigEnum):
                return cast(T, t.parse(raw))
            if t is bool:
                if isinstance(raw, bool):
                    return cast(T, raw)
                if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
                    return cast(T, raw.strip().lower() in _TRUE)
                raise ValueError("expected true or false (Java Hudi reads any other text as "
                                 "false)")
            if t is int:
                if isinstance(raw, bool):
                    raise ValueError("expected an integer")
                if isinstance(raw, int):
                    return cast(T, raw)
                if isinstance(raw, str):
                    try:
                        return cast(T, int(raw.strip().replace("_", "")))
                    except ValueError:
                        raise ValueError("expected an integer") from None
                raise ValueError("expected an integer")
            if t is float:
                if isinstance(raw, bool):
                    raise ValueError("expected a number")
                try:
                    return cast(T, float(cast(Any, raw)))
                except (ValueError, TypeError):
                    raise ValueError("expected a number") from None
            if t is str:
                if not isinstance(raw, str):
                    raise ValueError("expected a string")
                return cast(T, raw)
            if t is tuple:
                if isinstance(raw, str):
                    return cast(T, tuple(p.strip() for p in raw.split(",") if p.strip()))
                if isinstance(raw, (list, tuple)):
                    return cast(T, tuple(raw))
                raise ValueError("expected a list or a comma-separated string")
            return t(raw)  # type: ignore[call-arg]
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"option '{self.key}' has invalid value {self._show(raw)}: {exc}"
            ) from None


def option(
    key: str,
    type_: type[T],
    default: T,
    description: str,
    *,
    choices: Iterable[T] | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    secret: bool = False,
    validator: Callable[[T], str | None] | None = None,
) -> ConfigOption[T]:
    """Declare an option (see module docs)."""
    return ConfigOption(
        key=key,
        type=type_,
        default=default,
        description=description,
        choices=tuple(choices) if choices is not None else None,
        minimum=minimum,
        maximum=maximum,
        secret=secret,
        validator=validator,
    )


#: known options an unknown one's message lists at most (there are up to ~45 in a section)
_LISTED = 8


def _unknown(key: str, names: list[str]) -> str:
    """The refusal of option ``key``: the known one it is closest to, else those under the same
    prefix (or all), at most :data:`_LISTED` of them (walkthrough review: a line of 45)."""
    close = difflib.get_close_matches(key, names, n=1)
    if close:
        return (f"unknown option '{key}' (did you mean '{close[0]}'?); every option is in the "
                "README's option reference")
    prefix = key.rsplit(".", 1)[0] + "." if "." in key else ""
    related = [n for n in names if prefix and n.startswith(prefix)]
    shown = related or names
    more = f" and {len(shown) - _LISTED} more" if len(shown) > _LISTED else ""
    return (f"unknown option '{key}'; known options{f' under {prefix!r}' if related else ''}: "
            f"{', '.join(shown[:_LISTED])}{more} (every option: the README's option reference)")


class Options:
    """A validated view over raw key/value settings.

    ``known`` lists the options that may appear; unknown keys are refused (typos fail fast) unless
    they start with one of ``passthrough_prefixes`` (e.g. client properties handed to librdkafka).
    """

    def __init__(
        self,
        raw: Mapping[str, object] | None = None,
        known: Iterable[ConfigOption[Any]] = (),
        passthrough_prefixes: Iterable[str] = (),
    ) -> None:
        self._raw: dict[str, object] = dict(raw or {})
        self._known = {o.key: o for o in known}
        prefixes = tuple(passthrough_prefixes)
        if self._known:
            for key in self._raw:
                if key not in self._known and not key.startswith(prefixes):
                    raise ConfigError(_unknown(key, sorted(self._known)))

    def get(self, opt: ConfigOption[T]) -> T:
        if opt.key in self._raw:
            return opt.convert(self._raw[opt.key])
        return opt.default

    def contains(self, opt: ConfigOption[Any]) -> bool:
        return opt.key in self._raw

    def with_prefix(self, prefix: str) -> dict[str, object]:
        """Raw entries whose key starts with ``prefix``, prefix removed."""
        return {k[len(prefix):]: v for k, v in self._raw.items() if k.startswith(prefix)}
