"""``liveness="session"``: a killed holder is taken over at once, a live, paused or
ttl-only one is not (real holder processes, every database × face).

The holder is a process of its own (``tests/support/liveness_holder.py``) killed with
SIGKILL or paused with SIGSTOP; the contender is the test's model of the same face.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import pytest

import joblocks
import joblocks.aio

from ...support.liveness_holder import HolderProcess as Holder

LONG_TTL = 60_000


@pytest.fixture
def holders(face: str, db_url: str, table_name: str) -> Iterator[Callable[..., Holder]]:
    made: list[Holder] = []

    def start(key: str, ttl_ms: int = LONG_TTL, liveness: str = "session") -> Holder:
        holder = Holder(face, db_url, table_name, key, ttl_ms, liveness)
        made.append(holder)
        return holder.held()

    yield start
    for holder in made:
        holder.close()


def test_a_killed_holder_is_taken_over_at_once_with_a_larger_token(
    make_model: Callable[..., Any], holders: Callable[..., Holder], key: str
) -> None:
    """Before: the key stayed taken for the holder's whole ttl (60 s here)."""
    model = make_model()
    first = holders(key)
    assert model.try_lease(key, LONG_TTL, liveness="session") is None  # alive: no
    first.kill()
    lease = model.try_lease(key, LONG_TTL, liveness="session", wait=10_000)
    assert lease is not None, "a killed holder's key stayed taken"
    assert lease.token > first.token
    assert lease.remaining() > timedelta(seconds=50)  # taken over, not expired
    assert lease.release()


def test_a_paused_holder_is_not_taken_over_before_its_ttl(
    make_model: Callable[..., Any], holders: Callable[..., Holder], key: str
) -> None:
    model = make_model()
    paused = holders(key, ttl_ms=3_000)
    os.kill(paused.proc.pid, signal.SIGSTOP)
    try:
        for _ in range(5):
            assert model.try_lease(key, LONG_TTL, liveness="session") is None
            time.sleep(0.1)
        row = model.peek(key)
        assert row is not None
        assert row.fence == paused.token
        # Its ttl runs out: the key is taken by the usual rules, with a larger token.
        lease = model.try_lease(key, LONG_TTL, liveness="session", wait=15_000)
        assert lease is not None
        assert lease.token > paused.token
        assert lease.release()
    finally:
        os.kill(paused.proc.pid, signal.SIGCONT)


def test_a_killed_ttl_holder_is_not_taken_over(
    make_model: Callable[..., Any], holders: Callable[..., Holder], key: str
) -> None:
    """A grant made without the session lock (``liveness="ttl"``) keeps its ttl."""
    model = make_model()
    plain = holders(key, liveness="ttl")
    plain.kill()
    assert model.try_lease(key, LONG_TTL, liveness="session", wait=300) is None
    row = model.peek(key)
    assert row is not None
    assert row.fence == plain.token


def test_a_second_session_lease_in_the_same_process_is_refused(
    make_model: Callable[..., Any], key: str
) -> None:
    model = make_model()
    other = make_model()
    held = model.try_lease(key, LONG_TTL, liveness="session", holder="a")
    assert held is not None
    assert other.try_lease(key, LONG_TTL, liveness="session", holder="b") is None
    assert model.try_lease(key, LONG_TTL, liveness="session", holder="c") is None
    assert held.release()
    again = other.try_lease(key, LONG_TTL, liveness="session", holder="b")
    assert again is not None
    assert again.token > held.token
    assert again.release()


def test_a_released_min_hold_is_kept_from_session_contenders(
    make_model: Callable[..., Any], key: str
) -> None:
    """A release under min_hold lets the session lock go, but the row it keeps is not
    taken over (the registry stops naming it first)."""
    model = make_model()
    held = model.try_lease(key, LONG_TTL, liveness="session", min_hold=30_000, holder="a")
    assert held is not None
    assert held.release()
    assert model.try_lease(key, LONG_TTL, liveness="session", holder="b") is None


