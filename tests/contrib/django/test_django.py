"""joblocks.contrib.django: URLs from DATABASES, the migration, the command decorator.

The Django parts run the test project (``djangoproject/``) in subprocesses, as
``python -m django ...`` with ``DJANGO_SETTINGS_MODULE``, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import BigInteger, String, create_engine, inspect, make_url, text

import joblocks
from joblocks.contrib.django import url_from_settings
from joblocks.contrib.django._ddl import create_statements, drop_statements

from ...support.databases import fresh_pg_database

pytest.importorskip("django")

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = "tests.contrib.django.djangoproject.settings"


# -- URLs from DATABASES (no Django needed) ----------------------------------------


def test_sqlite_url_from_settings(tmp_path: Path) -> None:
    url = url_from_settings(
        {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": tmp_path / "db.sqlite3",
            "OPTIONS": {"timeout": 20, "init_command": "PRAGMA foo", "transaction_mode": "X"},
        }
    )
    assert url.drivername == "sqlite"
    assert url.database == str(tmp_path / "db.sqlite3")
    assert dict(url.query) == {"timeout": "20"}


def test_sqlite_uri_name_keeps_its_parameters() -> None:
    url = url_from_settings(
        {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": "file:memorydb_default?mode=memory&cache=shared",
        }
    )
    assert url.database == "file:memorydb_default"
    assert dict(url.query) == {"mode": "memory", "cache": "shared", "uri": "true"}
    with pytest.raises(ValueError, match="in-memory SQLite"):
        joblocks.JobLockModel(url)


def test_postgresql_url_from_settings() -> None:
    url = url_from_settings(
        {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "app",
            "USER": "app",
            "PASSWORD": "s3cr@t/x",
            "HOST": "db.internal",
            "PORT": "6432",
            "OPTIONS": {
                "sslmode": "require",
                "connect_timeout": 3,
                "isolation_level": 2,
                "server_side_binding": True,
                "pool": {"min_size": 2},
            },
        }
    )
    assert (url.drivername, url.username, url.password) == ("postgresql", "app", "s3cr@t/x")
    assert (url.host, url.port, url.database) == ("db.internal", 6432, "app")
    assert dict(url.query) == {"sslmode": "require", "connect_timeout": "3"}
    # The password survives the round trip through the URL text.
    again = make_url(url.render_as_string(hide_password=False))
    assert again.password == "s3cr@t/x"  # noqa: S105 - a test value


def test_postgresql_socket_directory_and_empty_fields() -> None:
    url = url_from_settings(
        {
            "ENGINE": "django.contrib.gis.db.backends.postgis",
            "NAME": "app",
            "USER": "",
            "PASSWORD": "",
            "HOST": "/var/run/postgresql",
            "PORT": "",
        }
    )
    assert url.host is None
    assert url.port is None
    assert url.username is None
    assert dict(url.query) == {"host": "/var/run/postgresql"}


def test_mysql_url_from_settings() -> None:
    url = url_from_settings(
        {
            "ENGINE": "django.db.backends.mysql",
            "NAME": "app",
            "USER": "app",
            "HOST": "/run/mysqld/mysqld.sock",
            "PORT": 3306,
            "OPTIONS": {"charset": "utf8mb4", "ssl": {"ca": "/ca.pem"}, "isolation_level": "x"},
        }
    )
    assert url.drivername == "mysql"
    assert url.host is None
    assert url.port == 3306
    assert dict(url.query) == {
        "unix_socket": "/run/mysqld/mysqld.sock",
        "charset": "utf8mb4",
        "ssl_ca": "/ca.pem",
    }


def test_unsupported_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="not supported by joblocks"):
        url_from_settings({"ENGINE": "django.db.backends.oracle", "NAME": "x"})


# -- the migration's DDL, applied on every database -----------------------------------


VENDOR = {"sqlite": "sqlite", "postgresql": "postgresql", "mariadb": "mysql"}


def test_migration_ddl_makes_a_working_table(db_url: str, table_name: str, backend: str) -> None:
    vendor = VENDOR[backend]
    engine = create_engine(db_url, isolation_level="AUTOCOMMIT")
    try:
        for _ in range(2):  # idempotent: a second run (or joblocks's own table) is fine
            with engine.connect() as conn:
                for statement in create_statements(vendor, table_name):
                    conn.exec_driver_sql(statement)
        model = joblocks.JobLockModel(db_url, table_name=table_name, create_table=False)
        try:
            first = model.acquire_token("a", 60_000, "w1")
            second = model.acquire_token("b", 60_000, "w2")
            assert first is not None
            assert second is not None
            assert second > first
            assert model.release("a", "w1")
            again = model.acquire_token("a", 60_000, "w3")
            assert again is not None
            assert again > second
            row = model.peek("b")
            assert row is not None
            assert row.holder == "w2"
        finally:
            model.dispose()
        with engine.connect() as conn:
            for statement in drop_statements(vendor, table_name):
                conn.exec_driver_sql(statement)
            assert not inspect(conn).has_table(table_name)
    finally:
        engine.dispose()


def test_ddl_refuses_other_vendors() -> None:
    with pytest.raises(ValueError, match="oracle"):
        create_statements("oracle")


# -- the Django project ---------------------------------------------------------------


def _env(database: dict[str, Any], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBLOCKS_", "JL_"))}
    env["DJANGO_SETTINGS_MODULE"] = SETTINGS
    env["JL_DJANGO_DATABASE"] = json.dumps(database)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def _django(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "django", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.server)])
def django_db(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[dict[str, Any], str]]:
    """(Django's DATABASES entry, the SQLAlchemy URL of the same database)."""
    if request.param == "sqlite":
        path = tmp_path / "django.sqlite3"
        yield {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path)}, f"sqlite:///{path}"
        return
    server = request.getfixturevalue("pg_server")
    with fresh_pg_database(server) as url:
        entry = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": url.database,
            "USER": url.username,
            "HOST": url.host,
            "PORT": url.port,
        }
        yield entry, url.render_as_string(hide_password=False)


