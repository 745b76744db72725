"""``schedule=``: one start per cron slot, for every database × face × acquire path.

Same-slot behaviour uses a yearly schedule (the test runs well inside one slot);
slot changes use a two-second one and wait (bounded) for the database's clock to
pass the slot's end, so nothing depends on how fast the test runs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import sqlalchemy as sa

import joblocks
from joblocks import Schedule
from joblocks._db.connections import from_ms

#: Also through PgBouncer (both modes) and on a serializable server.
DEPLOYMENTS = True

YEARLY = "0 0 1 1 *"
TWO_SECONDS = "*/2 * * * * *"
#: The tests below run through real two-second slots: a seconds field, which cronsim
#: reads from 2.7 on (Python 3.10+). On Python 3.9 such an expression is refused
#: (tests/core/schedule/test_schedule.py::test_seconds_field); minute slots would make these
#: tests take minutes.
needs_seconds = pytest.mark.skipif(
    sys.version_info < (3, 10), reason="seconds-field cron needs cronsim 2.7 (Python 3.10+)"
)


@pytest.fixture
def events() -> Iterator[list[joblocks.Event]]:
    seen: list[joblocks.Event] = []
    joblocks.add_listener(seen.append)
    yield seen
    joblocks.remove_listener(seen.append)


def kinds(events: list[joblocks.Event], key: str) -> list[str]:
    return [e.kind for e in events if e.key == key and e.kind != "renewed"]


def ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def wait_for_db_time(model: Any, at_ms: int, timeout: float = 10.0) -> None:
    """Sleep until the database's clock reads ``at_ms`` or later."""
    deadline = time.monotonic() + timeout
    while model.now_ms() < at_ms:
        assert time.monotonic() < deadline, "the database's clock did not reach the slot end"
        time.sleep(0.05)


@pytest.mark.acquire_paths
def test_one_start_per_slot(model: Any, key: str, events: list[joblocks.Event]) -> None:
    first = model.try_lease(key, 30_000, holder="a", schedule=YEARLY)
    assert first is not None
    assert first.slot == Schedule.parse(YEARLY).slot(ms(first.acquired_at))
    start, end = first.slot
    assert start <= ms(first.acquired_at) < end
    # another replica in the same slot: skipped (the run is in progress)
    assert model.try_lease(key, 30_000, holder="b", schedule=YEARLY) is None
    assert first.release() is True
    # released early: the row stays until the slot's end, so a late replica is skipped too
    row = model.peek(key)
    assert row.holder == "a"
    assert row.expires_at == from_ms(end)
    assert model.try_lease(key, 30_000, holder="b", schedule=YEARLY) is None
    # and so is the holder that ran it (one start per slot, whoever asks)
    assert model.try_lease(key, 30_000, holder="a", schedule=YEARLY) is None
    assert kinds(events, key) == ["acquired", "skipped", "released", "skipped", "skipped"]
    assert {e.token for e in events if e.kind == "skipped"} == {first.token}
    # without schedule= the key is simply held until the end of the slot
    assert model.try_lease(key, 30_000, holder="b") is None


@pytest.mark.acquire_paths
def test_a_crashed_run_still_counts(model: Any, key: str) -> None:
    """A run whose lease ran out (its worker died) was the slot's start: no other one,
    while a plain lease would be taken over."""
    crashed = model.try_lease(key, 200, holder="a", schedule=YEARLY)
    assert crashed is not None
    wait_for_db_time(model, ms(crashed.expires_at))
    assert model.try_lease(key, 30_000, holder="b", schedule=YEARLY) is None
    taken_over = model.try_lease(key, 30_000, holder="b")  # no schedule: taken over
    assert taken_over is not None
    taken_over.release()


def backdate(db_url: str, table_name: str, key: str, by_ms: int) -> None:
    """Move ``key``'s row back by ``by_ms``: its run started that much earlier."""
    table = sa.table(table_name, sa.column("id"), sa.column("acquired_at"), sa.column("expires_at"))
    back = {"acquired_at": table.c.acquired_at - by_ms, "expires_at": table.c.expires_at - by_ms}
    engine = sa.create_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.update(table).where(table.c.id == key).values(back))
    finally:
        engine.dispose()


@pytest.mark.acquire_paths
def test_the_next_slot_starts_again_after_a_backdated_run(
    model: Any, key: str, db_url: str, table_name: str
) -> None:
    """What test_next_slot_starts_again proves through a real slot, with the run moved
    back by more than a (yearly) slot instead of waiting for the next one."""
    first = model.try_lease(key, 30_000, holder="a", schedule=YEARLY)
    assert first is not None
    first.release()
    assert model.try_lease(key, 30_000, holder="b", schedule=YEARLY) is None  # this slot's run
    backdate(db_url, table_name, key, 400 * 24 * 3_600_000)  # it ran in last year's slot
    second = model.try_lease(key, 30_000, holder="b", schedule=YEARLY)
    assert second is not None
    assert second.slot == first.slot  # this slot: its run is now a year old
    assert second.token > first.token
    second.release()


