"""Shared by the integration tests: a fresh PostgreSQL database on the test server."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from sqlalchemy import URL, make_url

from .servers import Server


@contextlib.contextmanager
def fresh_pg_database(server: Server) -> Iterator[URL]:
    """A new, empty database on ``server`` (dropped afterwards); yields its URL."""
    import psycopg

    name = f"jl_{uuid.uuid4().hex[:12]}"
    admin = f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server.url).set(database=name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def fresh_mariadb_database(server: Server) -> Iterator[URL]:
    """A new, empty database on the MariaDB ``server`` (dropped afterwards)."""
    import pymysql

    name = f"jl_{uuid.uuid4().hex[:12]}"
    admin = {"host": "127.0.0.1", "port": server.port, "user": "root", "autocommit": True}
    with pymysql.connect(**admin) as conn, conn.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{name}`")
    try:
        yield make_url(server.url).set(database=name)
    finally:
        with pymysql.connect(**admin) as conn, conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")


@contextlib.contextmanager
def fresh_database(backend: str, request: object, directory: str) -> Iterator[str]:
    """A URL of an empty database of ``backend``: a new SQLite file, or a new database
    on the test's PostgreSQL or MariaDB server."""
    import pytest

    assert isinstance(request, pytest.FixtureRequest)
    if backend == "sqlite":
        yield f"sqlite:///{directory}/fresh.db"
        return
    if backend == "postgresql":
        with fresh_pg_database(request.getfixturevalue("pg_server")) as url:
            yield url.render_as_string(hide_password=False)
        return
    with fresh_mariadb_database(request.getfixturevalue("mariadb_server")) as url:
        yield url.render_as_string(hide_password=False)
