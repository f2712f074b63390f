from typing import Any

import pytest

from hoodline.config import ConfigEnum, ConfigOption, Options, option
from hoodline.errors import ConfigError

SIZE = option("max.size", int, 10, "max size", minimum=1)
MODE = option("mode", str, "hash", "assigner", choices=("hash", "round-robin"))
FLAG = option("flag", bool, False, "a flag")
PASSWORD = option(
    "sasl.password", str, "", "secret", secret=True,
    validator=lambda v: "too short" if len(v) < 4 else None,
)


def test_defaults_and_conversion() -> None:
    opts = Options({"max.size": "1_000", "flag": "True"}, known=[SIZE, MODE, FLAG])
    assert opts.get(SIZE) == 1000
    assert opts.get(FLAG) is True
    assert opts.get(MODE) == "hash"


@pytest.mark.parametrize("raw", ["yes", "1", "on", "no", "0", 1, 0])
def test_a_flag_takes_only_true_or_false(raw: object) -> None:
    """'yes', 'on', '1' were read as true, but Java Hudi's Boolean.parseBoolean reads them
    as false: the same text in a Java writer's configuration meant the opposite."""
    with pytest.raises(ConfigError, match=r"option 'flag' has invalid value .*expected true or "
                                          r"false \(Java Hudi reads any other text as false\)"):
        Options({"flag": raw}, known=[FLAG]).get(FLAG)


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
    guess = r"unknown option 'max\.sise' \(did you mean 'max\.size'\?\)"
    with pytest.raises(ConfigError, match=guess):
        Options({"max.sise": 3}, known=[SIZE])
    with pytest.raises(ConfigError) as far:
        Options({"colour": 3}, known=[SIZE, MODE])
    assert "did you mean" not in str(far.value)  # no guess when nothing is close
    opts = Options(
        {"properties.client.id": "x"}, known=[SIZE], passthrough_prefixes=["properties."]
    )
    assert opts.with_prefix("properties.") == {"client.id": "x"}


def test_secret_value_is_masked_in_errors() -> None:
    with pytest.raises(ConfigError) as err:
        Options({"sasl.password": "abc"}, known=[PASSWORD]).get(PASSWORD)
    assert "abc" not in str(err.value)
    assert "***" in str(err.value)


class Colour(ConfigEnum):
    RED = "red"
    DARK_BLUE = "dark-blue"


class Op(ConfigEnum):
    UPSERT = "UPSERT"

    @property
    def config_text(self) -> str:
        return self.value.lower()


COLOUR = option("colour", Colour, Colour.RED, "a colour")
WARM = option("warm", Colour, Colour.RED, "a warm colour", choices=[Colour.RED])
OP = option("op", Op, Op.UPSERT, "an operation")


def test_enum_option_parses_text_case_insensitively_to_members() -> None:
    opts = Options({"colour": "Dark-Blue", "op": "upsert"}, known=[COLOUR, OP])
    assert opts.get(COLOUR) is Colour.DARK_BLUE
    assert opts.get(OP) is Op.UPSERT
    assert Options({"op": "UPSERT"}, known=[OP]).get(OP) is Op.UPSERT  # the value parses too
    assert Options({}, known=[COLOUR]).get(COLOUR) is Colour.RED
    assert COLOUR.convert(Colour.DARK_BLUE) is Colour.DARK_BLUE
    assert Colour.RED == "red"  # StrEnum: plain-string comparisons keep working


@pytest.mark.parametrize(
    ("opt", "raw", "allowed"),
    [
        (COLOUR, "green", "allowed: 'red', 'dark-blue'"),
        (COLOUR, 3, "allowed: 'red', 'dark-blue'"),
        (OP, "merge", "allowed: 'upsert'"),
        (WARM, "dark-blue", "allowed: 'red'"),
    ],
)
def test_enum_option_rejects_bad_values_naming_option_and_allowed_values(
    opt: ConfigOption[Any], raw: object, allowed: str
) -> None:
    with pytest.raises(ConfigError) as err:
        opt.convert(raw)
    msg = str(err.value)
    assert f"option '{opt.key}' has invalid value {raw!r}" in msg
    assert allowed in msg


def test_allowed_values_are_written_as_in_configuration() -> None:
    assert COLOUR.allowed_values() == ("red", "dark-blue")
    assert OP.allowed_values() == ("upsert",)
    assert WARM.allowed_values() == ("red",)
    assert MODE.allowed_values() == ("hash", "round-robin")
    assert SIZE.allowed_values() is None


@pytest.mark.parametrize("raw", [float("nan"), float("inf"), "nan", "-inf"])
def test_a_number_option_refuses_nan_and_infinity(raw: object) -> None:
    """TOML's nan passed every range check: a broker-outage timeout of nan never ran out and
    the outage was retried forever (code review)."""
    from hoodline.config.units import Duration

    for opt in (option("t", float, 1.0, "d", minimum=0), option("d", Duration, Duration(1), "d")):
        if isinstance(raw, str) and opt.type is Duration:
            continue  # a duration's text never reads as nan: refused as not a duration
        with pytest.raises(ConfigError, match=f"option '{opt.key}' has invalid value .*finite"):
            opt.convert(raw)


def test_an_unknown_option_names_the_closest_or_a_few_of_its_neighbours() -> None:
    """Walkthrough review: the refusal listed every known option (up to ~45) on one line."""
    known = [option(f"a.b.opt{i:02d}", int, 0, "doc") for i in range(20)]
    known.append(option("x.y", int, 0, "doc"))
    with pytest.raises(ConfigError) as close:
        Options({"a.b.opt_01": 1}, known=known)
    assert str(close.value) == ("unknown option 'a.b.opt_01' (did you mean 'a.b.opt01'?); every "
                                "option is in the README's option reference")
    with pytest.raises(ConfigError) as far:
        Options({"a.b.zzzzzzzzzzzz": 1}, known=known)
    assert str(far.value) == (
        "unknown option 'a.b.zzzzzzzzzzzz'; known options under 'a.b.': a.b.opt00, a.b.opt01, "
        "a.b.opt02, a.b.opt03, a.b.opt04, a.b.opt05, a.b.opt06, a.b.opt07 and 12 more (every "
        "option: the README's option reference)")
