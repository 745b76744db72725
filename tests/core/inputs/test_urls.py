"""Database URLs as users write them: ``postgres://``, query parameters with the types
the drivers want, and errors that name the argument and show the expected form.

Query parameters are tried on real connections to the test set-up's servers.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from sqlalchemy import make_url

import joblocks
import joblocks.aio

from ...support.cli import run_cli

FORM = "dialect://user:password@host:port/database"


def _spelled(url: str, drivername: str, **query: str) -> str:
    parsed = make_url(url).set(drivername=drivername)
    if query:
        parsed = parsed.update_query_dict(query)
    return parsed.render_as_string(hide_password=False)


def _exercise(model: Any, key: str) -> None:
    assert model.acquire(key, 60_000, "w1")
    row = model.peek(key)
    assert row is not None
    assert row.holder == "w1"
    assert model.release(key, "w1")


# -- postgres:// -----------------------------------------------------------------------


def _on_face(face: str, url: str, table_name: str, key: str) -> str:
    """Acquire, peek and release through a model of ``face``; the model's dialect name."""
    if face == "sync":
        model = joblocks.JobLockModel(url, table_name=table_name)
        try:
            _exercise(model, key)
            return str(model.engine.dialect.name)
        finally:
            model.dispose()

    async def main() -> str:
        model = joblocks.aio.JobLockModel(url, table_name=table_name)
        try:
            assert await model.acquire(key, 60_000, "w1")
            row = await model.peek(key)
            assert row is not None
            assert await model.release(key, "w1")
            return str(model.engine.dialect.name)
        finally:
            await model.dispose()

    return asyncio.run(main())


@pytest.mark.server
@pytest.mark.parametrize("drivername", ["postgres", "postgres+psycopg"])
def test_postgres_spelling_is_postgresql(
    pg_server: Any, face: str, table_name: str, key: str, drivername: str
) -> None:
    url = _spelled(pg_server.url, drivername)
    assert _on_face(face, url, table_name, key) == "postgresql"


@pytest.mark.server
def test_postgres_spelling_through_configure_and_the_environment(
    pg_server: Any, table_name: str, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _spelled(pg_server.url, "postgres")
    try:
        joblocks.configure(url, table_name=table_name)
        assert joblocks.run_with_lock(key, 60_000, lambda: None)
        joblocks.aio.configure(url, table_name=table_name)
        assert asyncio.run(_aio_run(key))
    finally:
        joblocks.configure()
        joblocks.aio.configure()
    monkeypatch.setenv("JOBLOCKS_URL", url)
    model = joblocks.JobLockModel(table_name=table_name)
    try:
        _exercise(model, key)
    finally:
        model.dispose()


async def _aio_run(key: str) -> bool:
    async def work() -> None:
        return None

    try:
        return await joblocks.aio.run_with_lock(key, 60_000, work)
    finally:
        await joblocks.aio.get_model().dispose()


@pytest.mark.server
def test_postgres_spelling_on_the_command_line(
    pg_server: Any, table_name: str, tmp_path: Path
) -> None:
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path))
    env.pop("JOBLOCKS_URL", None)
    url = _spelled(pg_server.url, "postgres")
    for args in (["--url", url], []):
        run_env = env if args else {**env, "JOBLOCKS_URL": url}
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "joblocks",
                *args,
                "--table",
                table_name,
                "run",
                "k",
                "--ttl",
                "1m",
                "--",
                "true",
            ],
            capture_output=True,
            text=True,
            env=run_env,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr


# -- query parameters with their types ---------------------------------------------------

QUERIES = {
    "postgresql": [
        {"prepare_threshold": "0"},
        {"prepare_threshold": "none"},  # never prepare
        {"connect_timeout": "3"},
        {"prepare_threshold": "0", "connect_timeout": "3"},
    ],
    "mariadb": [
        {"connect_timeout": "3"},
        {"read_timeout": "3", "write_timeout": "3"},
        {"connect_timeout": "2.5", "read_timeout": "4"},
    ],
    "sqlite": [{"timeout": "2"}, {"timeout": "0.5"}],
}


