"""Lease state that is exact, on every database × face (issue 11).

- the millisecond rule: every database's "now" is the floor of its clock in epoch ms;
- the lost-lease rule: a lost lease stays lost, and its refresh leaves the row alone;
- the token rule: an acquire of an expired row is a new grant with a new token, even for
  the same holder, so a stale lease never acts on a later grant;
- ``remaining()`` never promises more than the database gives;
- ``Lease.refresh(min_hold=...)``: keep others out at least until the refresh + min_hold.
"""

from __future__ import annotations

import asyncio
import calendar
import math
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa

import joblocks
import joblocks.aio
from joblocks._core import ops as _ops
from joblocks._core.options import LeaseOptions
from joblocks._sql.dialects import statement_now_sql

MS = timedelta(milliseconds=1)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def ms_of(moment: datetime) -> int:
    """Epoch milliseconds of an aware datetime, floored, in integer arithmetic."""
    return (moment - EPOCH) // MS


# -- the millisecond rule ----------------------------------------------------------------


def _clock_reading(backend: str, now_sql: str) -> str:
    """A statement reading joblocks' "now" and the raw clock it is made from, together."""
    if backend == "sqlite":
        return f"SELECT {now_sql}, strftime('%Y-%m-%d %H:%M:%f', 'now')"
    if backend == "postgresql":
        return f"SELECT {now_sql}, statement_timestamp()"
    return f"SELECT {now_sql}, UTC_TIMESTAMP(6)"


def _exact_ms(backend: str, raw: Any) -> int:
    if backend == "sqlite":  # 'YYYY-MM-DD HH:MM:SS.SSS': SQLite's clock is whole ms
        stamp, millis = str(raw).split(".")
        parsed = time.strptime(stamp, "%Y-%m-%d %H:%M:%S")
        return calendar.timegm(parsed) * 1000 + int(millis)
    if raw.tzinfo is None:  # MariaDB's UTC_TIMESTAMP(6): naive UTC
        raw = raw.replace(tzinfo=timezone.utc)
    return ms_of(raw)


def test_database_now_is_the_floor_of_its_clock_in_ms(backend: str, db_url: str) -> None:
    """joblocks' "now" equals the exact epoch ms of the clock it reads, every time."""
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            reading = sa.text(_clock_reading(backend, statement_now_sql(engine.dialect)))
            off = []
            for _ in range(3_000):
                now, raw = conn.execute(reading).one()
                expected = _exact_ms(backend, raw)
                if int(now) != expected:
                    off.append(int(now) - expected)
    finally:
        engine.dispose()
    assert off == [], f"{len(off)} of 3000 readings off by {sorted(set(off))} ms"


def test_an_acquire_once_the_ttl_has_passed_is_granted(make_model: Any, key: str) -> None:
    """acquire(k, 10, A), sleep 10 ms, acquire(k, 10, B): granted, every time."""
    model = make_model()
    refused = 0
    for i in range(300):
        assert model.acquire(f"{key}-{i}", 10, "A")
        time.sleep(0.010)
        refused += not model.acquire(f"{key}-{i}", 10, "B")
    assert refused == 0, f"{refused} of 300 acquires refused after the ttl had passed"


# -- the lost-lease rule -----------------------------------------------------------------


def test_a_lost_lease_refuses_to_refresh_and_leaves_the_row_alone(
    make_model: Any, key: str
) -> None:
    model = make_model()
    held = model.try_lease(key, 50)
    time.sleep(0.1)
    with pytest.raises(joblocks.LeaseLost, match=key):
        held.ensure_held()
    before = model.peek(key)
    assert held.refresh(10_000) is False
    after = model.peek(key)
    assert (after.fence, after.expires_at) == (before.fence, before.expires_at)
    assert after.expired
    assert held.lost
    assert held.remaining() == timedelta(0)
    with pytest.raises(joblocks.LeaseLost):
        held.ensure_held()
    assert model.acquire(key, 10_000, "someone-else")  # the row is free, as the lease says