@pytest.mark.slow  # real two-second slots: the slow step
@needs_seconds
def test_next_slot_starts_again(model: Any, key: str) -> None:
    first = model.try_lease(key, 30_000, holder="a", schedule=TWO_SECONDS)
    assert first is not None
    first.release()
    wait_for_db_time(model, first.slot[1])
    second = model.try_lease(key, 30_000, holder="b", schedule=TWO_SECONDS)
    assert second is not None
    assert second.slot[0] >= first.slot[1]
    assert second.token > first.token
    second.release()


@pytest.mark.slow  # real two-second slots: the slow step
@needs_seconds
def test_a_run_in_progress_blocks_past_its_slot(
    model: Any, key: str, events: list[joblocks.Event]
) -> None:
    running = model.try_lease(key, 30_000, holder="a", schedule=TWO_SECONDS)
    assert running is not None
    wait_for_db_time(model, running.slot[1])
    # the next slot: still running, so taken (not skipped), and the next slot is not used up
    assert model.try_lease(key, 30_000, holder="b", schedule=TWO_SECONDS) is None
    assert kinds(events, key)[-1] == "conflict"
    assert running.release() is True
    assert model.peek(key) is None  # its slot is over: nothing left to hold
    late = model.try_lease(key, 30_000, holder="b", schedule=TWO_SECONDS)
    assert late is not None
    assert late.slot[0] >= running.slot[1]
    late.release()


@pytest.mark.slow  # real two-second slots: the slow step
@needs_seconds
def test_release_keeps_the_later_of_min_hold_and_slot_end(model: Any, key: str) -> None:
    hour = 3_600_000
    held = model.try_lease(key, 30_000, holder="a", schedule=TWO_SECONDS, min_hold=hour)
    assert held is not None
    held.release()
    assert model.peek(key).expires_at == from_ms(ms(held.acquired_at) + hour)
    other = key + "-2"
    held = model.try_lease(other, 30_000, holder="a", schedule=YEARLY, min_hold=1)
    held.release()
    assert model.peek(other).expires_at == from_ms(held.slot[1])


def test_run_with_lock_and_lease(model: Any, key: str) -> None:
    ran: list[int] = []
    assert model.run_with_lock(key, 30_000, lambda: ran.append(1), schedule=YEARLY) is True
    assert model.run_with_lock(key, 30_000, lambda: ran.append(2), schedule=YEARLY) is False
    assert ran == [1]
    with pytest.raises(joblocks.LockNotAcquired):
        model.lease(key, 30_000, schedule=YEARLY)
    other = key + "-2"
    with model.lease(other, 30_000, schedule=Schedule.parse(YEARLY, "Europe/Berlin")) as held:
        assert held.slot == Schedule.parse(YEARLY, "Europe/Berlin").slot(ms(held.acquired_at))


def test_wait_does_not_wait_for_a_slot_already_run(model: Any, key: str) -> None:
    held = model.try_lease(key, 30_000, holder="a", schedule=YEARLY)
    held.release()
    started = time.monotonic()
    assert model.try_lease(key, 30_000, holder="b", schedule=YEARLY, wait=60_000) is None
    assert time.monotonic() - started < 30  # skipped at once, not after the wait


def test_decorator(make_model: Any, face: str, key: str) -> None:
    model = make_model()
    runs: list[str] = []
    target = model.model
    if face == "sync":

        @joblocks.single_instance(key, 30_000, model=target, schedule=YEARLY, timezone="UTC")
        def job(name: str) -> str:
            runs.append(name)
            return name

        assert job("one") == "one"
        assert job("two") is None
    else:
        from tests.support.faces import run_on

        @joblocks.single_instance(key, 30_000, model=target, schedule=YEARLY, timezone="UTC")
        async def ajob(name: str) -> str:
            runs.append(name)
            return name

        assert run_on(model.loop, ajob("one")) == "one"
        assert run_on(model.loop, ajob("two")) is None
    assert runs == ["one"]


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"schedule": 5}, TypeError, "schedule must be a str"),
        ({"schedule": "*/5 * * *"}, ValueError, "schedule '.*' has 4 fields"),
        ({"schedule": "61 * * * *"}, ValueError, "not a valid cron expression"),
        ({"timezone": "UTC"}, ValueError, "timezone needs schedule="),
        ({"schedule": "* * * * *", "timezone": "Nowhere/Land"}, ValueError, "timezone"),
        ({"schedule": "* * * * *", "timezone": 2}, TypeError, "timezone must be"),
        (
            {"schedule": Schedule.parse("* * * * *", "UTC"), "timezone": "Europe/Berlin"},
            ValueError,
            "differs from the timezone",
        ),
    ],
)
def test_bad_input_before_the_database(
    make_model: Any, key: str, options: dict[str, Any], error: type[Exception], words: str
) -> None:
    model = make_model()
    with pytest.raises(error, match=words):
        model.try_lease(key, 30_000, **options)
    with pytest.raises(error, match=words):
        model.run_with_lock(key, 30_000, lambda: None, **options)
    with pytest.raises(error, match=words):
        joblocks.single_instance(key, 30_000, **options)
    assert model.peek(key) is None
