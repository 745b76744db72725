"""Test matrix: database (SQLite, PostgreSQL, MariaDB) × face (sync, asyncio) × acquire path.

PostgreSQL and MariaDB run as throwaway servers started here (``tests/support/servers.py``).
When one cannot be started the tests that need it skip, except in CI (``CI=true``),
where they fail.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .support.faces import models
from .support.matrix import BACKENDS, DEPLOYMENT_BACKENDS, PATHS, server_or_skip, url_for
from .support.servers import (
    Server,
    start_mariadb,
    start_pgbouncer,
    start_postgres,
)


def pytest_configure(config: pytest.Config) -> None:
    config._joblocks_servers = {}  # type: ignore[attr-defined]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="run the reliability and race scenarios at their full sizes (minutes)",
    )


@pytest.fixture(scope="session")
def long_run(request: pytest.FixtureRequest) -> bool:
    """True with ``--long``: scenarios use their full sizes instead of the CI sizes."""
    return bool(request.config.getoption("--long"))


@pytest.fixture(scope="session")
def pg_server(request: pytest.FixtureRequest) -> Server:
    return server_or_skip(request, "postgresql", start_postgres)


@pytest.fixture(scope="session")
def mariadb_server(request: pytest.FixtureRequest) -> Server:
    return server_or_skip(request, "mariadb", start_mariadb)


@pytest.fixture(scope="session")
def pgbouncer_transaction(request: pytest.FixtureRequest, pg_server: Server) -> Server:
    """PgBouncer in ``pool_mode = transaction`` in front of ``pg_server`` (2 server
    connections shared by all clients)."""
    return server_or_skip(
        request,
        "pgbouncer-transaction",
        lambda tmp: start_pgbouncer(tmp, pg_server, "transaction", pool_size=2),
    )


@pytest.fixture(scope="session")
def pgbouncer_session(request: pytest.FixtureRequest, pg_server: Server) -> Server:
    """PgBouncer in ``pool_mode = session`` in front of ``pg_server``: a client keeps its
    server connection until it disconnects (then the next client gets it, reset), so
    the pool has room for every client of a test at once (30)."""
    return server_or_skip(
        request,
        "pgbouncer-session",
        lambda tmp: start_pgbouncer(tmp, pg_server, "session", pool_size=30),
    )


@pytest.fixture(scope="session")
def pg_serializable(request: pytest.FixtureRequest) -> Server:
    """A second throwaway PostgreSQL whose default isolation is serializable
    (``default_transaction_isolation`` set on the server)."""
    return server_or_skip(
        request,
        "postgresql-serializable",
        lambda tmp: start_postgres(tmp, {"default_transaction_isolation": "serializable"}),
    )


@pytest.fixture(scope="session")
def mariadb_serializable(request: pytest.FixtureRequest) -> Server:
    """A second throwaway MariaDB whose default isolation is serializable
    (``--transaction-isolation=SERIALIZABLE``)."""
    return server_or_skip(
        request,
        "mariadb-serializable",
        lambda tmp: start_mariadb(tmp, ["--transaction-isolation=SERIALIZABLE"]),
    )


@pytest.fixture(scope="session")
def pgbouncer_serializable(request: pytest.FixtureRequest, pg_serializable: Server) -> Server:
    """PgBouncer in transaction mode in front of ``pg_serializable``."""
    return server_or_skip(
        request,
        "pgbouncer-serializable",
        lambda tmp: start_pgbouncer(tmp, pg_serializable, "transaction", pool_size=2),
    )


@pytest.fixture
def db_url(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    """A database URL for ``backend`` (a fresh SQLite file, or the shared server)."""
    return url_for(request, backend, tmp_path)


@pytest.fixture
def table_name() -> str:
    """A table of its own for every test, so tests never see each other's rows."""
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=("sync", "aio"))
def face(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_model(face: str, db_url: str, table_name: str) -> Iterator[Callable[..., Any]]:
    """Build models of the test's face on the test's database and table; closed after."""
    yield from models(face, db_url, table_name)


@pytest.fixture
def make_face_model(face: str, table_name: str) -> Iterator[Callable[..., Any]]:
    """Like ``make_model``, for a database the test names: ``make(url, **options)``."""
    made = models(face, "", table_name)
    make = next(made)
    yield lambda url, **options: make(url=url, **options)
    next(made, None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Tests that take ``acquire_path`` run for every (database, path) pair that exists.
    backends = BACKENDS
    if getattr(metafunc.module, "DEPLOYMENTS", False):
        backends += tuple(DEPLOYMENT_BACKENDS)
    if "acquire_path" in metafunc.fixturenames:
        pairs = [(b, p) for b in backends for p in PATHS[b]]
        metafunc.parametrize(("backend", "acquire_path"), pairs, ids=[f"{b}-{p}" for b, p in pairs])
    elif "backend" in metafunc.fixturenames and not _parametrizes(metafunc, "backend"):
        metafunc.parametrize("backend", backends)


def _parametrizes(metafunc: pytest.Metafunc, name: str) -> bool:
    """Whether the test chose its own values of ``name`` (``@pytest.mark.parametrize``)."""
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0]
        if name in ([n.strip() for n in names.split(",")] if isinstance(names, str) else names):
            return True
    return False


@pytest.fixture
def model(make_model: Callable[..., Any], acquire_path: str) -> Any:
    """The model under test: every database × face × acquire path."""
    return make_model(acquire_path=acquire_path)


@pytest.fixture
def key() -> str:
    return f"job-{uuid.uuid4().hex[:8]}"