def test_a_lease_that_ran_out_does_not_refresh_back_to_life(make_model: Any, key: str) -> None:
    """Never observed lost, but expired in the database: its grant is over."""
    model = make_model()
    held = model.try_lease(key, 50)
    time.sleep(0.1)
    before = model.peek(key)
    assert held.refresh(10_000) is False
    assert held.lost
    after = model.peek(key)
    assert (after.fence, after.expires_at) == (before.fence, before.expires_at)
    with pytest.raises(joblocks.LeaseLost):
        held.ensure_held()


def test_a_live_lease_refreshes_and_stays_held(make_model: Any, key: str) -> None:
    model = make_model()
    held = model.try_lease(key, 10_000)
    assert held.refresh(20_000) is True
    held.ensure_held()
    assert not held.lost
    assert held.remaining() > timedelta(seconds=19)
    assert held.release() is True
    assert held.refresh() is False  # released: nothing sent, nothing revived
    assert model.peek(key) is None


# -- the token rule ----------------------------------------------------------------------


@pytest.mark.acquire_paths
def test_taking_back_an_expired_row_is_a_new_grant(model: Any, key: str) -> None:
    """Same holder, expired row: a new, larger token (every acquire path)."""
    first = model.acquire_token(key, 50, "w1")
    time.sleep(0.1)
    assert model.peek(key).expired
    second = model.acquire_token(key, 10_000, "w1")
    assert first is not None
    assert second is not None
    assert second > first
    assert model.peek(key).fence == second
    third = model.acquire_token(key, 10_000, "w1")  # re-entrant on a live row: kept
    assert third == second
    assert model.peek(key).fence == second


def _fences(db_url: str, held: Any) -> bool:
    """Whether a fenced write under ``held`` would happen now."""
    clause = getattr(held, "_target", held).is_held_clause()  # the asyncio view wraps it
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            return bool(conn.execute(sa.select(clause)).scalar())
    finally:
        engine.dispose()


@pytest.mark.acquire_paths
def test_a_stale_lease_never_acts_on_a_later_grant_to_the_same_holder(
    model: Any, key: str, db_url: str
) -> None:
    stale = model.try_lease(key, 50, holder="w1")
    time.sleep(0.1)
    fresh = model.try_lease(key, 10_000, holder="w1")
    assert fresh.token > stale.token
    assert _fences(db_url, fresh)
    assert not _fences(db_url, stale)
    assert stale.release() is False  # another grant: nothing deleted
    assert model.peek(key).fence == fresh.token
    with pytest.raises(joblocks.LeaseLost):
        stale.ensure_held()
    assert fresh.refresh() is True
    fresh.ensure_held()
    assert fresh.release() is True
    assert model.peek(key) is None


@pytest.mark.acquire_paths
def test_a_stale_lease_cannot_refresh_a_later_grant(model: Any, key: str) -> None:
    stale = model.try_lease(key, 50, holder="w1")
    time.sleep(0.1)
    fresh = model.try_lease(key, 10_000, holder="w1")
    row = model.peek(key)
    assert stale.refresh(60_000) is False
    assert model.peek(key).expires_at == row.expires_at
    with pytest.raises(joblocks.LeaseLost):
        stale.ensure_held()
    fresh.ensure_held()
    fresh.release()


# -- remaining() never overstates ----------------------------------------------------------


def _overstatements(model: Any, held: Any) -> float:
    """By how much remaining() exceeds the database's own view read just before it (ms)."""
    db_now = model.now_ms()
    local = held.remaining() / MS
    db_view = ms_of(held.expires_at) - db_now  # an upper bound of the truth at remaining()
    return max(0.0, local - db_view)


def test_remaining_never_exceeds_the_databases_view(make_model: Any, key: str) -> None:
    model = make_model()
    over = []
    for i in range(200):
        held = model.try_lease(f"{key}-{i}", 60_000)
        assert held.expires_at == model.peek(f"{key}-{i}").expires_at
        over.append(_overstatements(model, held))
        assert held.refresh(30_000) is True
        over.append(_overstatements(model, held))
        held.release()
    worst = max(over)
    assert worst == 0, f"{sum(v > 0 for v in over)} of {len(over)} overstated, by {worst:.3f} ms"


