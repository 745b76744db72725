"""Slots in every IANA time zone with a clock change in 2026-2027, pure (no database).

For each expression, each zone and each change: every slot from three hours before the
change to three hours after it contains the instants it is computed for, gives itself
back from its first and its last millisecond, and touches the next (no gap, no
overlap). Zones whose clocks change identically over the two years are computed once
(listed together in a failure). Also the slots of 45- and 30-minute changes by value,
and that a slot computation ends (in a child process, with a timeout).
"""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
import zoneinfo
from datetime import datetime, timedelta, timezone

import pytest

from joblocks._core.schedule import Schedule

UTC = timezone.utc
HOUR = 3_600_000
SCAN_FROM = datetime(2026, 1, 1, tzinfo=UTC)
SCAN_TO = datetime(2028, 1, 1, tzinfo=UTC)
#: how far on either side of a change the slots are walked
AROUND = 3 * HOUR

EXPRESSIONS = [
    "0 */2 * * *",
    "0 */3 * * *",
    "30 */2 * * *",
    "15 */2 * * *",
    "45 */2 * * *",
    "*/15 * * * *",
    "0 * * * *",
    "0 2 * * *",
    "30 2 * * *",
    "45 2 * * *",
    "30 1 * * 0",
    "0 1-3 * * *",
    "*/30 2 * * *",
]


def ms(moment: datetime) -> int:
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def iso(value: int) -> str:
    return datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def _offset(zone: zoneinfo.ZoneInfo, at_ms: int) -> timedelta:
    offset = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=at_ms)).astimezone(zone)
    result = offset.utcoffset()
    assert result is not None
    return result


def _changes(zone: zoneinfo.ZoneInfo) -> tuple[tuple[int, timedelta, timedelta], ...]:
    """The clock changes of ``zone`` in the scan years: (instant ms, offset before,
    offset after), found by daily samples and bisection to the millisecond."""
    found = []
    day = 24 * HOUR
    at, end = ms(SCAN_FROM), ms(SCAN_TO)
    before = _offset(zone, at)
    while at < end:
        after = _offset(zone, at + day)
        if after != before:
            lo, hi = at, at + day  # offset(lo) == before, offset(hi) != before
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _offset(zone, mid) == before:
                    lo = mid
                else:
                    hi = mid
            found.append((hi, before, _offset(zone, hi)))
        before = after
        at += day
    return tuple(found)


@functools.cache
def zone_groups() -> dict[tuple[object, ...], list[str]]:
    """Zones with a clock change in the scan years, grouped by identical changes (the
    same offset at the start, the same changes at the same instants)."""
    groups: dict[tuple[object, ...], list[str]] = {}
    for name in sorted(zoneinfo.available_timezones()):
        try:
            zone = zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):  # pragma: no cover - a bad file
            continue
        changes = _changes(zone)
        if changes:
            groups.setdefault((_offset(zone, ms(SCAN_FROM)), changes), []).append(name)
    return groups


