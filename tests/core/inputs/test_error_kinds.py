"""Each kind of database failure is raised as its own ``LockBackendError`` subclass,
for real, on both faces: a closed port, a server that never answers, a table that is
not there, a driver that cannot be imported, a read-only database and a role without
grants. ``except LockBackendError`` still catches them all.
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import joblocks
import joblocks.aio
from joblocks import (
    LockBackendError,
    LockConnectionError,
    LockPermissionError,
    LockReadOnlyError,
    LockTableError,
    LockTableMissing,
    LockTimeoutError,
)

from ...support.servers import Server
from ...support.silent import SilentServer

HANG_GUARD_S = 30.0
TIMEOUT = 60


def _raised(face: str, url: str, call: Callable[[Any], Any], **options: Any) -> BaseException:
    """Make a model of ``face`` for ``url``, run ``call(model)`` (awaited on the asyncio
    face) in a thread, and return what it raised; a hang fails the test."""
    outcome: list[BaseException | None] = []

    def sync() -> None:
        model = joblocks.JobLockModel(url, **options)
        try:
            call(model)
        finally:
            model.dispose()

    async def aio() -> None:
        model = joblocks.aio.JobLockModel(url, **options)
        try:
            await call(model)
        finally:
            await asyncio.wait_for(model.dispose(), HANG_GUARD_S)

    def target() -> None:
        try:
            sync() if face == "sync" else asyncio.run(aio())
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(HANG_GUARD_S)
    if worker.is_alive():
        pytest.fail(f"no answer within {HANG_GUARD_S} s")
    assert outcome, "the call ended without an outcome"
    raised = outcome[0]
    assert raised is not None, "the call did not fail"
    return raised


def _peek(model: Any) -> Any:
    return model.peek("k")


def _acquire(model: Any) -> Any:
    return model.acquire("k", 60_000, "w1")


SERVER_URLS = {
    "postgresql": "postgresql://u:secret@127.0.0.1:{port}/db",
    "mariadb": "mysql://u:secret@127.0.0.1:{port}/db",
}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize("database", ["postgresql", "mariadb"])
def test_a_closed_port_is_a_connection_error(face: str, database: str) -> None:
    url = SERVER_URLS[database].format(port=_closed_port())
    raised = _raised(face, url, _peek, timeout=5_000)
    assert type(raised) is LockConnectionError, repr(raised)
    assert "secret" not in str(raised)


def test_a_missing_sqlite_directory_is_a_connection_error(tmp_path: Path) -> None:
    # The sync face only: aiosqlite's worker thread answers a failed connect after
    # asyncio.run() has closed the loop, which pytest reports as a thread exception.
    # Both faces meet a connection error above (a closed port).
    url = f"sqlite:///{tmp_path / 'absent' / 'locks.db'}"
    raised = _raised("sync", url, _peek, create_table=False)
    assert type(raised) is LockConnectionError, repr(raised)


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


@pytest.mark.parametrize("database", ["postgresql", "mariadb"])
def test_a_silent_server_is_a_timeout(face: str, database: str, silent: SilentServer) -> None:
    url = SERVER_URLS[database].format(port=silent.port)
    raised = _raised(face, url, _peek, timeout=1_000)
    assert type(raised) is LockTimeoutError, repr(raised)


def test_a_busy_sqlite_file_is_a_timeout(face: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    joblocks.JobLockModel(url).create_table()
    blocker = sqlite3.connect(tmp_path / "locks.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        raised = _raised(face, url, _acquire, timeout=300)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert type(raised) is LockTimeoutError, repr(raised)


def test_a_missing_table_is_a_table_error(face: str, db_url: str) -> None:
    table = f"absent_{uuid.uuid4().hex[:8]}"
    raised = _raised(face, db_url, _peek, table_name=table, create_table=False)
    assert type(raised) is LockTableMissing, repr(raised)
    assert isinstance(raised, LockTableError)
    assert isinstance(raised, LockBackendError)


def _blocked(module: str, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a Python where ``module`` cannot be imported (as if not installed)."""
    prelude = f"import sys; sys.modules[{module!r}] = None\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=TIMEOUT
    )


