"""The reference's documented behaviours, once, for every database × face (× acquire path
and deployment shape where they make a difference)."""

from __future__ import annotations

import logging
import time
from datetime import timedelta, timezone
from typing import Any

import pytest

import joblocks

TTL = 30_000
# Each database's default acquire path, except the tests of grants
# (``acquire_paths``); those of each statement kind (``deployments``) also through
# PgBouncer in transaction and in session mode and on a PostgreSQL whose default
# isolation is serializable (see tests/conftest.py).


@pytest.mark.acquire_paths
@pytest.mark.deployments
def test_acquire_free_key_writes_the_row(model: Any, key: str) -> None:
    before = model.now_ms()
    assert model.acquire(key, TTL, "w1") is True
    after = model.now_ms()
    row = model.peek(key)
    assert row is not None
    assert (row.key, row.holder) == (key, "w1")
    assert row.acquired_at.tzinfo is timezone.utc
    assert row.expires_at - row.acquired_at == timedelta(milliseconds=TTL)
    stamp = int(row.acquired_at.timestamp() * 1000)
    assert before <= stamp <= after  # written by the database's clock
    assert row.fence > 0
    assert not row.expired


@pytest.mark.acquire_paths
@pytest.mark.deployments
def test_acquire_held_by_another_is_refused_and_changes_nothing(model: Any, key: str) -> None:
    assert model.acquire(key, TTL, "w1")
    first = model.peek(key)
    assert model.acquire(key, TTL, "w2") is False
    assert model.peek(key).holder == "w1"
    assert model.peek(key).expires_at == first.expires_at
    assert model.peek(key).fence == first.fence


@pytest.mark.acquire_paths
@pytest.mark.deployments
def test_reentrant_acquire_pushes_expiry_forward_and_keeps_token(model: Any, key: str) -> None:
    assert model.acquire(key, 1_000, "w1")
    first = model.peek(key)
    time.sleep(0.01)
    assert model.acquire(key, TTL, "w1") is True
    again = model.peek(key)
    assert again.holder == "w1"
    assert again.expires_at > first.expires_at
    assert again.fence == first.fence


@pytest.mark.acquire_paths
@pytest.mark.deployments
def test_expired_lease_is_taken_over_with_a_larger_token(model: Any, key: str) -> None:
    assert model.acquire(key, 50, "w1")
    old = model.peek(key)
    time.sleep(0.12)
    assert model.peek(key).expired
    assert model.acquire(key, TTL, "w2") is True
    new = model.peek(key)
    assert new.holder == "w2"
    assert new.fence > old.fence


@pytest.mark.acquire_paths
@pytest.mark.deployments
def test_tokens_grow_across_releases_and_takeovers(model: Any, key: str) -> None:
    tokens = []
    for i in range(6):
        holder = f"w{i % 2}"
        fence = model.acquire_token(key, TTL, holder)
        assert fence is not None
        tokens.append(fence)
        assert model.release(key, holder)
    assert tokens == sorted(tokens)
    assert len(set(tokens)) == len(tokens)


@pytest.mark.deployments
def test_release_deletes_only_the_holders_row(model: Any, key: str) -> None:
    assert model.acquire(key, TTL, "w1")
    assert model.release(key, "w2") is False
    assert model.peek(key).holder == "w1"
    assert model.release(key, "w1") is True
    assert model.peek(key) is None


def test_release_of_a_lock_never_held_is_a_noop(model: Any, key: str) -> None:
    assert model.release(key, "w1") is False
    assert model.peek(key) is None


@pytest.mark.acquire_paths
def test_stale_holder_cannot_release_the_new_holders_lease(model: Any, key: str) -> None:
    assert model.acquire(key, 50, "w1")
    time.sleep(0.12)
    assert model.acquire(key, TTL, "w2")
    assert model.release(key, "w1") is False
    assert model.peek(key).holder == "w2"


