"""The advice after a database failure follows its SQLSTATE, error number or SQLite
result code: a role or database that does not exist, a SQLite file that is not a
database and a missing MariaDB schema are not "check that the server runs", and a
connection failure is reported as one by every command (not "create table failed").
The command line runs in the test's process (``tests/support/cli.py``) against the test
set-up's throwaway servers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from sqlalchemy import make_url

import joblocks
from joblocks.cli._hints import CONNECT_HINT

from ..support.cli import Result, run_cli
from ..support.servers import Server

SERVER_RUNS = "check that the server runs"
COMMANDS = [["list"], ["peek", "job"], ["run", "job", "--ttl", "10s", "--", "true"]]


def joblocks_cli(tmp_path: Path, url: str, *args: str) -> Result:
    env = dict(os.environ)
    env.pop("JOBLOCKS_URL", None)
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return run_cli("--url", url, *args, env=env)


def doctor_fix(tmp_path: Path, url: str) -> tuple[str, str]:
    """The failed check's text and fix in ``doctor --json``."""
    done = joblocks_cli(tmp_path, url, "doctor", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    failed = [c for c in json.loads(done.stdout)["checks"] if c["status"] == "fail"]
    assert len(failed) == 1, failed
    return failed[0]["detail"], failed[0]["fix"] or ""


def error_line(tmp_path: Path, url: str, command: list[str]) -> str:
    done = joblocks_cli(tmp_path, url, *command)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def pg_url(server: Server, **parts: str) -> str:
    url = make_url(server.url).set(**parts)  # type: ignore[arg-type]
    return url.render_as_string(hide_password=False)


@pytest.mark.server
@pytest.mark.parametrize(
    ("parts", "says"),
    [
        ({"username": "no_such_role"}, "user or password"),
        ({"database": "no_such_database"}, "database does not exist"),
    ],
)
def test_postgresql_role_or_database_missing(
    pg_server: Server, tmp_path: Path, parts: dict[str, str], says: str
) -> None:
    url = pg_url(pg_server, **parts)
    _text, fix = doctor_fix(tmp_path, url)
    assert says in fix
    assert SERVER_RUNS not in fix
    for command in COMMANDS:
        line = error_line(tmp_path, url, command)
        assert SERVER_RUNS not in line
        assert "create table failed" not in line, line
        assert says in line, line


@pytest.mark.parametrize("command", COMMANDS)
def test_a_refused_connection_is_reported_as_one(tmp_path: Path, command: list[str]) -> None:
    line = error_line(tmp_path, "postgresql://u@127.0.0.1:1/db", command)
    assert "create table failed" not in line, line
    assert "open database failed" not in line, line
    assert "connect failed" in line or "connection failed" in line, line
    assert SERVER_RUNS in line, line  # here it is the advice


def test_sqlite_file_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "locks.db"
    path.write_bytes(b"this is not a SQLite database, just text " * 50)
    url = f"sqlite:///{path}"
    _text, fix = doctor_fix(tmp_path, url)
    assert SERVER_RUNS not in fix
    assert "not a SQLite database" in fix
    for command in COMMANDS:
        line = error_line(tmp_path, url, command)
        assert SERVER_RUNS not in line
        assert "not a SQLite database" in line, line


@pytest.mark.server
def test_a_missing_mariadb_schema_is_a_configuration_error(
    mariadb_server: Server, tmp_path: Path
) -> None:
    url = make_url(mariadb_server.url).set(database="no_such_schema")
    model = joblocks.JobLockModel(url)
    try:
        with pytest.raises(joblocks.LockTableMissing) as info:
            model.peek("job")
    finally:
        model.dispose()
    assert not isinstance(info.value, joblocks.LockConnectionError)
    assert info.value.code == 1049
    shown = url.render_as_string(hide_password=False)
    _text, fix = doctor_fix(tmp_path, shown)
    assert "database does not exist" in fix
    assert fix != CONNECT_HINT
    for command in COMMANDS:
        line = error_line(tmp_path, shown, command)
        assert SERVER_RUNS not in line
        assert "database does not exist" in line, line
        assert "joblocks init" not in line, line  # init cannot create a database
