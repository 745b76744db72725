"""``joblocks doctor`` where PostgreSQL is really deployed (the command line run in the
test's process, ``tests/support/cli.py``).

Through PgBouncer in transaction mode (reported, with what to set on an engine of your
own), in session mode, on a serializable server, on a read-only database (a standby's
hint, not "grant …"), and into a ``statement_timeout`` (a hint about the timeout, not
"check that the server runs"); and into a MariaDB user's ``MAX_STATEMENT_TIME``.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ..support.cli import Result, run_cli
from ..support.servers import Server

pytestmark = pytest.mark.server


def joblocks_cli(tmp_path: Path, url: str, table: str, *args: str) -> Result:
    env = dict(os.environ)
    env.pop("JOBLOCKS_URL", None)
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return run_cli("--url", url, "--table", table, *args, env=env)


def doctor(tmp_path: Path, url: str, table: str) -> tuple[int, dict[str, Any], str]:
    """Exit code, the JSON report, and stderr (one line when a problem was found)."""
    result = joblocks_cli(tmp_path, url, table, "doctor", "--json")
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout), result.stderr


def checks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in report["checks"]}


def _admin(server: Server, dbname: str = "postgres") -> psycopg.Connection[Any]:
    return psycopg.connect(
        host="127.0.0.1", port=server.port, user="postgres", dbname=dbname, autocommit=True
    )


@pytest.fixture
def database(pg_server: Server) -> Iterator[tuple[str, str]]:
    """A database of its own on the throwaway server: (name, URL)."""
    name = f"doc_{uuid.uuid4().hex[:8]}"
    with _admin(pg_server) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield name, pg_server.url.rsplit("/", 1)[0] + f"/{name}"
    with _admin(pg_server) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_doctor_reports_a_transaction_mode_pooler(
    pgbouncer_transaction: Server, tmp_path: Path, table_name: str
) -> None:
    url = pgbouncer_transaction.url
    assert joblocks_cli(tmp_path, url, table_name, "init").returncode == 0
    code, report, _ = doctor(tmp_path, url, table_name)
    found = checks(report)
    assert code == 0, report  # usable: a warning, not a problem
    assert report["pooler"] == "transaction"
    pooler = found["pooler"]
    assert pooler["status"] == "warn"
    assert "transaction" in pooler["detail"]
    assert '"prepare_threshold": None' in pooler["fix"]
    assert "session" in pooler["fix"]
    assert found["probe"]["status"] == "ok"


def test_doctor_through_a_session_mode_pooler(
    pgbouncer_session: Server, tmp_path: Path, table_name: str
) -> None:
    url = pgbouncer_session.url
    assert joblocks_cli(tmp_path, url, table_name, "init").returncode == 0
    code, report, _ = doctor(tmp_path, url, table_name)
    assert code == 0, report
    assert report["pooler"] == "session"
    assert checks(report)["pooler"]["status"] == "ok"


def test_doctor_reports_no_pooler_on_a_direct_connection(
    pg_server: Server, tmp_path: Path, table_name: str
) -> None:
    assert joblocks_cli(tmp_path, pg_server.url, table_name, "init").returncode == 0
    code, report, _ = doctor(tmp_path, pg_server.url, table_name)
    assert code == 0, report
    assert report["pooler"] is None
    assert "pooler" not in checks(report)


def test_doctor_on_a_read_only_database_says_so(
    pg_server: Server, database: tuple[str, str], tmp_path: Path, table_name: str
) -> None:
    name, url = database
    assert joblocks_cli(tmp_path, url, table_name, "init").returncode == 0
    with _admin(pg_server) as conn:  # as on a hot standby: every transaction read-only
        conn.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
    code, report, err = doctor(tmp_path, url, table_name)
    assert code == 1
    probe = checks(report)["probe"]
    assert probe["status"] == "fail"
    assert "read-only" in probe["fix"]
    assert "standby" in probe["fix"]
    assert "grant" not in probe["fix"].lower()
    assert "read-only" in err


def test_doctor_into_a_statement_timeout_names_the_timeout(
    pg_server: Server, database: tuple[str, str], tmp_path: Path, table_name: str
) -> None:
    name, url = database
    assert joblocks_cli(tmp_path, url, table_name, "init").returncode == 0
    with _admin(pg_server) as conn:
        conn.execute(f"ALTER DATABASE {name} SET statement_timeout = '300ms'")
    # Another session holds the table, so the probe's statements wait into the timeout.
    with _admin(pg_server, name) as blocker, blocker.transaction():
        blocker.execute(f'LOCK TABLE "{table_name}" IN ACCESS EXCLUSIVE MODE')
        code, report, err = doctor(tmp_path, url, table_name)
    assert code == 1
    failed = [check for check in report["checks"] if check["status"] == "fail"]
    assert failed, report
    fix = failed[0]["fix"]
    assert "statement_timeout" in fix
    assert "check that the server runs" not in fix
    assert "grant" not in fix.lower()
    assert "statement_timeout" in err


def test_doctor_on_a_serializable_server_says_what_joblocks_does(
    pg_serializable: Server, tmp_path: Path, table_name: str
) -> None:
    url = pg_serializable.url
    assert joblocks_cli(tmp_path, url, table_name, "init").returncode == 0
    code, report, _ = doctor(tmp_path, url, table_name)
    assert code == 0, report
    isolation = checks(report)["isolation"]
    assert isolation["status"] == "ok"
    assert "serializable" in isolation["detail"]
    assert "read committed" in isolation["detail"]
    assert checks(report)["probe"]["status"] == "ok"


def test_doctor_into_a_mariadb_statement_timeout_names_the_timeout(
    mariadb_server: Server, tmp_path: Path, table_name: str
) -> None:
    import pymysql  # type: ignore[import-untyped, unused-ignore]

    user = f"jl_{uuid.uuid4().hex[:8]}"
    root = pymysql.connect(
        host="127.0.0.1", port=mariadb_server.port, user="root", database="joblocks_test"
    )
    try:
        with root.cursor() as cur:
            cur.execute(f"CREATE USER '{user}'@'127.0.0.1' WITH MAX_STATEMENT_TIME 0.3")
            cur.execute(f"GRANT ALL PRIVILEGES ON joblocks_test.* TO '{user}'@'127.0.0.1'")
        url = mariadb_server.url.replace("root@", f"{user}@")
        assert joblocks_cli(tmp_path, url, table_name, "init").returncode == 0
        # Another session holds every row (and the gap after them) of the table, so the
        # probe's insert waits into the user's statement time limit.
        root.begin()
        with root.cursor() as cur:
            cur.execute(f"SELECT * FROM `{table_name}` FOR UPDATE")
        code, report, err = doctor(tmp_path, url, table_name)
        root.rollback()
        assert code == 1
        assert "max_statement_time" in err
        failed = [check for check in report["checks"] if check["status"] == "fail"]
        assert failed, report
        assert "max_statement_time" in failed[0]["fix"], failed[0]
        assert "grant" not in failed[0]["fix"].lower()
    finally:
        with root.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'")
        root.close()


def test_doctor_s_modules_leave_the_cli_s_error_report_alone() -> None:
    """Importing doctor's modules binds no submodule over a name of ``joblocks.cli``
    (a ``cli/_report.py`` would replace ``cli._report``, which reports every error)."""
    import types

    import joblocks.cli
    import joblocks.cli.doctor

    assert not isinstance(joblocks.cli._report, types.ModuleType)
    assert callable(joblocks.cli._report)
