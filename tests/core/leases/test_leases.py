"""Leases beyond the reference, for every database × face: fencing, keep-alive, min_hold, wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta, timezone
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy import Column, Integer, MetaData, String, Table, select, update

import joblocks
from joblocks._async import keepalive as _aio_keepalive
from joblocks._sync import keepalive as _keepalive


@pytest.fixture
def model(make_model: Any) -> Any:
    return make_model()


@pytest.fixture
def events() -> Iterator[list[joblocks.Event]]:
    seen: list[joblocks.Event] = []
    joblocks.add_listener(seen.append)
    yield seen
    joblocks.remove_listener(seen.append)


def kinds(events: list[joblocks.Event], key: str) -> list[str]:
    return [e.kind for e in events if e.key == key]


def wait_until(predicate: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())


@pytest.mark.acquire_paths
def test_try_lease_returns_the_grant(model: Any, key: str) -> None:
    held = model.try_lease(key, 10_000)
    assert held is not None
    assert (held.key, held.holder) == (key, joblocks.WORKER_ID)
    row = model.peek(key)
    assert held.token == row.fence
    assert held.acquired_at == row.acquired_at
    assert held.expires_at == row.expires_at
    assert held.acquired_at.tzinfo is timezone.utc
    assert timedelta(seconds=9) < held.remaining() <= timedelta(seconds=10)
    assert not held.lost
    assert model.try_lease(key, 10_000, holder="someone-else") is None
    assert held.release() is True
    assert held.remaining() == timedelta(0)
    assert model.peek(key) is None
    assert held.release() is False  # only once


def test_lease_context_manager(model: Any, key: str) -> None:
    with model.lease(key, 10_000) as held:
        assert model.peek(key).fence == held.token
        with pytest.raises(joblocks.LockNotAcquired, match=key):
            model.lease(key, 10_000, holder="other")
    assert model.peek(key) is None


def test_refresh_extends_and_keeps_the_token(model: Any, key: str) -> None:
    held = model.try_lease(key, 1_000)
    before = held.expires_at
    time.sleep(0.01)
    assert held.refresh(5_000) is True
    assert held.expires_at > before
    assert model.peek(key).expires_at == held.expires_at
    assert model.peek(key).fence == held.token
    assert held.remaining() > timedelta(seconds=4)
    held.release()


@pytest.mark.acquire_paths
def test_a_takeover_makes_the_old_lease_lost_everywhere(model: Any, key: str) -> None:
    old = model.try_lease(key, 100, holder="w1")
    old.ensure_held()  # still ours
    time.sleep(0.2)
    new = model.try_lease(key, 10_000, holder="w2")
    assert new.token > old.token
    with pytest.raises(joblocks.LeaseLost, match=key):
        old.ensure_held()
    assert old.lost
    assert old.refresh() is False
    assert old.release() is False  # deletes nothing
    assert model.peek(key).holder == "w2"
    new.release()


@pytest.mark.acquire_paths
def test_a_new_grant_to_the_same_holder_invalidates_the_old_lease(model: Any, key: str) -> None:
    first = model.try_lease(key, 10_000, holder="w1")
    assert model.release(key, "w1")
    second = model.try_lease(key, 10_000, holder="w1")
    assert second.token > first.token
    assert first.release() is False  # another grant: not deleted
    assert model.peek(key).fence == second.token
    second.release()


# -- fenced writes ------------------------------------------------------------------


@pytest.fixture
def jobs_table(db_url: str, table_name: str) -> Iterator[tuple[Any, Table]]:
    url = db_url
    engine = sqlalchemy.create_engine(url)
    meta = MetaData()
    table = Table(
        f"{table_name}_jobs",
        meta,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("state", String(20)),
    )
    meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"id": i, "state": "due"} for i in range(5)])
    yield engine, table
    engine.dispose()


def fenced_update(engine: Any, table: Table, held: Any, ids: list[int], state: str) -> int:
    target = getattr(held, "_target", held)  # the asyncio face's view wraps the lease
    with engine.begin() as conn:
        result = conn.execute(
            update(table).where(table.c.id.in_(ids), target.is_held_clause()).values(state=state)
        )
        return int(result.rowcount)


def states(engine: Any, table: Table) -> list[str]:
    with engine.connect() as conn:
        return [r.state for r in conn.execute(select(table).order_by(table.c.id))]


def test_fenced_write_applies_while_held_and_not_after_a_takeover(
    make_model: Any, jobs_table: tuple[Any, Table], key: str
) -> None:
    engine, table = jobs_table
    model = make_model()
    old = model.try_lease(key, 150, holder="w1")
    assert fenced_update(engine, table, old, [0, 1], "sent") == 2
    assert states(engine, table) == ["sent", "sent", "due", "due", "due"]
    time.sleep(0.25)
    # Expired, not yet taken over: already fences nothing.
    assert fenced_update(engine, table, old, [2], "sent") == 0
    new = model.try_lease(key, 10_000, holder="w2")
    assert fenced_update(engine, table, old, [2, 3], "stale") == 0
    assert fenced_update(engine, table, new, [2, 3], "sent") == 2
    assert states(engine, table) == ["sent", "sent", "sent", "sent", "due"]
    new.release()


# -- keep-alive ---------------------------------------------------------------------


def test_keepalive_holds_past_the_ttl_while_a_competitor_keeps_trying(
    model: Any, key: str, events: list[joblocks.Event]
) -> None:
    # A ttl of 1 s (renewed every 333 ms): room for a loaded machine's late renewals.
    held = model.try_lease(key, 1_000, keepalive=True)
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:  # two and a half ttls
        assert model.acquire(key, 10_000, "competitor") is False
        time.sleep(0.05)
    assert not held.lost
    assert kinds(events, key).count("renewed") >= 3
    assert held.release() is True
    assert model.peek(key) is None
    assert wait_until(lambda: _renewer_count(model) == 0)


def _renewer_count(model: Any) -> int:
    if model.face == "sync":
        return _keepalive.thread_renewer.count()
    return sum(r.count() for r in _aio_keepalive._task_renewers.values())


def test_keepalive_reports_a_deleted_lease_lost_within_one_interval(
    model: Any, key: str, events: list[joblocks.Event]
) -> None:
    lost: list[Any] = []
    held = model.try_lease(key, 3_000, keepalive=True, renew_every=100, on_lost=lost.append)
    assert model.delete(key)  # an operator breaks the lock
    assert wait_until(lambda: held.lost, timeout=1.0)
    assert len(lost) == 1
    assert "renewal refused" in held.lost_reason
    assert kinds(events, key).count("lost") == 1
    assert held.release() is False


def test_keepalive_reports_a_takeover_lost(model: Any, key: str) -> None:
    held = model.try_lease(key, 3_000, keepalive=True, renew_every=100)
    assert model.update(key, holder="thief")
    assert wait_until(lambda: held.lost, timeout=1.0)
    assert model.peek(key).holder == "thief"
    held.release()
    assert model.peek(key).holder == "thief"  # the loser deleted nothing


def test_max_hold_ends_renewals(model: Any, key: str) -> None:
    held = model.try_lease(key, 600, keepalive=True, renew_every=50, max_hold=300)
    assert wait_until(lambda: held.lost, timeout=3.0)
    assert "max_hold" in held.lost_reason
    # Lost by the lease's own clock a little (≤ 1 ms + a round trip) before the row's
    # expiry, never after it: the key is free for others right after.
    assert wait_until(lambda: model.acquire(key, 1_000, "next"), timeout=1.0)


def test_run_with_lock_keepalive_outlives_the_ttl_without_overrun(
    model: Any, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    def work() -> None:
        time.sleep(0.5)
        assert model.peek(key).holder == joblocks.WORKER_ID

    with caplog.at_level("WARNING", logger="joblocks"):
        assert model.run_with_lock(key, 200, work, keepalive=True, renew_every=50)
    assert not [r for r in caplog.records if "longer than its ttl" in r.getMessage()]
    assert model.peek(key) is None


def test_run_with_lock_overrun_is_an_event(
    model: Any, key: str, events: list[joblocks.Event]
) -> None:
    assert model.run_with_lock(key, 20, lambda: time.sleep(0.08))
    assert "overrun" in kinds(events, key)


# -- min_hold -----------------------------------------------------------------------


def test_min_hold_keeps_the_row_after_release_until_the_window_ends(model: Any, key: str) -> None:
    held = model.try_lease(key, 10_000, min_hold=400)
    assert held.release() is True
    row = model.peek(key)
    assert row is not None
    assert row.expires_at - row.acquired_at == timedelta(milliseconds=400)
    assert model.acquire(key, 10_000, "second-scheduler") is False
    time.sleep(0.5)
    assert model.acquire(key, 10_000, "second-scheduler") is True


def test_min_hold_older_than_the_window_deletes(model: Any, key: str) -> None:
    held = model.try_lease(key, 10_000, min_hold=50)
    time.sleep(0.1)
    assert held.release() is True
    assert model.peek(key) is None


def test_run_with_lock_min_hold(model: Any, key: str) -> None:
    assert model.run_with_lock(key, 10_000, lambda: None, min_hold=400)
    # A second scheduler firing a little later, on another machine: the job ran already.
    assert model.acquire(key, 10_000, "other-machine") is False
    time.sleep(0.5)
    assert model.acquire(key, 10_000, "other-machine") is True


# -- wait ---------------------------------------------------------------------------


def test_wait_acquires_soon_after_the_holder_lets_go(model: Any, key: str) -> None:
    assert model.acquire(key, 300, "holder")
    started = time.monotonic()
    held = model.try_lease(key, 10_000, wait=3_000)
    waited = time.monotonic() - started
    assert held is not None
    assert 0.2 < waited < 2.0
    held.release()


def test_wait_gives_up_after_the_wait(model: Any, key: str, events: list[joblocks.Event]) -> None:
    assert model.acquire(key, 10_000, "holder")
    started = time.monotonic()
    assert model.try_lease(key, 10_000, wait=300) is None
    waited = time.monotonic() - started
    assert 0.3 <= waited < 1.5
    assert kinds(events, key)[-1] == "conflict"


def test_run_with_lock_wait_waits_out_an_overlapping_call_in_this_process(
    model: Any, key: str
) -> None:
    order: list[str] = []
    inside = threading.Event()

    def first() -> None:
        def work() -> None:
            inside.set()
            time.sleep(0.3)
            order.append("first")

        model.run_with_lock(key, 10_000, work)

    thread = threading.Thread(target=first)
    thread.start()
    assert inside.wait(5)
    assert model.run_with_lock(key, 10_000, lambda: order.append("second"), wait=3_000)
    thread.join()
    assert order == ["first", "second"]


# -- bad options --------------------------------------------------------------------


@pytest.mark.argument_checks
def test_bad_lease_options(model: Any, key: str) -> None:
    with pytest.raises(ValueError, match="renew_every"):
        model.try_lease(key, 1_000, keepalive=True, renew_every=1_000)
    with pytest.raises(ValueError, match="keepalive=True"):
        model.try_lease(key, 1_000, max_hold=5_000)
    with pytest.raises(TypeError, match="keepalive"):
        model.try_lease(key, 1_000, keepalive=1)
    with pytest.raises(TypeError, match="on_lost"):
        model.try_lease(key, 1_000, on_lost="print")
    with pytest.raises(ValueError, match="min_hold"):
        model.try_lease(key, 1_000, min_hold=-1)
    with pytest.raises(ValueError, match="wait"):
        model.try_lease(key, 1_000, wait=float("nan"))
    assert model.peek(key) is None
