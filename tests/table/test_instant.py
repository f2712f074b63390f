from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hoodline.errors import TableError, TimelineError
from hoodline.table.instant import (
    ACTIONS,
    Instant,
    InstantTimeGenerator,
    State,
    format_timestamp,
    is_valid_timestamp,
    parse_timestamp,
    query_instant,
)

TS = "20240102030405678"


@pytest.mark.parametrize(
    ("name", "action", "state"),
    [
        (f"{TS}.commit.requested", "commit", State.REQUESTED),
        (f"{TS}.inflight", "commit", State.INFLIGHT),
        (f"{TS}.commit", "commit", State.COMPLETED),
        (f"{TS}.rollback.requested", "rollback", State.REQUESTED),
        (f"{TS}.rollback.inflight", "rollback", State.INFLIGHT),
        (f"{TS}.rollback", "rollback", State.COMPLETED),
        (f"{TS}.clean.requested", "clean", State.REQUESTED),
        (f"{TS}.clean.inflight", "clean", State.INFLIGHT),
        (f"{TS}.clean", "clean", State.COMPLETED),
        (f"{TS}.replacecommit.requested", "replacecommit", State.REQUESTED),
        (f"{TS}.replacecommit.inflight", "replacecommit", State.INFLIGHT),
        (f"{TS}.replacecommit", "replacecommit", State.COMPLETED),
    ],
)
def test_parse_and_format_round_trip(name: str, action: str, state: State) -> None:
    inst = Instant.parse(name)
    assert inst == Instant(TS, action, state)
    assert inst is not None and inst.file_name == name


@pytest.mark.parametrize(
    "name",
    [
        "hoodie.properties",
        f"{TS}.commit.inflight",  # commit's inflight is '<ts>.inflight' in layout 1
        f"{TS}.unknown",
        f"{TS[:-1]}.commit",
        f"{TS}.commit.requested.crc",
        ".temp",
        f"{TS}x.commit",
        "archived",
    ],
)
def test_parse_rejects_non_instant_files(name: str) -> None:
    assert Instant.parse(name) is None


def test_invalid_instant_values_raise() -> None:
    with pytest.raises(TimelineError, match="'2024'"):
        Instant("2024", "commit", State.COMPLETED)
    with pytest.raises(TimelineError, match="'bogus'"):
        Instant(TS, "bogus", State.COMPLETED)


def test_ordering_by_timestamp_then_action_then_state() -> None:
    a = Instant("20240101000000000", "commit", State.COMPLETED)
    b = Instant("20240101000000001", "clean", State.REQUESTED)
    c = Instant("20240101000000001", "commit", State.REQUESTED)
    d = Instant("20240101000000001", "commit", State.INFLIGHT)
    e = Instant("20240101000000001", "commit", State.COMPLETED)
    assert sorted([e, d, c, b, a]) == [a, b, c, d, e]
    assert a < e and e > a and a <= a and e >= d


