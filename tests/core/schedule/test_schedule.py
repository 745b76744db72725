"""``Schedule``: cron expressions as slots, pure (a fake now; no database).

DST: Europe/Berlin and America/New_York, spring and autumn 2026, for a fixed-time
job (Debian cron's rules: the skipped time runs right after the skip, the repeated
time once) and for an hourly one (every real hour its own slot).
"""

from __future__ import annotations

import pickle
import sys
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joblocks._core.schedule import Schedule

UTC = timezone.utc


def ms(text: str) -> int:
    """Epoch ms of an ISO time in UTC ('2026-03-29T01:00')."""
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def iso(value: int) -> str:
    return datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def slot_iso(schedule: Schedule, now: str) -> tuple[str, str]:
    start, end = schedule.slot(ms(now))
    return iso(start), iso(end)


# -- plain slots ---------------------------------------------------------------------


def test_every_five_minutes() -> None:
    s = Schedule.parse("*/5 * * * *")
    assert slot_iso(s, "2026-12-01T22:37:12") == ("2026-12-01T22:35:00", "2026-12-01T22:40:00")
    # a fire time belongs to the slot it starts
    assert slot_iso(s, "2026-12-01T22:40:00") == ("2026-12-01T22:40:00", "2026-12-01T22:45:00")
    just_before = ms("2026-12-01T22:40:00") - 1
    assert s.slot(just_before) == (ms("2026-12-01T22:35:00"), ms("2026-12-01T22:40:00"))


def test_previous_slot() -> None:
    s = Schedule.parse("*/5 * * * *")
    now = ms("2026-12-01T22:37:12")
    assert s.previous_slot(now) == (ms("2026-12-01T22:30:00"), ms("2026-12-01T22:35:00"))
    irregular = Schedule.parse("0 9 * * MON-FRI")
    monday = ms("2026-11-30T10:00:00")  # a Monday
    assert irregular.slot(monday) == (ms("2026-11-30T09:00:00"), ms("2026-12-01T09:00:00"))
    assert irregular.previous_slot(monday) == (
        ms("2026-11-27T09:00:00"),  # Friday
        ms("2026-11-30T09:00:00"),
    )


def test_seconds_field() -> None:
    if sys.version_info < (3, 10):
        # cronsim 2.7, the first to read a seconds field, needs Python 3.10: on 3.9 the
        # expression is refused with a message that says so (documented).
        with pytest.raises(ValueError, match=r"a seconds field needs cronsim >= 2\.7"):
            Schedule.parse("*/20 * * * * *")
        return
    s = Schedule.parse("*/20 * * * * *")
    assert slot_iso(s, "2026-12-01T22:00:31") == ("2026-12-01T22:00:20", "2026-12-01T22:00:40")


def test_aliases() -> None:
    assert Schedule.parse("@hourly").slot(ms("2026-12-01T22:10:00")) == (
        ms("2026-12-01T22:00:00"),
        ms("2026-12-01T23:00:00"),
    )
    assert Schedule.parse("@DAILY").expression == "@DAILY"


def test_odd_expressions() -> None:
    # day-of-month OR day-of-week when both are restricted (Debian cron)
    s = Schedule.parse("0 0 13 * FRI")
    assert slot_iso(s, "2026-11-10T12:00") == ("2026-11-06T00:00:00", "2026-11-13T00:00:00")
    assert slot_iso(s, "2026-11-13T12:00") == ("2026-11-13T00:00:00", "2026-11-20T00:00:00")
    # last day of the month, Sunday as 7, Nth weekday
    assert slot_iso(Schedule.parse("0 0 L * *"), "2026-02-10T00:00") == (
        "2026-01-31T00:00:00",
        "2026-02-28T00:00:00",
    )
    assert slot_iso(Schedule.parse("0 0 * * 7"), "2026-12-01T00:00") == (
        "2026-11-29T00:00:00",
        "2026-12-06T00:00:00",
    )
    assert slot_iso(Schedule.parse("0 0 * * MON#1"), "2026-12-01T00:00") == (
        "2026-11-02T00:00:00",
        "2026-12-07T00:00:00",
    )
    # 29 February only: slots of four years
    assert slot_iso(Schedule.parse("0 0 29 2 *"), "2026-06-01T00:00") == (
        "2024-02-29T00:00:00",
        "2028-02-29T00:00:00",
    )


# -- value semantics -------------------------------------------------------------------


def test_frozen_hashable_equal() -> None:
    a = Schedule.parse("*/5  * * * *", "Europe/Berlin")
    b = Schedule("*/5 * * * *", ZoneInfo("Europe/Berlin"))
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a.expression == "*/5 * * * *"
    assert a.timezone == "Europe/Berlin"
    assert a != Schedule.parse("*/5 * * * *")
    assert Schedule.parse("*/5 * * * *").timezone is None
    assert Schedule.parse("* * * * *", UTC).timezone == "UTC"
    with pytest.raises(AttributeError):
        a.expression = "* * * * *"
    assert pickle.loads(pickle.dumps(a)) == a  # noqa: S301 - our own bytes
    assert repr(a) == "Schedule('*/5 * * * *', timezone='Europe/Berlin')"


