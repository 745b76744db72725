"""The database matrix of the suite: which backends and acquire paths exist, and how a
test reaches a throwaway server (started once per run, see :mod:`tests.support.servers`).

A server that cannot be started makes the tests that need it skip, except in CI
(``CI=true``), where they fail (:func:`unavailable`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import pytest

from .servers import Server, ServerUnavailable

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


def server_or_skip(
    request: pytest.FixtureRequest, name: str, start: Callable[..., Server]
) -> Server:
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