def test_run_with_lock_and_single_instance_hold_the_session_lock(
    make_model: Callable[..., Any], face: str, key: str
) -> None:
    model = make_model()
    other = make_model()
    seen: list[Any] = []

    def work() -> None:
        seen.append(other.try_lease(key, LONG_TTL, liveness="session", holder="x"))

    assert model.run_with_lock(key, LONG_TTL, work, liveness="session")
    assert seen == [None]
    if face == "sync":

        @joblocks.single_instance(key, LONG_TTL, model=model.model, liveness="session")
        def job() -> int:
            seen.append(other.try_lease(key, LONG_TTL, liveness="session", holder="y"))
            return 7

        assert job() == 7
    else:

        @joblocks.single_instance(key, LONG_TTL, model=model.model, liveness="session")
        async def ajob() -> int:
            seen.append(await other.model.try_lease(key, LONG_TTL, liveness="session", holder="y"))
            return 7

        from ...support.faces import run_on

        assert run_on(model.loop, ajob()) == 7
    assert seen == [None, None]
    with model.lease(key, LONG_TTL, liveness="session") as held:
        assert other.try_lease(key, LONG_TTL, liveness="session", holder="z") is None
        assert held.token > 0
    assert model.peek(key) is None


@pytest.mark.parametrize("bad", ["sessions", "", "TTL"])
def test_an_unknown_liveness_is_a_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="liveness must be 'ttl' or 'session'"):
        joblocks.run_with_lock("k", 1_000, lambda: None, liveness=bad)
    with pytest.raises(ValueError, match="liveness"):
        joblocks.single_instance("k", 1_000, liveness=bad)


def test_a_liveness_not_a_str_is_a_type_error(tmp_path: Path) -> None:
    model = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(TypeError, match="liveness must be a str, not bool"):
        model.try_lease("k", 1_000, liveness=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="liveness must be a str, not int"):
        joblocks.lease("k", 1_000, model=model, liveness=1)  # type: ignore[arg-type]
    assert not (tmp_path / "x.db").exists()  # refused before the database was touched
    model.dispose()


@pytest.mark.server
def test_through_a_transaction_mode_pooler_it_is_refused(
    pgbouncer_transaction: Any, face: str, table_name: str
) -> None:
    from ...support.faces import models

    made = models(face, pgbouncer_transaction.url, table_name)
    make = next(made)
    try:
        model = make()
        with pytest.raises(joblocks.LockBackendError, match="pooler"):
            model.try_lease("k-pooled", LONG_TTL, liveness="session")
        assert model.peek("k-pooled") is None  # refused before the row was taken
        assert model.try_lease("k-pooled", LONG_TTL) is not None  # ttl liveness works
    finally:
        next(made, None)


def _cut_session(db_url: str, table_name: str, key: str) -> int:
    """End, from the server's side, the session holding ``key``'s session lock (as a
    network cut or an administrator would); the number of sessions ended."""
    import hashlib

    import sqlalchemy as sa

    engine = sa.create_engine(db_url, isolation_level="AUTOCOMMIT")
    registry = f"{table_name}_live"
    try:
        with engine.connect() as conn:
            rid = conn.execute(
                sa.text(f"SELECT id FROM {registry} WHERE lock_key = :k"), {"k": key}
            ).scalar_one()
            if engine.dialect.name == "postgresql":
                found = conn.execute(
                    sa.text(
                        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1"
                        " AND classid = CAST(CAST(:r AS regclass) AS oid) AND objid = :id"
                    ),
                    {"r": registry, "id": rid},
                ).scalars()
                ended = 0
                for pid in list(found):
                    stop = sa.text("SELECT pg_terminate_backend(:p)")
                    ended += bool(conn.execute(stop, {"p": pid}).scalar())
                return ended
            database = conn.execute(sa.text("SELECT DATABASE()")).scalar_one()
            digest = hashlib.sha256(f"{database}\0{registry}".encode()).hexdigest()[:40]
            name = f"joblocks:{digest}:{rid}"
            owner = conn.execute(sa.text("SELECT IS_USED_LOCK(:n)"), {"n": name}).scalar()
            if owner is None:
                return 0
            conn.execute(sa.text(f"KILL {int(owner)}"))
            return 1
    finally:
        engine.dispose()


@pytest.mark.server
@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_a_holder_whose_session_was_cut_is_taken_over_and_releases_quietly(
    make_model: Callable[..., Any], backend: str, db_url: str, table_name: str, key: str
) -> None:
    """The documented limit: a live holder whose session lock's connection is ended by
    the server loses the key to the next session contender; its own release then says
    False (the row is another grant's) instead of raising on the dead connection."""
    model = make_model()
    other = make_model()
    held = model.try_lease(key, LONG_TTL, liveness="session", holder="a")
    assert held is not None
    assert _cut_session(db_url, table_name, key) == 1
    taken = None
    for _ in range(100):  # the server lets the lock go as the session ends
        taken = other.try_lease(key, LONG_TTL, liveness="session", holder="b")
        if taken is not None:
            break
        time.sleep(0.05)
    assert taken is not None
    assert taken.token > held.token
    assert held.release() is False
    assert taken.release()
