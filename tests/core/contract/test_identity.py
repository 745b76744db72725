"""The in-process overlap guard keys on the table itself, not on how its URL is spelled.

Two models of one process on the same table, reached through two spellings of its
database (a symlinked directory, a file symlink, a relative path, ``..``, ``localhost``
for ``127.0.0.1``, extra URL parameters, a Unix socket, the default schema named): a
``run_with_lock`` of the second while the first runs returns False, and the first one's
row stays in place. Models on different tables do not block each other.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

import joblocks
import joblocks.aio

from ...support.servers import MARIADB_DATABASE, Server

TTL = 30_000


def assert_overlap_refused(first: Any, second: Any, key: str) -> None:
    """``second.run_with_lock`` inside ``first.run_with_lock``: refused, row kept."""
    seen: list[object] = []

    def inner_work() -> None:
        seen.append("inner ran")

    def work() -> None:
        seen.append(second.run_with_lock(key, TTL, inner_work))
        row = first.peek(key)
        seen.append(None if row is None else row.holder)

    assert first.run_with_lock(key, TTL, work) is True
    assert seen == [False, joblocks.worker_id()], seen
    assert first.peek(key) is None  # released once, by the first call


def assert_no_overlap_guard(first: Any, second: Any, key: str) -> None:
    """Different tables: the second call runs while the first one does."""
    seen: list[object] = []

    def work() -> None:
        seen.append(second.run_with_lock(key, TTL, lambda: None))

    assert first.run_with_lock(key, TTL, work) is True
    assert seen == [True]


# -- SQLite: the file's device and inode ------------------------------------------------


def sqlite_spellings(tmp: Path) -> dict[str, str]:
    real = tmp / "real"
    real.mkdir()
    (tmp / "link").symlink_to(real, target_is_directory=True)
    (real / "locks.db").touch()
    (real / "alias.db").symlink_to(real / "locks.db")
    return {
        "symlinked directory": f"sqlite:///{tmp}/link/locks.db",
        "file symlink": f"sqlite:///{real}/alias.db",
        "relative path": "sqlite:///real/locks.db",
        "path with ..": f"sqlite:///{real}/../link/../real/locks.db",
        "file: URI": f"sqlite:///file:{real}/locks.db?mode=rwc&uri=true",
    }


SQLITE_SPELLINGS = (
    "symlinked directory",
    "file symlink",
    "relative path",
    "path with ..",
    "file: URI",
)


@pytest.mark.parametrize("spelling", SQLITE_SPELLINGS)
def test_sqlite_spellings_share_the_guard(
    make_face_model: Callable[..., Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spelling: str,
    key: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    other = sqlite_spellings(tmp_path)[spelling]
    first = make_face_model(f"sqlite:///{tmp_path}/real/locks.db")
    second = make_face_model(other)
    assert_overlap_refused(first, second, key)
    assert first.identity == second.identity
    assert first.identity[:3] == ("sqlite", *_device_inode(tmp_path / "real" / "locks.db"))


def test_sqlite_table_name_case_is_one_table(
    make_face_model: Callable[..., Any], tmp_path: Path, key: str
) -> None:
    url = f"sqlite:///{tmp_path}/locks.db"
    first = make_face_model(url, table_name="job_locks")
    second = make_face_model(url, table_name="Job_Locks")  # SQLite ignores the case
    assert_overlap_refused(first, second, key)


def test_sqlite_other_files_and_tables_do_not_share_the_guard(
    make_face_model: Callable[..., Any], tmp_path: Path, key: str
) -> None:
    url = f"sqlite:///{tmp_path}/locks.db"
    first = make_face_model(url)
    assert_no_overlap_guard(first, make_face_model(f"sqlite:///{tmp_path}/other.db"), key)
    assert_no_overlap_guard(first, make_face_model(url, table_name="other_locks"), key)
    # A copy of the file is another database: the copy's lock rows are its own.
    copy = tmp_path / "copy.db"
    copy.write_bytes((tmp_path / "locks.db").read_bytes())
    assert_no_overlap_guard(first, make_face_model(f"sqlite:///{copy}"), key)


def _device_inode(path: Path) -> tuple[int, int]:
    found = os.stat(path)
    return found.st_dev, found.st_ino


# -- PostgreSQL: the cluster's system identifier, the database, the resolved table --------


def pg_spelling(server: Server, spelling: str) -> tuple[str, dict[str, Any]]:
    port = server.port
    if spelling == "localhost":
        return f"postgresql+psycopg://postgres@localhost:{port}/postgres", {}
    if spelling == "application_name":
        return f"{server.url}?application_name=x", {}
    if spelling == "unix socket":
        return f"postgresql+psycopg://postgres@/postgres?host={server.socket_dir}&port={port}", {}
    if spelling == "schema named":
        return server.url, {"schema": "public"}
    raise AssertionError(spelling)


@pytest.mark.parametrize(
    "spelling", ["localhost", "application_name", "unix socket", "schema named"]
)
def test_postgresql_spellings_share_the_guard(
    make_face_model: Callable[..., Any], pg_server: Server, spelling: str, key: str
) -> None:
    url, options = pg_spelling(pg_server, spelling)
    first = make_face_model(pg_server.url)
    second = make_face_model(url, **options)
    assert_overlap_refused(first, second, key)
    assert first.identity == second.identity


def test_postgresql_other_tables_do_not_share_the_guard(
    make_face_model: Callable[..., Any], pg_server: Server, table_name: str, key: str
) -> None:
    first = make_face_model(pg_server.url)
    other = make_face_model(pg_server.url, table_name=f"{table_name}_b")
    assert_no_overlap_guard(first, other, key)
    # A quoted mixed-case name is another table on PostgreSQL.
    mixed = make_face_model(pg_server.url, table_name=f"{table_name}_B")
    assert_no_overlap_guard(other, mixed, key)


def test_postgresql_without_pg_control_system_keys_on_the_port(
    make_face_model: Callable[..., Any], pg_server: Server, table_name: str, key: str
) -> None:
    admin = create_engine(pg_server.url, isolation_level="AUTOCOMMIT")
    role = f"r_{table_name}"
    with admin.connect() as conn:
        conn.execute(text(f"CREATE ROLE {role} LOGIN"))
        conn.execute(text(f"GRANT USAGE, CREATE ON SCHEMA public TO {role}"))
        conn.execute(text("REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC"))
    try:
        url = pg_server.url.replace("postgres@", f"{role}@")
        first = make_face_model(url)
        second = make_face_model(url.replace("127.0.0.1", "localhost") + "?application_name=y")
        assert_overlap_refused(first, second, key)
        assert first.identity[1] == f"port {pg_server.port}"
    finally:
        with admin.connect() as conn:
            conn.execute(text("GRANT EXECUTE ON FUNCTION pg_control_system() TO PUBLIC"))
        admin.dispose()


# -- a missing table is an error, and no identity is kept ---------------------------------


def test_run_with_lock_on_a_missing_table_raises_and_keeps_no_identity(
    make_model: Any, backend: str, key: str
) -> None:
    model = make_model(create_table=False)
    with pytest.raises(joblocks.LockBackendError) as info:
        model.run_with_lock(key, TTL, lambda: None)
    assert "exist" in str(info.value) or "no such table" in str(info.value)
    if backend != "sqlite":
        assert model.identity is None  # read again once the table exists
    model.create_table()
    other = make_model()
    assert_overlap_refused(model, other, key)


# -- MariaDB: the server's hostname, port and data directory, the resolved table ----------


def mariadb_spelling(server: Server, spelling: str) -> tuple[str, dict[str, Any]]:
    port = server.port
    if spelling == "localhost":
        return f"mysql+pymysql://root@localhost:{port}/{MARIADB_DATABASE}", {}
    if spelling == "charset":
        return f"{server.url}?charset=utf8mb4", {}
    if spelling == "unix socket":
        socket = server.socket_dir / "mysqld.sock"
        return f"mysql+pymysql://root@localhost/{MARIADB_DATABASE}?unix_socket={socket}", {}
    if spelling == "mariadb dialect":
        return server.url.replace("mysql+pymysql://", "mariadb+pymysql://"), {}
    if spelling == "schema named":
        return server.url, {"schema": MARIADB_DATABASE}
    raise AssertionError(spelling)


@pytest.mark.parametrize(
    "spelling", ["localhost", "charset", "unix socket", "mariadb dialect", "schema named"]
)
def test_mariadb_spellings_share_the_guard(
    make_face_model: Callable[..., Any], mariadb_server: Server, spelling: str, key: str
) -> None:
    url, options = mariadb_spelling(mariadb_server, spelling)
    first = make_face_model(mariadb_server.url)
    second = make_face_model(url, **options)
    assert_overlap_refused(first, second, key)
    assert first.identity == second.identity


def test_mariadb_other_tables_do_not_share_the_guard(
    make_face_model: Callable[..., Any], mariadb_server: Server, table_name: str, key: str
) -> None:
    first = make_face_model(mariadb_server.url)
    other = make_face_model(mariadb_server.url, table_name=f"{table_name}_b")
    assert_no_overlap_guard(first, other, key)


# -- a sync and an asyncio model on one table share the guard -----------------------------


def test_sync_and_asyncio_models_share_the_guard(db_url: str, table_name: str, key: str) -> None:
    sync_model = joblocks.JobLockModel(db_url, table_name=table_name)
    seen: list[bool] = []

    async def from_asyncio() -> None:
        async_model = joblocks.aio.JobLockModel(db_url, table_name=table_name)

        async def inner() -> None:
            seen.append(True)  # must not run

        try:
            seen.append(await joblocks.aio.run_with_lock(key, TTL, inner, model=async_model))
            assert async_model.identity == sync_model.identity
        finally:
            await async_model.dispose()

    try:
        assert joblocks.run_with_lock(
            key, TTL, lambda: asyncio.run(from_asyncio()), model=sync_model
        )
        assert seen == [False]
    finally:
        sync_model.dispose()


def test_identity_is_unknown_until_first_use(tmp_path: Path) -> None:
    model = joblocks.JobLockModel(f"sqlite:///{tmp_path}/locks.db")
    try:
        assert model.identity is None  # nothing is read when the model is made
        assert not (tmp_path / "locks.db").exists()
        model.peek("k")
        assert model.identity is not None
    finally:
        model.dispose()


def test_an_in_memory_uri_is_refused_at_first_use(make_face_model: Callable[..., Any]) -> None:
    # ``file::memory:`` passes the URL check; the connection then reports no file.
    model = make_face_model("sqlite:///file::memory:?uri=true")
    with pytest.raises(ValueError, match="has no file"):
        model.peek("k")
