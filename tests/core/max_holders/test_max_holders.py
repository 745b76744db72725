"""Counted leases (``max_holders=N``) on every database × face × acquire path (the
``model`` fixture): N places, each a full lease; the N+1st refused or waiting; mixed
use refused; holders shown."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, select, update

import joblocks
from joblocks._core.places import PLACE_MARK, group_holder, place_id
from joblocks._util.validate import MAX_KEY_BYTES


def take(model: Any, key: str, n: int, holder: str, ttl: int = 10_000, **options: Any) -> Any:
    return model.try_lease(key, ttl, holder=holder, max_holders=n, **options)


def live_holders(model: Any, key: str) -> list[str]:
    return sorted(row.holder for row in model.holders(key) if not row.expired)


@pytest.mark.acquire_paths
def test_n_holders_then_refused(model: Any, key: str) -> None:
    leases = [take(model, key, 3, f"h{i}") for i in range(3)]
    assert all(lease is not None for lease in leases)
    assert take(model, key, 3, "h3") is None  # the N+1st
    assert sorted(lease.place for lease in leases) == [1, 2, 3]
    assert [lease.key for lease in leases] == [place_id(key, lease.place) for lease in leases]
    assert len({lease.token for lease in leases}) == 3  # a token per holder
    assert live_holders(model, key) == ["h0", "h1", "h2"]
    for lease in leases:
        row = model.peek(lease.key)
        assert (row.holder, row.fence, row.expires_at) == (
            lease.holder,
            lease.token,
            lease.expires_at,
        )
    group = model.peek(key)  # the key's own row: the group row
    assert group.holder == group_holder(3)
    assert group.expires_at >= max(lease.expires_at for lease in leases)
    assert model.holders("not-counted") == []
    for lease in leases[:2]:
        assert lease.release() is True
    assert model.peek(key).holder == group_holder(3)  # one place is still held
    assert leases[2].release() is True
    assert model.holders(key) == []
    assert model.peek(key) is None  # the last release took the group row too
    single = model.try_lease(key, 10_000, holder="plain")  # the key is free for any use
    assert single is not None
    single.release()


@pytest.mark.acquire_paths
def test_a_released_place_is_taken_by_the_next(model: Any, key: str) -> None:
    first = take(model, key, 2, "a")
    second = take(model, key, 2, "b")
    assert take(model, key, 2, "c") is None
    assert first.release() is True
    third = take(model, key, 2, "c")
    assert third is not None
    assert third.place == first.place
    assert third.token > max(first.token, second.token)  # a new grant of that place
    assert first.refresh() is False  # the released lease acts on its own grant only
    assert second.refresh() is True
    assert third.refresh() is True
    assert live_holders(model, key) == ["b", "c"]
    second.release()
    third.release()


@pytest.mark.acquire_paths
def test_reentrant_per_holder(model: Any, key: str) -> None:
    """A holder with a live place re-acquires that place (keeps its token), never a
    second one: every reference behaviour of a single lease holds per holder."""
    first = take(model, key, 3, "a", ttl=2_000)
    again = take(model, key, 3, "a", ttl=10_000)
    assert again is not None
    assert (again.place, again.token) == (first.place, first.token)
    assert again.expires_at > first.expires_at
    assert live_holders(model, key) == ["a"]
    assert take(model, key, 3, "b") is not None
    assert take(model, key, 3, "c") is not None
    assert take(model, key, 3, "a") is not None  # still re-entrant when full
    assert take(model, key, 3, "d") is None


@pytest.mark.acquire_paths
def test_expired_place_is_a_new_grant(model: Any, key: str) -> None:
    short = take(model, key, 1, "a", ttl=150)
    assert take(model, key, 1, "b") is None
    time.sleep(0.3)
    assert short.refresh() is False  # an expired grant is over
    taken = take(model, key, 1, "b")
    assert taken is not None
    assert taken.place == short.place
    assert taken.token > short.token
    assert short.release() is False  # deletes nothing of the later grant
    assert live_holders(model, key) == ["b"]


def test_waits_for_a_place(model: Any, key: str) -> None:
    held = [take(model, key, 2, "a"), take(model, key, 2, "b")]
    timer = threading.Timer(0.3, held[0].release)
    timer.start()
    try:
        waited = take(model, key, 2, "c", wait=10_000)
    finally:
        timer.join(10)
    assert waited is not None
    assert waited.place == held[0].place
    assert take(model, key, 2, "d", wait=200) is None  # gives up after its wait


def test_is_held_clause_fences_each_holder(model: Any, key: str, db_url: str) -> None:
    import sqlalchemy

    table = Table("fenced_counter", MetaData(), Column("n", Integer))
    engine = sqlalchemy.create_engine(db_url)
    try:
        with engine.begin() as conn:
            table.drop(conn, checkfirst=True)
            table.create(conn)
            conn.execute(table.insert().values(n=0))
        first = take(model, key, 2, "a", ttl=10_000)
        short = take(model, key, 2, "b", ttl=150)
        time.sleep(0.3)
        with engine.begin() as conn:
            for lease in (first, short):
                conn.execute(update(table).where(lease.is_held_clause()).values(n=table.c.n + 1))
            assert conn.execute(select(table.c.n)).scalar() == 1  # only the live one wrote
            table.drop(conn)
    finally:
        engine.dispose()


def test_keepalive_renews_a_place_and_its_group_row(model: Any, key: str) -> None:
    lease = take(model, key, 2, "a", ttl=1_000, keepalive=True, renew_every=150)
    granted = lease.expires_at
    try:
        time.sleep(2.2)  # twice the ttl: alive only through renewals
        assert not lease.lost
        lease.ensure_held()
        # Each renewal also extended the group row (it covers the place's expiry).
        assert (model.peek(key).expires_at - granted).total_seconds() > 1.0
        assert take(model, key, 2, "b") is not None
        assert take(model, key, 2, "c") is None
    finally:
        lease.release()


def test_min_hold_keeps_the_place(model: Any, key: str) -> None:
    lease = take(model, key, 1, "a", ttl=10_000, min_hold=60_000)
    assert lease.release() is True
    assert take(model, key, 1, "b") is None  # the place stays held until min_hold
    place = model.peek(lease.key)
    assert not place.expired
    assert model.peek(key).expires_at >= place.expires_at  # the group row stays, covering it


def test_single_lease_on_a_counted_key_is_refused(model: Any, key: str) -> None:
    assert take(model, key, 3, "a") is not None
    assert model.try_lease(key, 10_000, holder="plain") is None  # the group row holds it
    assert model.acquire(key, 10_000, "plain") is False
    assert model.run_with_lock(key, 10_000, lambda: None) is False


def test_counted_lease_on_a_single_lease_raises(model: Any, key: str) -> None:
    single = model.try_lease(key, 10_000, holder="plain")
    with pytest.raises(joblocks.LockHoldersMismatch, match="single lease by 'plain'"):
        take(model, key, 3, "a")
    with pytest.raises(joblocks.LockHoldersMismatch):
        model.run_with_lock(key, 10_000, lambda: None, max_holders=3)
    assert model.holders(key) == []  # nothing taken
    assert model.peek(key).fence == single.token  # the single lease untouched
    assert single.release() is True
    assert take(model, key, 3, "a") is not None  # free again: counted use is fine


def test_another_max_holders_raises(model: Any, key: str) -> None:
    assert take(model, key, 3, "a", ttl=300) is not None
    with pytest.raises(joblocks.LockHoldersMismatch, match="max_holders=3") as caught:
        take(model, key, 4, "b")
    assert caught.value.max_holders == 4
    assert live_holders(model, key) == ["a"]
    time.sleep(0.5)  # once every place of max_holders=3 has expired, the key is free
    assert take(model, key, 4, "b") is not None
    assert model.peek(key).holder == group_holder(4)


def test_run_with_lock_with_max_holders(model: Any, key: str) -> None:
    seen: list[list[str]] = []
    other = take(model, key, 2, "other")

    def work() -> None:
        seen.append(live_holders(model, key))

    assert model.run_with_lock(key, 10_000, work, max_holders=2) is True
    assert seen == [sorted(["other", joblocks.worker_id()])]
    assert live_holders(model, key) == ["other"]  # released after
    assert take(model, key, 2, "third") is not None
    assert model.run_with_lock(key, 10_000, work, max_holders=2) is False  # both held
    assert len(seen) == 1
    other.release()


def test_prune_removes_expired_places_and_group(model: Any, key: str) -> None:
    take(model, key, 2, "a", ttl=100)
    take(model, key, 2, "b", ttl=100)
    time.sleep(0.3)
    assert model.prune() == 3
    assert model.peek(key) is None
    assert model.holders(key) == []


@pytest.mark.parametrize(
    ("value", "error"),
    [(True, TypeError), ("3", TypeError), (2.0, TypeError), (0, ValueError), (1001, ValueError)],
)
@pytest.mark.argument_checks
def test_bad_max_holders(model: Any, key: str, value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="max_holders"):
        model.try_lease(key, 10_000, max_holders=value)
    with pytest.raises(error, match="max_holders"):
        model.run_with_lock(key, 10_000, lambda: None, max_holders=value)
    assert model.peek(key) is None  # nothing sent


def test_key_too_long_for_places(model: Any) -> None:
    key = "k" * (MAX_KEY_BYTES - len(PLACE_MARK.encode()) - 1)  # room for one digit
    assert take(model, key, 9, "a") is not None
    with pytest.raises(ValueError, match="lock_key is too long for max_holders=10"):
        take(model, key + "x", 10, "a")


def test_single_instance_with_max_holders(db_url: str, table_name: str, key: str) -> None:
    from joblocks._decorator import single_instance

    model = joblocks.JobLockModel(db_url, table_name=table_name)
    try:
        inside: list[list[str]] = []

        @single_instance(key, 10_000, model=model, max_holders=2)
        def job() -> str:
            inside.append(live_holders(model, key))
            return "ran"

        assert job() == "ran"
        assert inside == [[joblocks.worker_id()]]
        take(model, key, 2, "x")
        take(model, key, 2, "y")
        assert job() is None  # both places held elsewhere
    finally:
        model.dispose()


def test_single_instance_async_with_max_holders(db_url: str, table_name: str, key: str) -> None:
    import asyncio

    from joblocks._decorator import single_instance

    async def main() -> list[Any]:
        model = joblocks.aio.JobLockModel(db_url, table_name=table_name)
        try:

            @single_instance(key, 10_000, model=model, max_holders=1)
            async def job() -> str:
                rows = await model.holders(key)
                return rows[0].holder

            first = await job()
            held = await model.try_lease(key, 10_000, holder="x", max_holders=1)
            second = await job()
            await held.release()
            return [first, second]
        finally:
            await model.dispose()

    assert asyncio.run(main()) == [joblocks.worker_id(), None]


def test_events_name_the_place(model: Any, key: str) -> None:
    seen: list[joblocks.Event] = []
    joblocks.add_listener(seen.append)
    try:
        lease = take(model, key, 2, "a")
        take(model, key, 2, "b")
        assert take(model, key, 2, "c") is None
        lease.release()
    finally:
        joblocks.remove_listener(seen.append)
    mine = [(e.kind, e.key) for e in seen if e.holder == "a"]
    assert mine == [("acquired", lease.key), ("released", lease.key)]
    assert [(e.kind, e.key) for e in seen if e.holder == "c"] == [("conflict", key)]


@pytest.mark.argument_checks
def test_not_with_schedule(model: Any, key: str) -> None:
    """With ``liveness="session"`` it works: tests/core/max_holders/test_max_holders_liveness.py."""
    with pytest.raises(ValueError, match="max_holders cannot be combined with schedule="):
        model.try_lease(key, 10_000, max_holders=2, schedule="*/5 * * * *")
    assert model.peek(key) is None  # nothing sent