def check_around(schedule: Schedule, change: int) -> list[str]:
    """What is wrong with the slots of ``schedule`` around the change at ``change``."""
    problems = []
    for now in (change - 1, change, change + 1):
        start, end = schedule.slot(now)
        if not start <= now < end:
            problems.append(f"slot({iso(now)}) = {iso(start)} .. {iso(end)} misses it")
    now = change - AROUND
    slot = schedule.slot(now)
    while slot[0] <= change + AROUND:
        start, end = slot
        if not start <= now < end:
            problems.append(f"slot({iso(now)}) = {iso(start)} .. {iso(end)} misses it")
        for inside in (start, (start + end) // 2, end - 1):
            again = schedule.slot(inside)
            if again != slot:
                problems.append(
                    f"slot({iso(inside)}) = {iso(again[0])} .. {iso(again[1])}, but "
                    f"slot({iso(now)}) = {iso(start)} .. {iso(end)}"
                )
        following = schedule.slot(end)
        if following[0] != end:
            problems.append(
                f"{iso(start)} .. {iso(end)} is followed by "
                f"{iso(following[0])} .. {iso(following[1])}"
            )
        if problems:
            break
        now, slot = end, following
    return problems


def test_the_scan_covers_the_odd_zones() -> None:
    """The premise: the scan sees the zones with 30- and 45-minute offsets or changes,
    and every zone with daylight saving time in 2026 (hundreds)."""
    names = {name for group in zone_groups().values() for name in group}
    for name in ("Australia/Lord_Howe", "Pacific/Chatham", "Antarctica/Troll",
                 "Europe/Berlin", "America/New_York", "America/St_Johns"):  # fmt: skip
        assert name in names
    assert len(names) > 100
    assert "Asia/Kolkata" not in names  # no change


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_slots_tile_time_around_every_change(expression: str) -> None:
    groups = zone_groups()
    failures: list[str] = []
    # In a thread: a slot computation that never ends fails the test instead of hanging
    # the suite (the thread is a daemon).
    scan = threading.Thread(target=scan_zones, args=(expression, groups, failures), daemon=True)
    scan.start()
    scan.join(60)
    assert not scan.is_alive(), f"{expression!r}: the scan did not end within 60 s (a hang)"
    assert not failures, f"{len(failures)} changes go wrong, the first:\n" + "\n".join(
        failures[:10]
    )


def scan_zones(
    expression: str, groups: dict[tuple[object, ...], list[str]], failures: list[str]
) -> None:
    for (_, changes), names in groups.items():
        schedule = Schedule.parse(expression, names[0])
        for change, before, after in changes:
            try:
                problems = check_around(schedule, change)
            except Exception as exc:  # reported as a failure of the change
                problems = [f"raised {exc!r}"]
            if problems:
                zones = ", ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else "")
                failures.append(
                    f"{zones}: change at {iso(change)} ({before} -> {after}): {problems[0]}"
                )


# -- 45- and 30-minute changes, by value -----------------------------------------------


def utc(text: str) -> int:
    return ms(datetime.fromisoformat(text).replace(tzinfo=UTC))


@pytest.mark.parametrize(
    ("expression", "zone", "now", "expected"),
    [
        # Chatham, 5 April 2026: 03:45 +13:45 -> 02:45 +12:45 (14:00 UTC). The even hours
        # are 02:00 +13:45 (12:15 UTC) and 04:00 +12:45 (15:15 UTC): the repeated
        # 02:45-03:45 holds no 02:00 or 04:00, so one slot of three real hours.
        ("0 */2 * * *", "Pacific/Chatham", "2026-04-04T13:16:00", ("12:15", "15:15")),
        ("0 */2 * * *", "Pacific/Chatham", "2026-04-04T12:15:00", ("12:15", "15:15")),
        ("0 */2 * * *", "Pacific/Chatham", "2026-04-04T15:14:59", ("12:15", "15:15")),
        # Lord Howe, 5 April 2026: 02:00 +11 -> 01:30 +10:30 (15:00 UTC). 00:00 +11
        # (13:00), then 02:00 +10:30 (15:30): a 2.5-hour slot, and the 02:00 slot runs.
        ("0 */2 * * *", "Australia/Lord_Howe", "2026-04-04T14:00:00", ("13:00", "15:30")),
        ("0 */2 * * *", "Australia/Lord_Howe", "2026-04-04T15:29:59", ("13:00", "15:30")),
        ("0 */2 * * *", "Australia/Lord_Howe", "2026-04-04T15:30:00", ("15:30", "17:30")),
        # Every 15 minutes: both readings of the repeated half hour (01:30-02:00) fire.
        ("*/15 * * * *", "Australia/Lord_Howe", "2026-04-04T14:50:00", ("14:45", "15:00")),
        ("*/15 * * * *", "Australia/Lord_Howe", "2026-04-04T15:05:00", ("15:00", "15:15")),
        # A fixed-time job in the repeated half hour runs once, at the first reading:
        # 01:45 +11 is 14:45 UTC; the next is 01:45 +10:30 on 6 April (15:15 UTC).
        ("45 1 * * *", "Australia/Lord_Howe", "2026-04-04T15:20:00", ("14:45", "15:15")),
        # Lord Howe, 4 October 2026: 02:00 +10:30 -> 02:30 +11 (15:30 UTC). A fixed-time
        # job at the skipped 02:15 runs at the change; a 15-minute one skips 02:00-02:30.
        ("15 2 * * *", "Australia/Lord_Howe", "2026-10-03T15:30:00", ("15:30", "15:15")),
        ("*/15 * * * *", "Australia/Lord_Howe", "2026-10-03T15:29:59", ("15:15", "15:30")),
        # Chatham, 27 September 2026: 02:45 +12:45 -> 03:45 +13:45 (14:00 UTC): 03:00 is
        # skipped, a job at 03:00 runs at the change (03:45).
        ("0 3 * * *", "Pacific/Chatham", "2026-09-26T14:00:00", ("14:00", "13:15")),
    ],
)
def test_slots_at_odd_changes(
    expression: str, zone: str, now: str, expected: tuple[str, str]
) -> None:
    start, end = slot_within(Schedule.parse(expression, zone), utc(now))
    got = (iso(start)[11:16], iso(end)[11:16])
    assert got == expected, (iso(start), iso(end))
    assert start <= utc(now) < end
    assert end - start <= 25 * HOUR


def slot_within(schedule: Schedule, now: int, timeout: float = 60) -> tuple[int, int]:
    """``schedule.slot(now)`` in a daemon thread: a hang fails the test."""
    result: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def compute() -> None:
        try:
            result.append(schedule.slot(now))
        except BaseException as exc:  # raised again in the test's thread
            errors.append(exc)

    worker = threading.Thread(target=compute, daemon=True)
    worker.start()
    worker.join(timeout)
    assert not worker.is_alive(), f"{schedule!r}.slot({iso(now)}) did not end in {timeout} s"
    if errors:
        raise errors[0]
    return result[0]


HANG = """
import sys
from joblocks._core.schedule import Schedule
s = Schedule.parse("0 */2 * * *", "Pacific/Chatham")
for now in range({start}, {end}, 60_000):
    start, end = s.slot(now)
    assert start <= now < end, now
print("ok")
"""


def test_a_slot_computation_ends_in_chatham() -> None:
    """Every minute of the window that made cronsim's reverse walk spin for ever
    (12:15-15:10 UTC on 4 April 2026), in a child process that is killed if it hangs."""
    code = HANG.format(start=utc("2026-04-04T12:00:00"), end=utc("2026-04-04T16:00:00"))
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("Schedule.slot did not return within 60 s (Pacific/Chatham, 0 */2)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_step_guard_names_the_expression_and_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slot computation steps over a bounded number of wall times, then raises a
    ``ValueError`` naming the expression and the zone (here the bound is lowered to one,
    inside a repeated half hour, where the first wall time found is not an anchor)."""
    schedule = Schedule.parse("*/15 * * * *", "Australia/Lord_Howe")
    now = utc("2026-04-04T15:20:00")  # 01:50 +10:30, the second reading
    assert slot_within(schedule, now) == (utc("2026-04-04T15:15:00"), utc("2026-04-04T15:30:00"))
    monkeypatch.setattr("joblocks._core.schedule._MAX_STEPS", 1)
    with pytest.raises(ValueError, match=r"'\*/15 \* \* \* \*' \(time zone Australia/Lord_Howe\)"):
        schedule.slot(now)
