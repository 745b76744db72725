"""Test matrix: database (SQLite, PostgreSQL, MariaDB) × face (sync, asyncio) × acquire path.

PostgreSQL and MariaDB run as throwaway servers started here (``tests/_servers.py``).
When one cannot be started the tests that need it skip, except in CI (``CI=true``),
where they fail.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import joblocks
import joblocks.aio

from ._servers import (
    Server,
    ServerUnavailable,
    start_mariadb,
    start_pgbouncer,
    start_postgres,
)

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
BACKENDS = ("sqlite", "postgresql", "mariadb")
PATHS = {
    "sqlite": ("upsert", "update_insert", "portable"),
    "postgresql": ("upsert", "update_insert", "portable"),
    "mariadb": ("upsert", "portable"),
}
#: PostgreSQL as it is deployed, besides plain: through Debian's PgBouncer (in
#: transaction and in session mode) in front of ``pg_server``, and a server whose
#: default isolation is serializable. A test module that sets ``DEPLOYMENTS = True``
#: runs for these backends too. Their server fixtures:
DEPLOYMENT_BACKENDS = {
    "pgbouncer-transaction": "pgbouncer_transaction",
    "pgbouncer-session": "pgbouncer_session",
    "postgresql-serializable": "pg_serializable",
}
for _deployed in DEPLOYMENT_BACKENDS:
    PATHS[_deployed] = PATHS["postgresql"]


def _server_or_skip(
    request: pytest.FixtureRequest, name: str, start: Callable[..., Server]
) -> Server:
    base = request.config._joblocks_servers  # type: ignore[attr-defined]
    if name in base:
        server = base[name]
        if isinstance(server, str):
            _unavailable(server)
        return server
    # Not under pytest's temporary root: another pytest of the same user resets that
    # root's permissions when it starts, and the server users could then no longer
    # reach their data directories. This directory is this run's alone.
    tmp = Path(tempfile.mkdtemp(prefix=f"joblocks-{name}-"))
    request.config.add_cleanup(lambda: shutil.rmtree(tmp, ignore_errors=True))
    try:
        server = start(tmp)
    except ServerUnavailable as exc:
        base[name] = f"{name} unavailable: {exc}"
        _unavailable(base[name])
    base[name] = server
    request.config.add_cleanup(server.stop)
    return server


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: server tests must run)")
    pytest.skip(reason)


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
    return _server_or_skip(request, "postgresql", start_postgres)


@pytest.fixture(scope="session")
def mariadb_server(request: pytest.FixtureRequest) -> Server:
    return _server_or_skip(request, "mariadb", start_mariadb)


@pytest.fixture(scope="session")
def pgbouncer_transaction(request: pytest.FixtureRequest, pg_server: Server) -> Server:
    """PgBouncer in ``pool_mode = transaction`` in front of ``pg_server`` (2 server
    connections shared by all clients)."""
    return _server_or_skip(
        request,
        "pgbouncer-transaction",
        lambda tmp: start_pgbouncer(tmp, pg_server, "transaction", pool_size=2),
    )


@pytest.fixture(scope="session")
def pgbouncer_session(request: pytest.FixtureRequest, pg_server: Server) -> Server:
    """PgBouncer in ``pool_mode = session`` in front of ``pg_server``: a client keeps its
    server connection until it disconnects (then the next client gets it, reset), so
    the pool has room for every client of a test at once (30)."""
    return _server_or_skip(
        request,
        "pgbouncer-session",
        lambda tmp: start_pgbouncer(tmp, pg_server, "session", pool_size=30),
    )


@pytest.fixture(scope="session")
def pg_serializable(request: pytest.FixtureRequest) -> Server:
    """A second throwaway PostgreSQL whose default isolation is serializable
    (``default_transaction_isolation`` set on the server)."""
    return _server_or_skip(
        request,
        "postgresql-serializable",
        lambda tmp: start_postgres(tmp, {"default_transaction_isolation": "serializable"}),
    )


@pytest.fixture(scope="session")
def mariadb_serializable(request: pytest.FixtureRequest) -> Server:
    """A second throwaway MariaDB whose default isolation is serializable
    (``--transaction-isolation=SERIALIZABLE``)."""
    return _server_or_skip(
        request,
        "mariadb-serializable",
        lambda tmp: start_mariadb(tmp, ["--transaction-isolation=SERIALIZABLE"]),
    )


@pytest.fixture(scope="session")
def pgbouncer_serializable(request: pytest.FixtureRequest, pg_serializable: Server) -> Server:
    """PgBouncer in transaction mode in front of ``pg_serializable``."""
    return _server_or_skip(
        request,
        "pgbouncer-serializable",
        lambda tmp: start_pgbouncer(tmp, pg_serializable, "transaction", pool_size=2),
    )


def url_for(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'locks.db'}"
    if backend in DEPLOYMENT_BACKENDS:
        deployed: Server = request.getfixturevalue(DEPLOYMENT_BACKENDS[backend])
        return deployed.url
    fixture = "pg_server" if backend == "postgresql" else "mariadb_server"
    server: Server = request.getfixturevalue(fixture)
    return server.url


@pytest.fixture
def db_url(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    """A database URL for ``backend`` (a fresh SQLite file, or the shared server)."""
    return url_for(request, backend, tmp_path)


@pytest.fixture
def table_name() -> str:
    """A table of its own for every test, so tests never see each other's rows."""
    return f"t_{uuid.uuid4().hex[:12]}"


