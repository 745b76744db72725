"""What ``_execute.execute`` decides once per driver connection.

The first statement on a connection finds out what its statements need around them (a
read committed transaction, psycopg awaited directly, aiosqlite's in-place path); one
that needs nothing keeps its driver connection in its pool record's ``info``, and each
later statement goes to that driver connection's cursor directly. The direct path
fails as the general one does: driver errors wrapped as SQLAlchemy wraps them, an
interrupted statement never reusing its connection, a replaced driver connection
deciding again.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import joblocks
import joblocks.aio
from joblocks._core import ops as _ops
from joblocks._db import execute as _execute
from joblocks._sql.statements import Prepared
from joblocks._util.drivers import DuplicateKey

from ...support.servers import Server

TTL = 30_000


def _info(model: joblocks.JobLockModel) -> tuple[Any, dict[str, Any]]:
    """The model's one cached connection and its pool record's ``info``."""
    assert model._cache is not None
    conn = model._cache.take()
    model._cache.put(conn)
    return conn, conn.connection.info


def test_a_plain_connection_goes_direct_after_its_first_statement(
    db_url: str, table_name: str
) -> None:
    model = joblocks.JobLockModel(db_url, table_name=table_name)
    try:
        assert model.acquire("k", TTL, "h") is True
        conn, info = _info(model)
        assert info[_execute._DIRECT].connection is conn.connection.dbapi_connection
        # And the direct path does what the general one did.
        assert model.acquire("k", TTL, "other") is False
        token = model.acquire_token("k", TTL, "h")
        row = model.peek("k")
        assert row is not None
        assert token == row.fence
        assert model.release("k", "h") is True
        assert model.release("k", "h") is False
        assert model.peek("k") is None
    finally:
        model.dispose()


def test_a_strict_default_isolation_never_goes_direct(
    pg_serializable: Server, table_name: str
) -> None:
    """A connection that needs its read committed transaction keeps it."""
    model = joblocks.JobLockModel(pg_serializable.url, table_name=table_name)
    try:
        assert model.acquire("k", TTL, "h") is True
        assert model.release("k", "h") is True
        _conn, info = _info(model)
        assert info[_execute.ISOLATION_INFO] is not None
        assert _execute._DIRECT not in info
    finally:
        model.dispose()


def test_aiosqlite_never_goes_direct(tmp_path: Path, table_name: str) -> None:
    """aiosqlite's statements go where ``in_place`` says, so they keep the general path
    (an asyncio model on an aiosqlite engine passed in: one made from a SQLite URL
    runs its lock work on ``sqlite3`` connections of its own, ``_aio_sqlite``)."""
    import asyncio

    from sqlalchemy.ext.asyncio import create_async_engine

    async def main() -> dict[str, Any]:
        engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
        model = joblocks.aio.JobLockModel(engine, table_name=table_name)
        try:
            assert await model.acquire("k", TTL, "h") is True
            assert await model.release("k", "h") is True
            assert await model.count() == 0  # off the loop's thread: the general path
            async with engine.connect() as conn:
                raw = await conn.get_raw_connection()
                return dict(raw.info)
        finally:
            await model.dispose()
            await engine.dispose()

    info = asyncio.run(main())
    assert info[_execute._AWAITED] is False  # decided: no wrapper, not psycopg
    assert _execute._DIRECT not in info


def _model_with_table(tmp_path: Path, table_name: str) -> tuple[joblocks.JobLockModel, Any]:
    model = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'p.db'}", table_name=table_name)
    assert model.acquire("k", TTL, "h") is True
    conn, info = _info(model)
    assert _execute._DIRECT in info
    return model, conn


def test_a_driver_error_on_the_direct_path_comes_out_normalized(
    tmp_path: Path, table_name: str
) -> None:
    model, conn = _model_with_table(tmp_path, table_name)
    try:
        sql = (
            f"INSERT INTO {table_name} (id, holder, acquired_at, expires_at, fence) "
            "VALUES (?, ?, 0, 0, 0)"
        )
        duplicate = Prepared(sql, ("key", "holder"))
        with pytest.raises(DuplicateKey) as caught:
            _execute.execute(conn, duplicate, {"key": "k", "holder": "x"})
        assert isinstance(caught.value.orig, sqlite3.IntegrityError)
        assert caught.value.__cause__ is caught.value.orig
        assert not caught.value.lost
        assert not conn.invalidated
        # A plain Python error (not the driver's) comes out as it is.
        with pytest.raises(KeyError):
            _execute.execute(conn, duplicate, {"key": "k"})
        assert not conn.invalidated
        assert model.release("k", "h") is True
    finally:
        model.dispose()


class _Interrupted:
    """A driver connection whose statements are interrupted (Ctrl-C mid-statement)."""

    def cursor(self) -> Any:
        return self

    def execute(self, sql: str, params: Any) -> None:
        raise KeyboardInterrupt

    def close(self) -> None:
        pass


def test_an_interrupted_direct_statement_never_reuses_its_connection(
    tmp_path: Path, table_name: str
) -> None:
    model, conn = _model_with_table(tmp_path, table_name)
    try:
        info = conn.connection.info
        real = info[_execute._DIRECT].connection
        interrupted = _Interrupted()
        info[_execute._DIRECT] = _execute.Direct(interrupted, interrupted, _execute._sent)
        with pytest.raises(KeyboardInterrupt):
            _execute.execute(conn, model.statements.release, {"key": "k", "holder": "h"})
        assert conn.invalidated
        assert real is not None
        # The model goes on with another driver connection, which decides again.
        assert model.release("k", "h") is True
        fresh, info = _info(model)
        assert info[_execute._DIRECT].connection is fresh.connection.dbapi_connection
        assert info[_execute._DIRECT].connection is not real
    finally:
        model.dispose()


def test_a_replaced_driver_connection_decides_again(tmp_path: Path, table_name: str) -> None:
    model, conn = _model_with_table(tmp_path, table_name)
    try:
        old = conn.connection.dbapi_connection
        conn.invalidate()  # the pool replaces its driver connection
        assert model.release("k", "h") is True
        fresh, info = _info(model)
        assert fresh.connection.dbapi_connection is not old
        assert info[_execute._DIRECT].connection is fresh.connection.dbapi_connection
    finally:
        model.dispose()


def test_the_token_alone_is_acquire_s_token(tmp_path: Path, table_name: str) -> None:
    """``_ops.acquire_token`` (the plain acquire of both faces) is ``_ops.acquire``'s
    token, and runs on the loop's thread on SQLite like ``acquire``."""
    from joblocks._async.pool import RERUN_SAFE

    assert _ops.acquire_token in _ops.IN_PLACE
    assert _ops.acquire_token in RERUN_SAFE
    engine = sa.create_engine(f"sqlite:///{tmp_path / 't.db'}")
    model = joblocks.JobLockModel(engine, table_name=table_name)
    try:
        model.create_table()
        run = _execute.run
        with engine.connect() as conn:
            st = model.statements
            first = run(conn, _ops.acquire_token(st, "k", "h", TTL))
            assert first is not None
            assert run(conn, _ops.acquire_token(st, "k", "h", TTL)) == first  # re-entrant
            assert run(conn, _ops.acquire_token(st, "k", "other", TTL)) is None
            assert run(conn, _ops.release(st, "k", "h"))
            grant = run(conn, _ops.acquire(st, "k", "h", TTL))
            assert grant is not None
            assert grant.fence > first
            assert run(conn, _ops.release(st, "k", "h"))
            assert (run(conn, _ops.acquire_token(st, "k", "h", TTL)) or 0) > grant.fence
    finally:
        model.dispose()
        engine.dispose()