# -- refresh(min_hold=...) ---------------------------------------------------------------


def test_refresh_with_min_hold_keeps_the_row_after_release(make_model: Any, key: str) -> None:
    model = make_model()
    held = model.try_lease(key, 10_000)
    assert held.refresh(20_000, min_hold=5_000) is True
    refreshed_at = held.expires_at - 20_000 * MS  # the database's now at the refresh
    assert held.release() is True
    row = model.peek(key)
    assert row is not None, "released at once despite min_hold"
    assert (row.fence, row.expires_at) == (held.token, refreshed_at + 5_000 * MS)
    assert model.acquire(key, 1_000, "someone-else") is False


def test_refresh_min_hold_never_shortens_an_earlier_hold(make_model: Any, key: str) -> None:
    model = make_model()
    held = model.try_lease(key, 30_000, min_hold=20_000)
    acquired = model.peek(key).acquired_at
    assert held.refresh(10_000, min_hold=timedelta(seconds=1)) is True
    assert held.release() is True
    assert model.peek(key).expires_at == acquired + 20_000 * MS


def test_a_later_longer_min_hold_wins(make_model: Any, key: str) -> None:
    model = make_model()
    held = model.try_lease(key, 30_000, min_hold=1_000)
    time.sleep(0.01)
    assert held.refresh(30_000, min_hold=8_000) is True
    later = held.expires_at - 30_000 * MS + 8_000 * MS
    assert held.refresh(30_000) is True  # no min_hold: the promise stands
    assert held.release() is True
    assert model.peek(key).expires_at == later


def test_refresh_min_hold_zero_or_run_past_releases_at_once(make_model: Any, key: str) -> None:
    model = make_model()
    held = model.try_lease(key, 10_000)
    assert held.refresh(min_hold=0) is True
    assert held.release() is True
    assert model.peek(key) is None
    held = model.try_lease(key, 10_000)
    assert held.refresh(min_hold=30) is True
    time.sleep(0.06)  # the hold has passed
    assert held.release() is True
    assert model.peek(key) is None


def test_a_refused_refresh_with_min_hold_holds_nothing(make_model: Any, key: str) -> None:
    model = make_model()
    held = model.try_lease(key, 10_000, holder="w1")
    assert model.delete(key)
    assert held.refresh(10_000, min_hold=5_000) is False
    assert model.acquire(key, 10_000, "w2")
    assert held.release() is False
    assert model.peek(key).holder == "w2"


BAD_MIN_HOLDS: list[tuple[Any, type[Exception]]] = [
    (-1, ValueError),
    (math.nan, ValueError),
    (math.inf, ValueError),
    (timedelta(seconds=-1), ValueError),
    (366 * 24 * 3600 * 1000 + 1, ValueError),
    (True, TypeError),
    ("5000", TypeError),
]


@pytest.mark.parametrize(("bad", "exc"), BAD_MIN_HOLDS)
@pytest.mark.parametrize("face_name", ["sync", "aio"])
def test_bad_min_hold_on_refresh_is_refused_before_the_database(
    bad: Any, exc: type[Exception], face_name: str
) -> None:
    """A lease on an unreachable database: any statement would raise LockBackendError."""
    url = "postgresql://u:secret@127.0.0.1:1/db"
    opts = LeaseOptions(
        ttl_ms=1_000,
        holder="w1",
        keepalive=False,
        renew_every=None,
        min_hold=None,
        wait=None,
        on_lost=None,
        max_hold=None,
    )
    state = opts.lease_state("job", _ops.Grant(7, None, None), time.monotonic(), 1_000)
    if face_name == "sync":
        held: Any = joblocks.Lease(joblocks.JobLockModel(url), **state)
        with pytest.raises(exc, match="min_hold"):
            held.refresh(1_000, min_hold=bad)
    else:

        async def main() -> None:
            model = joblocks.aio.JobLockModel(url)
            held = joblocks.aio.Lease(model, **state)
            with pytest.raises(exc, match="min_hold"):
                await held.refresh(1_000, min_hold=bad)
            await model.dispose()

        asyncio.run(main())
