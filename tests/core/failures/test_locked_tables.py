"""A table locked by another session (a migration's ``LOCK TABLE``) is a wait for the
server like any other: bounded by the model's ``timeout`` on both faces.

- The run ledger's table locked: the server gives the write's wait up (PostgreSQL's
  ``lock_timeout``, MariaDB's ``max_statement_time``) before ``timeout``; the write
  fails with nothing written (logged, a ``record_failed`` event), and the job runs and
  returns; its lease is released. Also through PgBouncer and on a serializable
  server (the bound is a transaction of its own there).
- The lock table locked: ``acquire``, ``refresh``, ``release``, ``peek`` and ``list``
  raise ``LockTimeoutError`` (never "taken"), within about ``timeout``.
- An engine passed in gets no bound from joblocks: its own ``lock_timeout`` applies.

Another session holds the table lock on a connection of its own, let go in a
``finally``. The bounds below are hang guards, not speed assertions: each call is
given far longer than the time-out to end.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any, Callable

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

import joblocks

from ...support.servers import Server

SERVERS = pytest.mark.parametrize("backend", ["postgresql", "mariadb"])

TIMEOUT_MS = 1500
HANG_GUARD_S = 30.0


@contextlib.contextmanager
def locked(db_url: str, table: str) -> Iterator[None]:
    """``table`` locked by another session (exclusive: no reads, no writes) meanwhile."""
    engine = create_engine(db_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                conn.begin()
                conn.execute(text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
            else:
                conn.execute(text(f"LOCK TABLES {table} WRITE"))
            try:
                yield
            finally:
                if conn.dialect.name == "postgresql":
                    conn.rollback()
                else:
                    conn.execute(text("UNLOCK TABLES"))
    finally:
        engine.dispose()


def in_time(call: Callable[[], Any]) -> tuple[Any, BaseException | None, float]:
    """Run ``call()`` in a thread: what it returned or raised, and how long it took
    (seconds); fails the test when it has not ended within the hang guard."""
    outcome: list[tuple[Any, BaseException | None]] = []

    def target() -> None:
        try:
            outcome.append((call(), None))
        except BaseException as exc:
            outcome.append((None, exc))

    started = time.monotonic()
    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(HANG_GUARD_S)
    if worker.is_alive():
        pytest.fail(f"still waiting after {HANG_GUARD_S} s: the time-out did not apply")
    elapsed = time.monotonic() - started
    result, error = outcome[0]
    return result, error, elapsed


@pytest.fixture
def events() -> Iterator[list[joblocks.Event]]:
    seen: list[joblocks.Event] = []
    joblocks.add_listener(seen.append)
    yield seen
    joblocks.remove_listener(seen.append)


#: The server's own "gave up waiting for a lock" error: ``lock_timeout`` (PostgreSQL's
#: SQLSTATE) and ``max_statement_time`` (MariaDB's error number).
SERVER_TIMEOUT_CODES = {"postgresql": "55P03", "mariadb": 1969}


def family(backend: str) -> str:
    return "mariadb" if backend == "mariadb" else "postgresql"


@pytest.mark.parametrize(
    "backend",
    [
        "postgresql",
        "mariadb",
        "pgbouncer-transaction",
        "pgbouncer-session",
        "postgresql-serializable",
    ],
)
def test_a_locked_ledger_table_does_not_hold_the_job_back(
    make_model: Callable[..., Any],
    db_url: str,
    table_name: str,
    key: str,
    events: list[joblocks.Event],
    caplog: pytest.LogCaptureFixture,
    face: str,
    backend: str,
) -> None:
    model = make_model(record=True, timeout=TIMEOUT_MS)
    assert model.run_with_lock(key, 30_000, lambda: None)  # creates the ledger's table
    assert [run.outcome for run in model.runs(key)] == ["ok"]
    # A model that has not used the ledger yet (another process, say): it looks for
    # the table before its first write.
    fresh = make_model(record=True, timeout=TIMEOUT_MS)
    ran: list[str] = []
    caplog.set_level(logging.WARNING, logger="joblocks")
    with locked(db_url, f"{table_name}_runs"):
        for which, one in (("fresh", fresh), ("used", model)):
            result, error, elapsed = in_time(
                lambda one=one, which=which: one.run_with_lock(
                    key, 30_000, lambda: ran.append(which)
                )
            )
            print(f"{backend}-{face} ledger locked, {which} model: {elapsed:.2f} s")
            assert error is None, repr(error)
            assert result is True
            # The lease was released after the work, though the ledger was locked.
            assert model.peek(key) is None
    assert ran == ["fresh", "used"]
    failed = [e for e in events if e.kind == "record_failed" and e.key == key]
    assert len(failed) == 2, events
    assert sum("could not record" in r.getMessage() for r in caplog.records) == 2
    # The server itself gave up the wait (a known outcome: nothing written), rather
    # than the call being abandoned with its outcome unknown.
    for event in failed:
        assert isinstance(event.error, joblocks.LockTimeoutError), repr(event.error)
        assert event.error.code == SERVER_TIMEOUT_CODES[family(backend)], repr(event.error)
    # So no row of the two runs turns up once the table is free again (an abandoned
    # write could still land then: a run that never ends, shown as abandoned).
    time.sleep(0.5)
    assert [run.state for run in model.runs(key)] == ["ok"]


OPERATIONS: dict[str, Callable[[Any, str], Any]] = {
    "acquire": lambda model, key: model.acquire(key, 30_000, "w2"),
    "refresh": lambda model, key: model.refresh(key, 30_000, "w1"),
    "release": lambda model, key: model.release(key, "w1"),
    "peek": lambda model, key: model.peek(key),
    "list": lambda model, key: model.list(),
}


@SERVERS
@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_a_locked_lock_table_times_out(
    make_model: Callable[..., Any],
    db_url: str,
    table_name: str,
    key: str,
    face: str,
    backend: str,
    operation: str,
) -> None:
    model = make_model(timeout=TIMEOUT_MS)
    assert model.acquire(key, 30_000, "w1")
    # A model that has not used the table yet (another process, say).
    fresh = make_model(timeout=TIMEOUT_MS)
    with locked(db_url, table_name):
        for which, one in (("fresh", fresh), ("used", model)):
            result, error, elapsed = in_time(lambda one=one: OPERATIONS[operation](one, key))
            print(f"{backend}-{face} lock table locked, {operation}, {which}: {elapsed:.2f} s")
            # A time-out, never "taken" (False) nor "no lock" (None).
            assert isinstance(error, joblocks.LockTimeoutError), (result, error)
    # The models work again once the table is free.
    for one in (fresh, model):
        assert one.peek(key) is None or one.peek(key).key == key


def test_an_engine_passed_in_is_bounded_by_its_own_settings(
    pg_server: Server, table_name: str, key: str, events: list[joblocks.Event]
) -> None:
    """joblocks sets no time-out on an engine it did not make: the bound the docs
    advise (``lock_timeout`` in its connect arguments) is the one that applies."""
    engine: Engine = create_engine(
        pg_server.url, connect_args={"options": f"-c lock_timeout={TIMEOUT_MS}"}
    )
    model = joblocks.JobLockModel(engine, table_name=table_name, record=True)
    try:
        assert joblocks.run_with_lock(key, 30_000, lambda: None, model=model)
        ran: list[bool] = []
        with locked(pg_server.url, f"{table_name}_runs"):
            result, error, _elapsed = in_time(
                lambda: joblocks.run_with_lock(key, 30_000, lambda: ran.append(True), model=model)
            )
        assert error is None, repr(error)
        assert result is True
        assert ran == [True]
        failed = [e for e in events if e.kind == "record_failed" and e.key == key]
        assert len(failed) == 1, events
        assert isinstance(failed[0].error, joblocks.LockTimeoutError)
        assert failed[0].error.code == "55P03", repr(failed[0].error)
        assert [run.state for run in model.runs(key)] == ["ok"]
    finally:
        model.dispose()
        engine.dispose()