@pytest.mark.deployments
def test_refresh_moves_expiry_for_the_holder_only(model: Any, key: str) -> None:
    assert model.acquire(key, 1_000, "w1")
    before = model.peek(key)
    assert model.refresh(key, TTL, "w1") is True
    after = model.peek(key)
    assert after.expires_at > before.expires_at
    assert after.acquired_at == before.acquired_at
    assert after.fence == before.fence
    assert model.refresh(key, TTL, "w2") is False
    assert model.peek(key).expires_at == after.expires_at


def test_refresh_twice_in_the_same_millisecond_still_reports_true(model: Any, key: str) -> None:
    assert model.acquire(key, TTL, "w1")
    results = [model.refresh(key, TTL, "w1") for _ in range(5)]
    assert results == [True] * 5


def test_refresh_of_missing_row_is_false(model: Any, key: str) -> None:
    assert model.refresh(key, TTL, "w1") is False
    assert model.peek(key) is None


def test_refresh_of_own_expired_unclaimed_lease_succeeds(model: Any, key: str) -> None:
    assert model.acquire(key, 50, "w1")
    time.sleep(0.12)
    assert model.peek(key).expired
    assert model.refresh(key, TTL, "w1") is True
    assert not model.peek(key).expired
    assert model.acquire(key, TTL, "w2") is False


@pytest.mark.deployments
def test_peek_returns_expired_rows_and_none_when_absent(model: Any, key: str) -> None:
    assert model.peek(key) is None
    assert model.acquire(key, 50, "w1")
    time.sleep(0.12)
    row = model.peek(key)
    assert row is not None
    assert row.expired
    assert row.holder == "w1"
    assert row.remaining == timedelta(0)


def test_ttl_as_timedelta(model: Any, key: str) -> None:
    assert model.acquire(key, timedelta(minutes=5), "w1")
    row = model.peek(key)
    assert row.expires_at - row.acquired_at == timedelta(minutes=5)


@pytest.mark.acquire_paths
def test_keys_are_compared_byte_for_byte(model: Any) -> None:
    keys = ["Job", "job", "job ", "jöb"]
    for i, k in enumerate(keys):
        assert model.acquire(k, TTL, f"holder-{i}") is True, k
    assert [model.peek(k).holder for k in keys] == [f"holder-{i}" for i in range(4)]
    assert sorted(r.key for r in model.list()) == sorted(keys)


@pytest.mark.acquire_paths
def test_holders_are_compared_byte_for_byte(model: Any, key: str) -> None:
    assert model.acquire(key, TTL, "Worker")
    assert model.acquire(key, TTL, "worker") is False
    assert model.acquire(key, TTL, "Worker ") is False
    assert model.release(key, "worker") is False


