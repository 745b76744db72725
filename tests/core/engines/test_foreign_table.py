"""A table of the lock table's name that is not ours is refused; nothing is created.

Also: a failed table creation is named ``create table`` on both faces.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, inspect, text

import joblocks
import joblocks.aio

from ...support.cli import run_cli

#: The shape of the issue: another library's lock table under the same name.
FOREIGN = (
    '(_id VARCHAR(100) PRIMARY KEY, holder VARCHAR(100), "acquiredAt" BIGINT, "expiresAt" BIGINT)'
)
#: Our column names, but the times as timestamps.
WRONG_TYPES = (
    "(id VARCHAR(100) PRIMARY KEY, holder VARCHAR(100), acquired_at TIMESTAMP NULL, "
    "expires_at TIMESTAMP NULL, fence BIGINT)"
)


@pytest.fixture
def plain(db_url: str) -> Iterator[Engine]:
    """A plain SQLAlchemy engine on the test's database, as a user would make one."""
    engine = create_engine(db_url, isolation_level="AUTOCOMMIT")
    yield engine
    engine.dispose()


def make_foreign(engine: Engine, table: str, columns: str) -> None:
    if engine.dialect.name != "postgresql" and engine.dialect.name != "sqlite":
        columns = columns.replace('"', "`")
    with engine.connect() as conn:
        conn.execute(text(f"CREATE TABLE {table} {columns}"))


def created_beside(engine: Engine, table: str) -> list[str]:
    """The fencing sequence or counter (and SQLite triggers) of ``table``, if any."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            rows = conn.execute(
                text("SELECT name FROM sqlite_master WHERE name LIKE :p OR tbl_name = :t"),
                {"p": f"{table}_fence%", "t": table},
            ).all()
            return sorted(row[0] for row in rows if row[0] != table and "autoindex" not in row[0])
        found = inspect(conn)
        return [f"{table}_fence_seq"] if found.has_sequence(f"{table}_fence_seq") else []


def test_a_foreign_table_is_refused_on_first_use(
    make_model: Any, plain: Engine, table_name: str, key: str
) -> None:
    make_foreign(plain, table_name, FOREIGN)
    model = make_model()
    with pytest.raises(joblocks.LockTableMismatch) as info:
        model.acquire(key, 10_000, "w1")
    error = info.value
    assert isinstance(error, joblocks.LockBackendError)
    assert error.operation == "create table"
    assert error.table == table_name
    assert "missing columns id, acquired_at, expires_at, fence" in str(error)
    assert "extra columns _id, acquiredAt, expiresAt" in str(error)
    assert "nothing was created" in str(error)
    assert created_beside(plain, table_name) == []
    with pytest.raises(joblocks.LockTableMismatch):  # every later call too
        model.peek(key)
    with pytest.raises(joblocks.LockTableMismatch):
        model.create_table()
    assert created_beside(plain, table_name) == []
    assert joblocks.aio.LockTableMismatch is joblocks.LockTableMismatch


def test_our_column_names_with_other_types_are_refused(
    make_model: Any, plain: Engine, table_name: str, key: str
) -> None:
    make_foreign(plain, table_name, WRONG_TYPES)
    model = make_model()
    with pytest.raises(joblocks.LockTableMismatch) as info:
        model.acquire(key, 10_000, "w1")
    problems = info.value.problems
    assert [line.split()[1] for line in problems] == ["acquired_at", "expires_at"], problems
    assert all(line.endswith(", not an integer") for line in problems), problems
    assert "TIMESTAMP" in problems[0] or "DATETIME" in problems[0], problems
    assert created_beside(plain, table_name) == []


def test_our_own_table_is_accepted(make_model: Any, table_name: str, key: str) -> None:
    first = make_model()
    assert first.acquire(key, 10_000, "w1") is True
    second = make_model()  # finds the table made by the first: it is ours
    assert second.acquire(key, 10_000, "w2") is False


def cli_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("JOBLOCKS_URL", None)
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return env


def test_init_refuses_a_foreign_table(
    db_url: str, plain: Engine, table_name: str, tmp_path: Path
) -> None:
    make_foreign(plain, table_name, FOREIGN)
    done = run_cli("--url", db_url, "--table", table_name, "init", env=cli_env(tmp_path))
    assert done.returncode == 3, done  # EXIT_BACKEND, as documented in docs/cli.md
    assert done.stdout == ""
    message = done.stderr
    assert f"table {table_name} on " in message
    assert "is not a joblocks lock table" in message
    assert "missing columns id, acquired_at, expires_at, fence" in message
    assert "extra columns _id, acquiredAt, expiresAt" in message
    assert "Nothing was created" in message
    assert "already exists" not in message
    assert created_beside(plain, table_name) == []


# -- a failed table creation has one name on both faces --------------------------------


def block_creation(engine: Engine, table: str) -> None:
    """Make creating ``table``'s fencing sequence (counter on SQLite) fail."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.execute(text(f'CREATE VIEW "{table}_fence" AS SELECT 1 AS id, 1 AS value'))
        else:
            conn.execute(text(f"CREATE TABLE {table}_fence_seq (x INTEGER)"))


def test_a_failed_table_creation_is_named_create_table(
    make_model: Any, plain: Engine, table_name: str, key: str
) -> None:
    block_creation(plain, table_name)
    model = make_model()
    for call in (lambda: model.peek(key), lambda: model.acquire(key, 10_000, "w1")):
        with pytest.raises(joblocks.LockBackendError) as info:
            call()
        assert info.value.operation == "create table"
        assert str(info.value).startswith("create table failed on ")