@pytest.mark.parametrize(
    ("module", "url"),
    [("psycopg", "postgresql://u@127.0.0.1:1/db"), ("pymysql", "mysql://u@127.0.0.1:1/db")],
)
def test_a_missing_driver_is_a_driver_error(module: str, url: str) -> None:
    code = (
        "import joblocks\n"
        "try:\n"
        f"    joblocks.JobLockModel({url!r}).peek('k')\n"
        "except joblocks.LockDriverMissing as exc:\n"
        "    assert isinstance(exc, joblocks.LockBackendError)\n"
        "    assert isinstance(exc, ImportError)\n"
        "    print('kind', type(exc).__name__, exc.module)\n"
    )
    result = _blocked(module, code)
    assert result.returncode == 0, result.stderr
    assert f"kind LockDriverMissing {module}" in result.stdout


def test_the_cli_names_the_extra_for_a_missing_driver(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from joblocks.cli import main\n"
        "sys.exit(main(['--url', 'postgresql://u@127.0.0.1:1/db', 'peek', 'k']))\n"
    )
    result = _blocked("psycopg", code)
    assert result.returncode == 3, result.stderr
    assert "pip install 'joblocks[postgresql]'" in result.stderr


# -- read-only and permission (the throwaway PostgreSQL and MariaDB servers) -----------


def _admin(server: Server, dbname: str = "postgres") -> psycopg.Connection[Any]:
    return psycopg.connect(
        host="127.0.0.1", port=server.port, user="postgres", dbname=dbname, autocommit=True
    )


@pytest.fixture
def pg_database(pg_server: Server) -> Iterator[tuple[str, str]]:
    """A database of its own on the throwaway server: (name, URL)."""
    name = f"kind_{uuid.uuid4().hex[:8]}"
    with _admin(pg_server) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield name, pg_server.url.rsplit("/", 1)[0] + f"/{name}"
    with _admin(pg_server) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_a_read_only_postgresql_database_is_a_read_only_error(
    face: str, pg_server: Server, pg_database: tuple[str, str], table_name: str
) -> None:
    name, url = pg_database
    joblocks.JobLockModel(url, table_name=table_name).create_table()
    with _admin(pg_server) as conn:  # as on a hot standby: every transaction read-only
        conn.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
    raised = _raised(face, url, _acquire, table_name=table_name, create_table=False)
    assert type(raised) is LockReadOnlyError, repr(raised)
    assert isinstance(raised, LockPermissionError)
    assert raised.code == "25006"


def test_a_postgresql_role_without_grants_is_a_permission_error(
    face: str, pg_server: Server, pg_database: tuple[str, str], table_name: str
) -> None:
    name, url = pg_database
    joblocks.JobLockModel(url, table_name=table_name).create_table()
    role = f"nogrant_{uuid.uuid4().hex[:8]}"
    with _admin(pg_server) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
    try:
        role_url = url.replace("postgres@", f"{role}@")
        raised = _raised(face, role_url, _acquire, table_name=table_name, create_table=False)
        assert type(raised) is LockPermissionError, repr(raised)
        assert raised.code == "42501"
    finally:
        with _admin(pg_server, name) as conn:
            conn.execute(f"DROP OWNED BY {role}")
        with _admin(pg_server) as conn:
            conn.execute(f"DROP ROLE {role}")


def test_a_mariadb_user_without_grants_is_a_permission_error(
    face: str, mariadb_server: Server, table_name: str
) -> None:
    import pymysql  # type: ignore[import-untyped, unused-ignore]

    joblocks.JobLockModel(mariadb_server.url, table_name=table_name).create_table()
    user = f"ng_{uuid.uuid4().hex[:8]}"
    root = pymysql.connect(
        host="127.0.0.1", port=mariadb_server.port, user="root", database="joblocks_test"
    )
    try:
        with root.cursor() as cur:
            cur.execute(f"CREATE USER '{user}'@'127.0.0.1'")
            cur.execute(f"GRANT SELECT ON joblocks_test.* TO '{user}'@'127.0.0.1'")
        url = mariadb_server.url.replace("root@", f"{user}@")
        raised = _raised(face, url, _acquire, table_name=table_name, create_table=False)
        assert type(raised) is LockPermissionError, repr(raised)
        assert raised.code == 1142
    finally:
        with root.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'")
            cur.execute(f"DROP TABLE IF EXISTS `{table_name}`")
        root.close()