def _columns(url: str) -> dict[str, Any]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            found = inspect(conn)
            if not found.has_table("job_locks"):
                return {}
            columns = {c["name"]: c for c in found.get_columns("job_locks")}
            columns["__pk__"] = found.get_pk_constraint("job_locks")["constrained_columns"]
            if conn.dialect.name == "sqlite":
                rows = conn.execute(
                    text("SELECT type, name FROM sqlite_master WHERE name LIKE 'job_locks_fence%'")
                ).all()
                columns["__fence__"] = sorted(tuple(row) for row in rows)
            else:
                names = found.get_sequence_names()
                columns["__fence__"] = [n for n in names if n.startswith("job_locks")]
            return columns
    finally:
        engine.dispose()


def test_migrate_creates_the_table_and_reverses(django_db: tuple[dict[str, Any], str]) -> None:
    entry, url = django_db
    env = _env(entry)
    _ok(_django(env, "migrate", "--no-input"))
    columns = _columns(url)
    assert [name for name in columns if not name.startswith("__")] == [
        "id",
        "holder",
        "acquired_at",
        "expires_at",
        "fence",
    ]
    assert columns["__pk__"] == ["id"]
    for name, length in (("id", 512), ("holder", 255)):
        assert isinstance(columns[name]["type"], String)
        assert columns[name]["type"].length == length
    for name in ("acquired_at", "expires_at", "fence"):
        assert isinstance(columns[name]["type"], BigInteger)
    assert all(not columns[name]["nullable"] for name in ("id", "holder", "fence"))
    if url.startswith("sqlite"):
        assert columns["__fence__"] == [
            ("table", "job_locks_fence"),
            ("trigger", "job_locks_fence_ins"),
            ("trigger", "job_locks_fence_upd"),
        ]
    else:
        assert columns["__fence__"] == ["job_locks_fence_seq"]

    model = joblocks.JobLockModel(url, create_table=False)
    try:
        first = model.acquire_token("django-job", 60_000, "w1")
        assert first is not None
        assert model.release("django-job", "w1")
        second = model.acquire_token("django-job", 60_000, "w2")
        assert second is not None
        assert second > first
    finally:
        model.dispose()

    _ok(_django(env, "migrate", "joblocks", "zero", "--no-input"))
    assert _columns(url) == {}
    # joblocks made the table itself first: the migration still applies.
    made = joblocks.JobLockModel(url)
    made.create_table()
    made.dispose()
    _ok(_django(env, "migrate", "--no-input"))
    assert _columns(url)["__pk__"] == ["id"]


