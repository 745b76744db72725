"""Helpers of the integration tests (tests/contrib) and the decorator's (tests/core/leases).

Fixtures are defined in each test module: ``backend`` is parametrized by the suite's
conftest over every database, ``lock_db`` over :data:`LOCK_DBS` (SQLite and
PostgreSQL only, for the slower multi-process scenarios).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import joblocks
import joblocks.aio
from joblocks._sync import run as _run

#: The repository root: child processes import ``tests.*`` from here.
ROOT = Path(__file__).resolve().parents[2]

#: The databases of the multi-process scenarios (MariaDB adds minutes, not coverage:
#: the integrations only use the lease API, tested on every database elsewhere).
LOCK_DBS = ("sqlite", "postgresql")


def lock_db_url(request: pytest.FixtureRequest, name: str, tmp_path: Path) -> str:
    """A URL for ``name``: a fresh SQLite file, or the suite's throwaway PostgreSQL."""
    if name == "sqlite":
        return f"sqlite:///{tmp_path / 'locks.db'}"
    server = request.getfixturevalue("pg_server")
    return str(server.url)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child process: this one, with the repository importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])]
    )
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


PYTHON = sys.executable


@contextmanager
def configured(url: str, **options: str) -> Iterator[None]:
    """``joblocks.configure(url)`` for the block; afterwards, as if never configured."""
    joblocks.configure(url, **options)
    try:
        yield
    finally:
        joblocks.configure()  # disposes the engines made meanwhile
        joblocks.aio.configure()
        _run.sync_registry._specs = None
        joblocks.aio._registry._specs = None