def test_query_parameters_reach_the_driver_with_their_types(
    make_model: Callable[..., Any], db_url: str, backend: str, key: str, face: str
) -> None:
    for query in QUERIES[backend]:
        url = make_url(db_url).update_query_dict(query).render_as_string(hide_password=False)
        model = make_model(url=url)
        _exercise(model, key)
        if face == "sync" and "prepare_threshold" in query:
            raw = model.engine.raw_connection()
            try:
                given = query["prepare_threshold"]
                expected = int(given) if given.isdigit() else None
                assert raw.driver_connection.prepare_threshold == expected
            finally:
                raw.close()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://u:secret@h/db?prepare_threshold=abc", "prepare_threshold"),
        ("postgresql://u:secret@h/db?prepare_threshold=-1", "prepare_threshold"),
        ("postgresql://u:secret@h/db?connect_timeout=soon", "connect_timeout"),
        ("mysql://u:secret@h/db?connect_timeout=x", "connect_timeout"),
        ("mysql://u:secret@h/db?read_timeout=-3", "read_timeout"),
        ("sqlite:///x.db?timeout=forever", "timeout"),
    ],
)
@pytest.mark.parametrize("face", ["sync", "aio"])
def test_bad_query_parameters_are_refused_at_construction(url: str, says: str, face: str) -> None:
    cls = joblocks.JobLockModel if face == "sync" else joblocks.aio.JobLockModel
    with pytest.raises(ValueError, match=says) as info:
        cls(url)
    assert isinstance(info.value, joblocks.LockBackendError)
    assert "secret" not in str(info.value)


# -- malformed URLs ----------------------------------------------------------------------


@pytest.mark.parametrize("face", ["sync", "aio"])
@pytest.mark.parametrize(
    ("url", "problem", "shown"),
    [
        ("not a url", "not a database URL", "'not a url'"),
        ("postgresql://u:secret@h:notaport/db", "the port must be a number", "u:***@h:notaport"),
        ("postgres://u:secret@h:notaport/db", "the port must be a number", "u:***@h:notaport"),
        ("oracle://u:secret@h/db", "joblocks supports SQLite, PostgreSQL", "u:***@h/db"),
    ],
)
def test_malformed_urls_name_the_argument_and_the_expected_form(
    face: str, url: str, problem: str, shown: str
) -> None:
    cls = joblocks.JobLockModel if face == "sync" else joblocks.aio.JobLockModel
    with pytest.raises(joblocks.LockBackendError) as info:
        cls(url)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert message.startswith("database: ")
    assert problem in message
    assert shown in message
    assert FORM in message
    assert "sqlite:///" in message
    assert "secret" not in message


@pytest.mark.parametrize("face", ["sync", "aio"])
def test_configure_checks_urls_and_options_at_once(face: str) -> None:
    configure = joblocks.configure if face == "sync" else joblocks.aio.configure
    try:
        with pytest.raises(ValueError, match=r"^default: not a database URL: 'not a url'") as info:
            configure("not a url")
        assert FORM in str(info.value)
        with pytest.raises(ValueError, match=r"^instances\['b'\]: the port must be a number"):
            configure("sqlite:///a.db", instances={"b": "postgresql://u:secret@h:x/db"})
        with pytest.raises(ValueError, match="acquire_path must be one of") as bad_path:
            configure("sqlite:///a.db", acquire_path="fastest")
        assert "'fastest'" in str(bad_path.value)
        with pytest.raises(ValueError, match=r"acquire_path must be one of .* on mysql"):
            configure("mysql://u@h/db", acquire_path="update_insert")
        with pytest.raises(ValueError, match="timeout must be positive"):
            configure("sqlite:///a.db", timeout=0)
        with pytest.raises(TypeError, match="timeout must be milliseconds"):
            configure("sqlite:///a.db", timeout="5s")
        with pytest.raises(TypeError, match="create_table must be a bool"):
            configure("sqlite:///a.db", create_table="yes")
    finally:
        configure()


def test_joblocks_url_errors_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBLOCKS_URL", "postgresql://u:secret@h:port/db")
    with pytest.raises(ValueError, match=r"^JOBLOCKS_URL: the port must be a number") as info:
        joblocks.JobLockModel()
    assert "secret" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://u:s3cret@h:notaport/db", "--url: the port must be a number"),
        ("not a url", "--url: not a database URL: 'not a url'"),
    ],
)
def test_cli_reports_a_malformed_url_on_one_line_with_exit_3(
    tmp_path: Path, url: str, says: str
) -> None:
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path))
    env.pop("JOBLOCKS_URL", None)
    for command in (["list"], ["run", "k", "--ttl", "1m", "--", "true"], ["where"]):
        result = run_cli("--url", url, *command, env=env)
        assert result.returncode == 3, (command, result.stderr)
        line = result.stderr.strip()
        assert len(line.splitlines()) == 1
        assert says in line
        assert FORM in line
        assert "s3cret" not in line
        assert "Traceback" not in line