@pytest.mark.acquire_paths
def test_longest_key_fits(model: Any) -> None:
    key = "é" * (joblocks.MAX_KEY_BYTES // 2)
    holder = "h" * joblocks.MAX_HOLDER_BYTES
    assert model.acquire(key, TTL, holder)
    assert model.peek(key).key == key
    assert model.peek(key).holder == holder
    with pytest.raises(ValueError, match="lock_key"):
        model.acquire(key + "x", TTL, "w1")


# -- run_with_lock ------------------------------------------------------------------


@pytest.mark.deployments
def test_run_with_lock_runs_work_and_releases(model: Any, key: str) -> None:
    seen = []

    def work() -> None:
        row = model.peek(key)
        seen.append((row.holder, row.expires_at))

    assert model.run_with_lock(key, TTL, work) is True
    assert seen
    assert seen[0][0] == joblocks.worker_id()
    assert model.peek(key) is None


def test_run_with_lock_skips_work_when_held(model: Any, key: str) -> None:
    assert model.acquire(key, TTL, "someone-else")
    calls = []
    assert model.run_with_lock(key, TTL, lambda: calls.append(1)) is False
    assert calls == []
    assert model.peek(key).holder == "someone-else"


def test_run_with_lock_propagates_and_still_releases(model: Any, key: str) -> None:
    def work() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        model.run_with_lock(key, TTL, work)
    assert model.peek(key) is None


def test_run_with_lock_swallows_and_logs_a_release_error(
    model: Any, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    def work() -> None:
        _drop_table(model)  # the table disappears under the work: the release fails

    with caplog.at_level(logging.ERROR, logger="joblocks"):
        assert model.run_with_lock(key, TTL, work) is True
    assert any("releasing" in r.getMessage() for r in caplog.records)


def _drop_table(model: Any) -> None:
    import sqlalchemy

    url = model.engine.url
    if model.face == "aio":
        url = url.set(
            drivername=joblocks._db.engines._SYNC_DRIVERS.get(url.drivername, url.drivername)
        )
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE {model.table.name}")
    finally:
        engine.dispose()


def test_run_with_lock_never_renews(model: Any, key: str) -> None:
    expiries = []

    def work() -> None:
        expiries.append(model.peek(key).expires_at)
        time.sleep(0.05)
        expiries.append(model.peek(key).expires_at)

    assert model.run_with_lock(key, TTL, work)
    assert expiries[0] == expiries[1]


def test_run_with_lock_refuses_an_overlapping_call_in_the_same_process(
    model: Any, key: str
) -> None:
    inner = []

    def work() -> None:
        inner.append(model.run_with_lock(key, TTL, lambda: None))
        inner.append(model.run_with_lock(key + "-other", TTL, lambda: None))

    assert model.run_with_lock(key, TTL, work) is True
    assert inner == [False, True]
    # The guard was released: the key runs again.
    assert model.run_with_lock(key, TTL, lambda: None) is True


def test_run_with_lock_warns_when_work_outlives_ttl(
    model: Any, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="joblocks"):
        assert model.run_with_lock(key, 20, lambda: time.sleep(0.08))
    assert any(key in r.getMessage() and "ttl" in r.getMessage() for r in caplog.records)


# -- the plain model surface --------------------------------------------------------


def test_plain_model_surface(model: Any) -> None:
    a = model.insert("a", holder="w1", ttl=TTL)
    assert (a.key, a.holder) == ("a", "w1")
    with pytest.raises(joblocks.LockExistsError):
        model.insert("a", holder="w2", ttl=TTL)
    model.insert("b", holder="w2", ttl=50)
    model.insert("c", holder="w3", ttl=TTL)
    time.sleep(0.12)
    assert [r.key for r in model.list()] == ["a", "b", "c"]
    assert [r.key for r in model.list("live")] == ["a", "c"]
    assert [r.key for r in model.list("expired")] == ["b"]
    assert (model.count(), model.count("live"), model.count("expired")) == (3, 2, 1)
    assert model.get("a") == model.peek("a") or model.get("a").key == "a"
    old_fence = model.get("a").fence
    assert model.update("a", holder="w9") is True
    assert model.get("a").holder == "w9"
    assert model.get("a").fence > old_fence
    assert model.update("b", ttl=TTL) is True
    assert not model.get("b").expired
    assert model.update("zzz", ttl=TTL) is False
    assert model.delete("a") is True
    assert model.delete("a") is False
    assert model.count() == 2
    with pytest.raises(ValueError, match="state"):
        model.list("alive")
    with pytest.raises(ValueError, match="holder= or ttl="):
        model.update("b")


# -- errors are not "taken" ---------------------------------------------------------


@pytest.mark.deployments
def test_missing_table_is_a_backend_error_not_taken(make_model: Any, key: str) -> None:
    model = make_model(create_table=False)
    with pytest.raises(joblocks.LockBackendError) as info:
        model.acquire(key, TTL, "w1")
    assert info.value.operation == "acquire"
    assert info.value.__cause__ is not None


def test_errors_as_taken_restores_the_reference_behaviour(
    make_model: Any, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    model = make_model(create_table=False, errors_as_taken=True)
    with caplog.at_level(logging.WARNING, logger="joblocks"):
        assert model.acquire(key, TTL, "w1") is False
    assert any("reported as taken" in r.getMessage() for r in caplog.records)
    with pytest.raises(joblocks.LockBackendError):
        model.release(key, "w1")  # only acquire is reported as taken