@pytest.mark.parametrize(
    ("expression", "error", "words"),
    [
        (5, TypeError, "cron_expr must be a str"),
        ("", ValueError, "cron_expr must not be empty"),
        ("* * * *", ValueError, "has 4 fields"),
        ("61 * * * *", ValueError, "cron_expr '61 * * * *' is not a valid cron expression"),
        ("0 0 31 2 *", ValueError, "not a valid cron expression"),
        ("@reboot", ValueError, "unknown alias"),
        ("* * */20 * 1L", ValueError, "never fires"),
    ],
)
def test_bad_expressions(expression: object, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words.replace("*", r"\*")):
        Schedule.parse(expression, name="cron_expr")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("zone", "error", "words"),
    [
        (3, TypeError, "timezone must be a str"),
        ("Mars/Olympus", ValueError, "timezone 'Mars/Olympus' is not a known"),
        ("", ValueError, "timezone must not be empty"),
        (timezone(timedelta(hours=2)), ValueError, "has no IANA name"),
    ],
)
def test_bad_timezones(zone: object, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        Schedule.parse("* * * * *", zone)  # type: ignore[arg-type]


def test_now_must_be_int() -> None:
    with pytest.raises(TypeError, match="now_ms must be an int"):
        Schedule.parse("* * * * *").slot(1.5)  # type: ignore[arg-type]


# -- DST (local-time schedules) --------------------------------------------------------


# (zone, UTC time inside the day of the change, the fixed-time job's slots around it)
DAILY_0230 = [
    # Berlin, spring: 02:00 CET -> 03:00 CEST on 29 March; 02:30 does not exist, the job
    # runs at 03:00 CEST (01:00 UTC) that day
    (
        "Europe/Berlin",
        "2026-03-29T00:59:59",
        ("2026-03-28T01:30:00", "2026-03-29T01:00:00"),
        ("2026-03-29T01:00:00", "2026-03-30T00:30:00"),
    ),
    # Berlin, autumn: 03:00 CEST -> 02:00 CET on 25 October; 02:30 happens twice, the job
    # runs once (the first, 00:30 UTC): one 25-hour slot
    (
        "Europe/Berlin",
        "2026-10-25T01:45:00",
        ("2026-10-25T00:30:00", "2026-10-26T01:30:00"),
        ("2026-10-25T00:30:00", "2026-10-26T01:30:00"),
    ),
    # New York, spring: 02:00 EST -> 03:00 EDT on 8 March
    (
        "America/New_York",
        "2026-03-08T06:59:59",
        ("2026-03-07T07:30:00", "2026-03-08T07:00:00"),
        ("2026-03-08T07:00:00", "2026-03-09T06:30:00"),
    ),
    # New York, autumn: 02:00 EDT -> 01:00 EST on 1 November (02:30 happens once)
    (
        "America/New_York",
        "2026-11-01T07:29:59",
        ("2026-10-31T06:30:00", "2026-11-01T07:30:00"),
        ("2026-11-01T07:30:00", "2026-11-02T07:30:00"),
    ),
]


@pytest.mark.parametrize(("zone", "before", "slot_before", "slot_after"), DAILY_0230)
def test_dst_fixed_time_job(
    zone: str, before: str, slot_before: tuple[str, str], slot_after: tuple[str, str]
) -> None:
    s = Schedule.parse("30 2 * * *", zone)
    assert slot_iso(s, before) == slot_before
    after = iso(ms(before) + 1000)
    assert slot_iso(s, after) == slot_after


def test_dst_autumn_repeated_hour_runs_once() -> None:
    """Berlin, 25 October: every instant of the repeated hour (both readings of 02:xx)
    is in the one slot started by the first 02:30 — no second run at the second 02:30."""
    s = Schedule.parse("30 2 * * *", "Europe/Berlin")
    expected = (ms("2026-10-25T00:30:00"), ms("2026-10-26T01:30:00"))
    for minute in range(0, 120, 5):
        now = ms("2026-10-25T00:30:00") + minute * 60_000
        assert s.slot(now) == expected, iso(now)


@pytest.mark.parametrize(
    ("zone", "day"),
    [
        ("Europe/Berlin", "2026-03-29"),
        ("Europe/Berlin", "2026-10-25"),
        ("America/New_York", "2026-03-08"),
        ("America/New_York", "2026-11-01"),
    ],
)
def test_dst_hourly_job_every_real_hour(zone: str, day: str) -> None:
    """An hourly schedule in local time has one-hour slots straight through the change
    (23 or 25 slots that day, each a real hour)."""
    s = Schedule.parse("0 * * * *", zone)
    now = ms(f"{day}T00:00:00")
    for _ in range(30):
        start, end = s.slot(now)
        assert end - start == 3_600_000, iso(start)
        assert start <= now < end
        now = end


ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]
EXPRESSIONS = [
    "30 2 * * *",
    "0 * * * *",
    "*/5 * * * *",
    "0 */2 * * *",
    "0 1-3 * * *",
    "15 3 * * SUN",
    "*/20 * * * * *",
    "0 0 L * *",
]
# around the 2026 transitions (and an ordinary day)
AROUND = [
    ms(t) for t in ("2026-03-28T00:00", "2026-10-24T00:00", "2026-10-03T00:00", "2026-04-04T00:00")
]


@settings(max_examples=300, deadline=None)
@given(
    # A seconds field needs cronsim 2.7 (Python 3.10+); 3.9 refuses it (test_seconds_field).
    expression=st.sampled_from(
        EXPRESSIONS
        if sys.version_info >= (3, 10)
        else [e for e in EXPRESSIONS if len(e.split()) != 6]
    ),
    zone=st.sampled_from(ZONES),
    base=st.sampled_from(AROUND),
    offset=st.integers(min_value=0, max_value=3 * 24 * 3_600_000),
)
def test_slots_tile_time(expression: str, zone: str, base: int, offset: int) -> None:
    """Any now: the slot contains it, every instant of it gives the same slot, and the
    slots before and after it touch it (no gap, no overlap)."""
    s = Schedule.parse(expression, zone)
    now = base + offset
    start, end = s.slot(now)
    assert start <= now < end
    assert s.slot(start) == (start, end)
    assert s.slot(end - 1) == (start, end)
    assert s.slot(end)[0] == end
    assert s.previous_slot(now)[1] == start