def _wait_first(processes: list[subprocess.Popen[str]], timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for index, process in enumerate(processes):
            if process.poll() is not None:
                return index
        time.sleep(0.02)
    raise AssertionError("neither command finished")


def test_command_runs_on_one_instance_at_a_time(
    django_db: tuple[dict[str, Any], str], tmp_path: Path
) -> None:
    entry, url = django_db
    env = _env(entry)
    _ok(_django(env, "migrate", "--no-input"))
    started, release = tmp_path / "started", tmp_path / "release"
    argv = [
        sys.executable,
        "-m",
        "django",
        "slowjob",
        f"--started={started}",
        f"--release={release}",
    ]
    processes = [
        subprocess.Popen(
            argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    try:
        first = _wait_first(processes, timeout=60)
        skipped = processes[first]
        out, err = skipped.communicate(timeout=10)
        assert skipped.returncode == 0, err
        assert out == ""
        assert "slowjob: skipped, another instance holds the lock 'slowjob'" in err
        assert started.exists(), "the other instance holds the lock and is running"
        model = joblocks.JobLockModel(url, create_table=False)
        try:
            row = model.peek("slowjob")  # the key defaults to the command's name
            assert row is not None
            assert not row.expired
            release.touch()
            runner = processes[1 - first]
            out, err = runner.communicate(timeout=60)
            assert runner.returncode == 0, err
            assert out.strip() == "ran"  # handle()'s return value is printed as usual
            assert model.peek("slowjob") is None  # released at the end
        finally:
            model.dispose()
    finally:
        release.touch()
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.communicate()

    named = _ok(_django(env, "namedjob")).stdout
    assert named.startswith("held by ")
    assert " fence " in named


def test_app_configures_joblocks_from_databases(tmp_path: Path) -> None:
    path = tmp_path / "django.sqlite3"
    env = _env({"ENGINE": "django.db.backends.sqlite3", "NAME": str(path)})
    code = "import joblocks; print(joblocks.get_model().engine.url.database)"
    # The last line: Django 5.2's shell first reports its automatic imports.
    assert _ok(_django(env, "shell", "-c", code)).stdout.splitlines()[-1] == str(path)
    off = _env(
        {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path)},
        JL_DJANGO_CONFIGURE="0",
        JOBLOCKS_URL=f"sqlite:///{tmp_path / 'other.db'}",
    )
    assert _ok(_django(off, "shell", "-c", code)).stdout.splitlines()[-1] == str(
        tmp_path / "other.db"
    )
    # The app has no models: its migration state never drifts.
    _ok(_django(env, "makemigrations", "--check", "--dry-run", "joblocks"))


@pytest.mark.parametrize(
    ("entry", "alias", "error"),
    [
        ({"ENGINE": "django.db.backends.sqlite3", "NAME": "x.db"}, "missing", "joblocks.E002"),
        ({"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}, "default", "joblocks.E004"),
    ],
    ids=["unknown-alias", "in-memory"],
)
def test_system_check_reports_bad_settings(entry: dict[str, str], alias: str, error: str) -> None:
    result = _django(_env(entry, JL_DJANGO_ALIAS=alias), "check")
    assert result.returncode != 0
    assert error in result.stderr