def _eventually(check: Callable[[], bool], timeout: float = 3.0) -> bool:
    """True once ``check()`` is; a keep-alive renewal may still be finishing its call."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class SyncFace:
    """The sync model as the tests drive it."""

    face = "sync"

    def __init__(self, model: joblocks.JobLockModel) -> None:
        self.model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def run_with_lock(self, key: str, ttl: Any, work: Callable[[], Any], **options: Any) -> bool:
        return joblocks.run_with_lock(key, ttl, work, model=self.model, **options)

    def lease(self, key: str, ttl: Any, **options: Any) -> Any:
        return joblocks.lease(key, ttl, model=self.model, **options)

    def close(self) -> None:
        pool = self.model.engine.pool

        def settled() -> bool:
            cached = len(self.model._cache) if self.model._cache is not None else 0
            return bool(pool.checkedout() == cached)

        assert _eventually(settled), "a pooled connection leaked"
        self.model.dispose()


class AioFace:
    """The asyncio model, driven from the test's thread.

    The event loop runs in a thread of its own for the whole test, as in an application,
    so keep-alive tasks run while the test sleeps; each coroutine is submitted to it.
    """

    face = "aio"

    def __init__(self, model: joblocks.aio.JobLockModel, loop: asyncio.AbstractEventLoop):
        self.model = model
        self.loop = loop

    def __getattr__(self, name: str) -> Any:
        return _sync_view(getattr(self.model, name), self.loop)

    def run_with_lock(self, key: str, ttl: Any, work: Callable[[], Any], **options: Any) -> bool:
        async def awork() -> None:
            # In a worker thread, so that work() may drive this face again (peek, nesting).
            await asyncio.get_running_loop().run_in_executor(None, work)

        coro = joblocks.aio.run_with_lock(key, ttl, awork, model=self.model, **options)
        return bool(run_on(self.loop, coro))

    def lease(self, key: str, ttl: Any, **options: Any) -> Any:
        held = run_on(self.loop, self.model.try_lease(key, ttl, **options))
        if held is None:
            raise joblocks.LockNotAcquired(key)
        return _sync_view(held, self.loop)

    def close(self) -> None:
        pool = self.model.engine.sync_engine.pool
        assert _eventually(lambda: pool.checkedout() == 0), "a pooled connection leaked"
        run_on(self.loop, self.model.dispose())


def run_on(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=60)


class _SyncView:
    """An asyncio object whose coroutine methods are called synchronously."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        return _sync_view(getattr(self._target, name), self._loop)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        run_on(self._loop, self._target.__aexit__(*exc))


def _sync_view(attr: Any, loop: asyncio.AbstractEventLoop) -> Any:
    if isinstance(attr, joblocks.aio.Lease):
        return _SyncView(attr, loop)
    if not inspect.iscoroutinefunction(attr):
        return attr

    def call(*args: Any, **kwargs: Any) -> Any:
        result = run_on(loop, attr(*args, **kwargs))
        return _SyncView(result, loop) if isinstance(result, joblocks.aio.Lease) else result

    return call


@pytest.fixture(params=("sync", "aio"))
def face(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_model(face: str, db_url: str, table_name: str) -> Iterator[Callable[..., Any]]:
    """Build models of the test's face on the test's database and table; closed after."""
    yield from _models(face, db_url, table_name)


@pytest.fixture
def make_face_model(face: str, table_name: str) -> Iterator[Callable[..., Any]]:
    """Like ``make_model``, for a database the test names: ``make(url, **options)``."""
    models = _models(face, "", table_name)
    make = next(models)
    yield lambda url, **options: make(url=url, **options)
    next(models, None)


def _models(face: str, db_url: str, table_name: str) -> Iterator[Callable[..., Any]]:
    made: list[Any] = []
    loop = asyncio.new_event_loop() if face == "aio" else None
    thread = None
    if loop is not None:
        thread = threading.Thread(target=loop.run_forever, name="test-loop", daemon=True)
        thread.start()

    def make(**options: Any) -> Any:
        options.setdefault("table_name", table_name)
        url = options.pop("url", db_url)
        if loop is None:
            wrapped: Any = SyncFace(joblocks.JobLockModel(url, **options))
        else:
            wrapped = AioFace(joblocks.aio.JobLockModel(url, **options), loop)
        made.append(wrapped)
        return wrapped

    yield make
    try:
        for wrapped in made:
            wrapped.close()
    finally:
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            loop.close()


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
