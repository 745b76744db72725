"""One DDL for the lock table: what ``ensure_table`` runs, what ``joblocks init --sql``
prints and what the Django migration runs are ``_schema.ddl_statements``, on every
database.

The statements are observed where they are really executed: on a joblocks engine with a
``before_cursor_execute`` event, and in a real ``django migrate`` (its schema logger) in
a subprocess. ``ensure_table`` runs them as ``init --sql`` prints them (it checks what
exists first); the migration, which must be idempotent, adds ``IF NOT EXISTS`` to the
table and the sequence, and only that.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import MetaData, event, make_url

import joblocks
from joblocks._sql.dialects import profile
from joblocks._sql.schema import build_table, ddl_statements
from joblocks.contrib.django._ddl import create_statements

from ...support.cli import run_cli
from ...support.databases import fresh_mariadb_database, fresh_pg_database
from ...support.servers import Server

ROOT = Path(__file__).resolve().parents[3]
TABLE = "job_locks"  # the Django migration's (the test project configures no other)
#: URLs that name each family without reaching any server (``init --sql``).
OFFLINE = {
    "sqlite": "sqlite:///unused.db",
    "postgresql": "postgresql://app@db.invalid/app",
    "mariadb": "mysql://app@db.invalid/app",
}
DDL_START = ("CREATE", "COMMENT", "INSERT")


def _squash(statement: str) -> str:
    return re.sub(r"\s+", "", statement)


def _without_if_not_exists(statement: str) -> str:
    return re.sub(r"^(CREATE (TABLE|SEQUENCE)) IF NOT EXISTS ", r"\1 ", statement)


@contextlib.contextmanager
def _fresh(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a new, empty database on ``backend``."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / f'fresh-{len(list(tmp_path.iterdir()))}.db'}"
        return
    fixture = "pg_server" if backend == "postgresql" else "mariadb_server"
    server: Server = request.getfixturevalue(fixture)
    fresh = fresh_pg_database if backend == "postgresql" else fresh_mariadb_database
    with fresh(server) as url:
        yield url.render_as_string(hide_password=False)


def _ensure_table_ran(url: str) -> list[str]:
    """The DDL statements ``ensure_table`` sends to an empty database."""
    model = joblocks.JobLockModel(url, table_name=TABLE, create_table=False)
    seen: list[str] = []

    def capture(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith(DDL_START):
            seen.append(statement)

    try:
        event.listen(model.engine, "before_cursor_execute", capture)
        model.create_table()
        first, second = model.acquire_token("k", 60_000, "a"), model.acquire_token("j", 60_000, "b")
        assert first is not None
        assert second is not None
        assert second > first
    finally:
        model.dispose()
    return seen


def _init_sql_printed(backend: str, tmp_path: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBLOCKS_")}
    result = run_cli("--url", OFFLINE[backend], "init", "--sql", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    blocks = [block for block in result.stdout.split("\n\n") if not block.startswith("--")]
    assert all(block.rstrip().endswith(";") for block in blocks)
    return [block.rstrip().removesuffix(";") for block in blocks]


_MIGRATE = """
import json, logging, django
from django.core.management import call_command

django.setup()
seen = []


class Capture(logging.Handler):
    def emit(self, record):
        seen.append(getattr(record, "sql", None))


logger = logging.getLogger("django.db.backends.schema")
logger.setLevel(logging.DEBUG)
logger.addHandler(Capture())
call_command("migrate", "joblocks", verbosity=0)
print(json.dumps([s for s in seen if s and "job_locks" in s]))
"""


def _django_ran(url: str) -> list[str]:
    """The statements a real ``migrate joblocks`` runs on an empty database."""
    pytest.importorskip("django")
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        entry: dict[str, Any] = {"ENGINE": "django.db.backends.sqlite3", "NAME": parsed.database}
    else:
        entry = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": parsed.database,
            "USER": parsed.username,
            "HOST": parsed.host,
            "PORT": parsed.port,
        }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBLOCKS_", "JL_"))}
    env["DJANGO_SETTINGS_MODULE"] = "tests.contrib.django.djangoproject.settings"
    env["JL_DJANGO_DATABASE"] = json.dumps(entry)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, "-c", _MIGRATE],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    ran: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return ran


@pytest.mark.parametrize(
    "backend",
    [
        "sqlite",
        pytest.param("postgresql", marks=pytest.mark.server),
        pytest.param("mariadb", marks=pytest.mark.server),
    ],
)
def test_one_ddl_everywhere(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    family = profile(backend)
    source = ddl_statements(backend, build_table(MetaData(), TABLE), if_not_exists=True)
    assert source == create_statements(family.django_vendor, TABLE)

    plain = ddl_statements(backend, build_table(MetaData(), TABLE))
    assert len(plain) == len(source)
    assert all(p in (s, _without_if_not_exists(s)) for p, s in zip(plain, source))

    with _fresh(backend, request, tmp_path) as url:
        ensured = _ensure_table_ran(url)
    assert ensured == plain
    printed = _init_sql_printed(backend, tmp_path)
    # The CLI trims trailing spaces of lines and writes ") COMMENT=" for ")COMMENT=".
    assert [_squash(s) for s in printed] == [_squash(s) for s in plain]

    if backend != "mariadb":  # Django's MySQL backend needs mysqlclient, not installed
        with _fresh(backend, request, tmp_path) as url:
            migrated = _django_ran(url)
        assert migrated == source


def test_many_models_create_one_table_at_once(db_url: str, table_name: str) -> None:
    """``ensure_table`` on an empty database from several connections at the same moment:
    every one succeeds (a duplicate error from a CREATE is retried), one table results."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    n = 6
    barrier = threading.Barrier(n, timeout=30)
    models = [joblocks.JobLockModel(db_url, table_name=table_name) for _ in range(n)]

    def create(model: joblocks.JobLockModel) -> None:
        barrier.wait()
        model.create_table()

    try:
        with ThreadPoolExecutor(n) as executor:
            for future in [executor.submit(create, model) for model in models]:
                future.result(timeout=60)
        tokens = [models[i].acquire_token(f"k{i}", 60_000, f"w{i}") for i in range(n)]
        assert None not in tokens
        assert len(set(tokens)) == n
    finally:
        for model in models:
            model.dispose()