def test_timestamp_helpers() -> None:
    moment = datetime(2024, 1, 2, 3, 4, 5, 678_999, tzinfo=UTC)
    assert format_timestamp(moment) == TS
    assert parse_timestamp(TS) == datetime(2024, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    assert is_valid_timestamp(TS)
    assert not is_valid_timestamp("20241302030405678")  # month 13
    assert not is_valid_timestamp("2024010203040567")


def _by_strptime(ts: str) -> datetime | None:
    try:
        base = datetime.strptime(ts[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        return None
    return base + timedelta(milliseconds=int(ts[14:]))


def _parsed(ts: str) -> datetime | None:
    try:
        return parse_timestamp(ts)
    except ValueError:
        return None


@settings(max_examples=400)
@given(st.tuples(st.integers(0, 9999), st.integers(0, 13), st.integers(0, 32),
                 st.integers(0, 25), st.integers(0, 61), st.integers(0, 62),
                 st.integers(0, 999)))
def test_parse_reads_and_refuses_what_strptime_does(fields: tuple[int, ...]) -> None:
    y, mo, d, h, mi, s, ms = fields
    ts = f"{y:04d}{mo:02d}{d:02d}{h:02d}{mi:02d}{s:02d}{ms:03d}"
    assert _parsed(ts) == _by_strptime(ts)


@pytest.mark.parametrize("ts", ["20240229000000000", "20230229000000000", "20240101240000000",
                                "20240101000060000", "00000101000000000", "20240431235959999"])
def test_parse_edges_agree_with_strptime(ts: str) -> None:
    assert _parsed(ts) == _by_strptime(ts)


class SteppingClock:
    def __init__(self, moments: list[datetime]) -> None:
        self.moments = list(moments)
        self.i = 0

    def __call__(self) -> datetime:
        m = self.moments[min(self.i, len(self.moments) - 1)]
        self.i += 1
        return m


def test_generator_uses_clock_when_it_advances() -> None:
    t0 = datetime(2024, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    gen = InstantTimeGenerator(SteppingClock([t0, t0 + timedelta(seconds=1)]))
    assert gen.next() == TS
    assert gen.next() == "20240102030406678"


def test_generator_strictly_increasing_when_clock_stands_still_or_steps_back() -> None:
    t0 = datetime(2024, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    gen = InstantTimeGenerator(SteppingClock([t0, t0, t0 - timedelta(hours=1)]))
    assert [gen.next(), gen.next(), gen.next()] == [
        "20240102030405678",
        "20240102030405679",
        "20240102030405680",
    ]


def test_generator_after_other_process_instant() -> None:
    t0 = datetime(2024, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    gen = InstantTimeGenerator(lambda: t0)
    # another process wrote an instant in the "future" (its clock runs ahead)
    assert gen.next(after="20240102030500999") == "20240102030501000"
    # carries over second/minute/day boundaries
    assert gen.next(after="20241231235959999") == "20250101000000000"
    with pytest.raises(TimelineError, match="'123'"):
        gen.next(after="123")


def test_a_timeline_far_ahead_of_the_clock_is_named_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An instant of 2099 on the timeline (a writer with a wrong clock) moved every later
    commit to 2099 with nothing said (damaged-table review)."""
    t0 = datetime(2024, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    gen = InstantTimeGenerator(lambda: t0)
    with caplog.at_level("WARNING"):
        gen.next(after="20240102033000000")  # 25 min ahead: skew, nothing said
        assert caplog.text == ""
        assert gen.next(after="20990101000000000") == "20990101000000001"
        gen.next(after="20990101000000001")
    assert caplog.text.count("is 27392 days, 20:55:54 ahead of this machine's clock") == 1
    assert "'20990101000000000'" in caplog.text


def test_generator_naive_clock_is_utc() -> None:
    gen = InstantTimeGenerator(lambda: datetime(2024, 1, 2, 3, 4, 5, 678_000))
    assert gen.next() == TS


@settings(max_examples=200, deadline=None)
@given(
    offsets=st.lists(st.integers(min_value=-10_000, max_value=10_000), min_size=1, max_size=40),
    afters=st.lists(st.one_of(st.none(), st.integers(0, 20_000)), min_size=40, max_size=40),
)
def test_generator_property_strictly_increasing(
    offsets: list[int], afters: list[int | None]
) -> None:
    base = datetime(2024, 6, 30, 23, 59, 59, 0, tzinfo=UTC)
    moments = [base + timedelta(milliseconds=o) for o in offsets]
    gen = InstantTimeGenerator(SteppingClock(moments))
    issued: list[str] = []
    for after_ms in afters[: len(offsets)]:
        after = (
            None if after_ms is None else format_timestamp(base + timedelta(milliseconds=after_ms))
        )
        ts = gen.next(after=after)
        assert len(ts) == 17 and is_valid_timestamp(ts)
        if after is not None:
            assert ts > after
        if issued:
            assert ts > issued[-1]
        issued.append(ts)


@settings(max_examples=200, deadline=None)
@given(
    ts=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2999, 12, 31)),
    action=st.sampled_from(ACTIONS),
    state=st.sampled_from(list(State)),
)
def test_file_name_round_trip_property(ts: datetime, action: str, state: State) -> None:
    inst = Instant(format_timestamp(ts), action, state)
    assert Instant.parse(inst.file_name) == inst


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2999, 1, 1)),
        min_size=2,
        max_size=20,
    )
)
def test_string_order_is_time_order(moments: list[datetime]) -> None:
    stamps = [format_timestamp(m) for m in moments]
    truncated = [m.replace(microsecond=m.microsecond // 1000 * 1000) for m in moments]
    assert sorted(stamps) == [format_timestamp(m) for m in sorted(truncated)]


@pytest.mark.parametrize(("text", "bound"), [
    ("20240301101530123", "20240301101530123"),
    ("00000000000000000", "00000000000000000"),  # a bound of an incremental read
    ("000", "00000000000000000"),  # Java's usual "from the start" (it was refused)
    ("0", "00000000000000000"),
    ("20240301101530", "20240301101530000"),
    ("2024-03-01", "20240301000000000"),
    ("2024-03-01 10:15:30", "20240301101530000"),
    ("2024-03-01T10:15:30", "20240301101530000"),
    ("2024-03-01 10:15:30.1", "20240301101530100"),
    ("2024-03-01 10:15:30.123456", "20240301101530123"),
    (20240301101530123, "20240301101530123"),  # an int, as instant times look (a TypeError)
    (0, "00000000000000000"),
])
def test_query_times_are_read_as_java_hudis_as_of_instant(text: str | int, bound: str) -> None:
    assert query_instant(text, "as-of time") == bound


@pytest.mark.parametrize(("text", "why"), [
    ("yesterday", "is not a time hoodline reads: give one of yyyyMMddHHmmssSSS"),
    ("2024-03-01T10:15:30Z", "is not a time hoodline reads"),  # no offsets: the table's zone
    ("2024-03", "is not a time hoodline reads"),
    ("2024-02-30", "is not a calendar time"),
    ("20241301000000", "is not a calendar time"),
])
def test_query_times_hoodline_cannot_read_are_refused_by_name(text: str, why: str) -> None:
    with pytest.raises(TableError, match=rf"as-of time '{re.escape(text)}' {why}"):
        query_instant(text, "as-of time")


def test_a_query_time_of_another_type_is_refused_by_name() -> None:
    with pytest.raises(TableError, match=r"as-of time 2024\.5 is a float, not a time: give one "
                       "of yyyyMMddHHmmssSSS"):
        query_instant(2024.5, "as-of time")  # type: ignore[arg-type]
