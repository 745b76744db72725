"""The database matrix of the suite: which backends and acquire paths exist, and how a
test reaches a throwaway server (started once per run, see :mod:`tests.support.servers`).

A server that cannot be started makes the tests that need it skip, except in CI
(``CI=true``), where they fail (:func:`unavailable`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest

from .servers import Server, ServerUnavailable, start_mariadb, start_pgbouncer, start_postgres

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


#: The servers of the suite's session fixtures by name: ``start(tmp, need)``, where
#: ``need(name)`` is another of them. A parallel run (xdist) starts each once, in the
#: controlling process, for every worker (:mod:`tests.support.shared`).
SHARED_SERVERS: dict[str, Callable[[Path, Callable[[str], Server]], Server]] = {
    "postgresql": lambda tmp, need: start_postgres(tmp),
    "mariadb": lambda tmp, need: start_mariadb(tmp),
    # 2 server connections shared by all clients.
    "pgbouncer-transaction": lambda tmp, need: start_pgbouncer(
        tmp, need("postgresql"), "transaction", pool_size=2
    ),
    # A client keeps its server connection until it disconnects: room for every client
    # of a test at once (30).
    "pgbouncer-session": lambda tmp, need: start_pgbouncer(
        tmp, need("postgresql"), "session", pool_size=30
    ),
    "postgresql-serializable": lambda tmp, need: start_postgres(
        tmp, {"default_transaction_isolation": "serializable"}
    ),
    "mariadb-serializable": lambda tmp, need: start_mariadb(
        tmp, ["--transaction-isolation=SERIALIZABLE"]
    ),
    "pgbouncer-serializable": lambda tmp, need: start_pgbouncer(
        tmp, need("postgresql-serializable"), "transaction", pool_size=2
    ),
}


def shared_server(request: pytest.FixtureRequest, name: str) -> Server:
    """The server ``name`` of :data:`SHARED_SERVERS`, started once for the run: by this
    process, or in a parallel run by the controlling process for all its workers."""
    from . import shared

    base = request.config._joblocks_servers  # type: ignore[attr-defined]
    address = getattr(request.config, "workerinput", {}).get(shared.WORKERINPUT_KEY)
    if address is None:
        return server_or_skip(
            request,
            name,
            lambda tmp: SHARED_SERVERS[name](tmp, lambda other: shared_server(request, other)),
        )
    if name not in base:
        base[name] = shared.ask(address, name)
    server = base[name]
    if isinstance(server, str):
        unavailable(server)
    return server


@contextlib.contextmanager
def own_server(name: str) -> Iterator[Server]:
    """A server of :data:`SHARED_SERVERS` of the test's own, for a test that kills or
    restarts it (the shared ones serve other tests at the same time); stopped after."""
    tmp = Path(tempfile.mkdtemp(prefix=f"joblocks-own-{name}-"))
    started: list[Server] = []

    def need(other: str) -> Server:
        started.append(SHARED_SERVERS[other](tmp, need))
        return started[-1]

    try:
        try:
            need(name)
        except ServerUnavailable as exc:
            unavailable(f"{name} unavailable: {exc}")
        yield started[-1]
    finally:
        for server in reversed(started):
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def server_or_skip(
    request: pytest.FixtureRequest, name: str, start: Callable[..., Server]
) -> Server:
    """The server ``name``, started by ``start(tmp)`` in this process once a run (in each
    worker of a parallel run: see :func:`shared_server` for one for all workers)."""
    base = request.config._joblocks_servers  # type: ignore[attr-defined]
    if name in base:
        server = base[name]
        if isinstance(server, str):
            unavailable(server)
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
        unavailable(base[name])
    base[name] = server
    request.config.add_cleanup(server.stop)
    return server


def unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: server tests must run)")
    pytest.skip(reason)


def url_for(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'locks.db'}"
    if backend in DEPLOYMENT_BACKENDS:
        deployed: Server = request.getfixturevalue(DEPLOYMENT_BACKENDS[backend])
        return deployed.url
    fixture = "pg_server" if backend == "postgresql" else "mariadb_server"
    server: Server = request.getfixturevalue(fixture)
    return server.url
