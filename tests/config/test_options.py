import pytest

from hoodline.config import Options, option
from hoodline.errors import ConfigError

SIZE = option("max.size", int, 10, "max size", minimum=1)
MODE = option("mode", str, "hash", "assigner", choices=("hash", "round-robin"))
FLAG = option("flag", bool, False, "a flag")
PASSWORD = option(
    "sasl.password", str, "", "secret", secret=True,
    validator=lambda v: "too short" if len(v) < 4 else None,
)


def test_defaults_and_conversion() -> None:
    opts = Options({"max.size": "1_000", "flag": "yes"}, known=[SIZE, MODE, FLAG])
    assert opts.get(SIZE) == 1000
    assert opts.get(FLAG) is True
    assert opts.get(MODE) == "hash"


@pytest.mark.parametrize(
    ("raw", "needle"),
    [({"max.size": 0}, ">= 1"), ({"max.size": "ten"}, "'ten'"), ({"mode": "random"}, "'random'")],
)
def test_invalid_values_name_option_and_value(raw: dict[str, object], needle: str) -> None:
    opts = Options(raw, known=[SIZE, MODE])
    with pytest.raises(ConfigError) as err:
        opts.get(SIZE if "max.size" in raw else MODE)
    assert next(iter(raw)) in str(err.value)
    assert needle in str(err.value)


def test_unknown_option_is_refused_but_passthrough_allowed() -> None:
    with pytest.raises(ConfigError, match=r"unknown option 'max\.sise'"):
        Options({"max.sise": 3}, known=[SIZE])
    opts = Options(
        {"properties.client.id": "x"}, known=[SIZE], passthrough_prefixes=["properties."]
    )
    assert opts.with_prefix("properties.") == {"client.id": "x"}


def test_secret_value_is_masked_in_errors() -> None:
    with pytest.raises(ConfigError) as err:
        Options({"sasl.password": "abc"}, known=[PASSWORD]).get(PASSWORD)
    assert "abc" not in str(err.value)
    assert "***" in str(err.value)
