"""Test matrix: database (SQLite, PostgreSQL, MariaDB) × face (sync, asyncio) × acquire path.

PostgreSQL and MariaDB run as throwaway servers started here (``tests/support/servers.py``).
When one cannot be started the tests that need it skip, except in CI (``CI=true``),
where they fail.
"""

from __future__ import annotations

import inspect
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from .support.faces import models
from .support.matrix import (
    BACKENDS,
    DEPLOYMENT_BACKENDS,
    PATHS,
    SHARED_SERVERS,
    server_or_skip,  # noqa: F401 (for fixtures of servers of their own)
    shared_server,
    url_for,
)
from .support.servers import Server

#: Groups left out of a plain ``pytest`` (their own steps in ``scripts/test``), unless
#: ``-m`` is given or the test's file (or a directory below tests/) is named.
SEPARATE_GROUPS = ("races", "reliability", "bench", "slow")
#: Modules of the ``bench`` group: the benchmark scripts' smoke runs.
BENCH_MODULES = ("test_benchmark_suite.py",)

#: Of these, the groups that run in one process (``-n 0``): they restart and cut off
#: the servers, and time their own worker processes.
SERIAL_GROUPS = ("races", "reliability", "bench")
#: Their tests' places (tests/reliability, tests/core/races, tests/core/bench): a path
#: naming one of them on the command line runs in one process too.
SERIAL_PATHS = ("reliability", "races", "bench")


def pytest_configure(config: pytest.Config) -> None:
    config._joblocks_servers = {}  # type: ignore[attr-defined]
    if getattr(config.option, "joblocks_own_servers", False):
        return  # each worker starts servers of its own (pytest_cmdline_main)
    if config.getoption("dist", "no") != "no" and not hasattr(config, "workerinput"):
        # The controller of a parallel run: one set of servers for every worker.
        from .support.shared import start_keeper

        keeper = start_keeper(SHARED_SERVERS)
        config._joblocks_keeper = keeper  # type: ignore[attr-defined]
        config.add_cleanup(keeper.close)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: tell each worker where the controller's server keeper listens."""
    from .support.shared import WORKERINPUT_KEY

    keeper = getattr(node.config, "_joblocks_keeper", None)
    if keeper is not None:
        node.workerinput[WORKERINPUT_KEY] = keeper.address


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: a worker per core, at least 2 (most of a test is waiting on a
    database, a process or a clock; on a machine of its own, ``-n 4`` on 2 cores is
    faster, but on a shared one the keep-alive tests' renewals then starve)."""
    return max(2, os.cpu_count() or 1)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Run the races, the reliability scenarios and the benchmark smokes in one process
    (``-n 0``) when they are asked for (``-m reliability``, a path under
    ``tests/reliability``, ``tests/core/races`` or ``tests/core/bench``), unless ``-n``
    is given on the command line: then each worker starts servers of its own (a
    scenario kills, restarts and cuts off its servers) and tests are sent one by one
    (``--dist loadgroup``: the tests of one Galera cluster go to one worker)."""
    if not config.getoption("numprocesses", None):
        return
    expression = config.getoption("markexpr", "") or ""
    named = [a for a in config.args if any(part in a for part in SERIAL_PATHS)]
    wanted = any(
        group in expression and f"not {group}" not in expression for group in SERIAL_GROUPS
    )
    if not (wanted or named):
        return
    if _numprocesses_given(config.invocation_params.args):
        config.option.joblocks_own_servers = True
        if config.getoption("dist", "no") in ("no", "load"):
            config.option.dist = "loadgroup"
    else:
        config.option.numprocesses = 0


def _numprocesses_given(args: Sequence[str]) -> bool:
    """Whether ``-n``/``--numprocesses`` is among the command line's own arguments
    (``addopts`` gives ``-n auto`` to every run)."""
    return any(
        a in ("-n", "--numprocesses")
        or a.startswith("--numprocesses=")
        or (a.startswith("-n") and not a.startswith("--"))
        for a in args
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in BENCH_MODULES:
            item.add_marker(pytest.mark.bench)
    if config.getoption("markexpr", ""):
        return
    # Named on the command line: a file, or a directory other than the testpaths.
    here = config.invocation_params.dir
    roots = {(config.rootpath / p).resolve() for p in config.getini("testpaths")}
    named = {(here / a.split("::")[0]).resolve() for a in config.args} - roots
    kept, left = [], []
    for item in items:
        separate = any(item.get_closest_marker(g) for g in SEPARATE_GROUPS)
        asked = any(item.path == p or p in item.path.parents for p in named)
        (left if separate and not asked else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


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
    return shared_server(request, "postgresql")


@pytest.fixture(scope="session")
def mariadb_server(request: pytest.FixtureRequest) -> Server:
    return shared_server(request, "mariadb")


@pytest.fixture(scope="session")
def pgbouncer_transaction(request: pytest.FixtureRequest) -> Server:
    """PgBouncer in ``pool_mode = transaction`` in front of ``pg_server`` (2 server
    connections shared by all clients)."""
    return shared_server(request, "pgbouncer-transaction")


@pytest.fixture(scope="session")
def pgbouncer_session(request: pytest.FixtureRequest) -> Server:
    """PgBouncer in ``pool_mode = session`` in front of ``pg_server``: a client keeps its
    server connection until it disconnects (then the next client gets it, reset), so
    the pool has room for every client of a test at once (30)."""
    return shared_server(request, "pgbouncer-session")


@pytest.fixture(scope="session")
def pg_serializable(request: pytest.FixtureRequest) -> Server:
    """A second throwaway PostgreSQL whose default isolation is serializable
    (``default_transaction_isolation`` set on the server)."""
    return shared_server(request, "postgresql-serializable")


@pytest.fixture(scope="session")
def mariadb_serializable(request: pytest.FixtureRequest) -> Server:
    """A second throwaway MariaDB whose default isolation is serializable
    (``--transaction-isolation=SERIALIZABLE``)."""
    return shared_server(request, "mariadb-serializable")


@pytest.fixture(scope="session")
def pgbouncer_serializable(request: pytest.FixtureRequest) -> Server:
    """PgBouncer in transaction mode in front of ``pg_serializable``."""
    return shared_server(request, "pgbouncer-serializable")


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
    # Tests that take ``model`` run once per database on its default path (the first of
    # PATHS): the paths differ only in the grant statement. Tests of grants
    # (``@pytest.mark.acquire_paths``, a module's ``ACQUIRE_PATHS = True``, or a test
    # taking ``acquire_path`` itself) run every (database, path) pair that exists.
    # Deployment shapes (PgBouncer, a serializable server) are added by
    # ``@pytest.mark.deployments`` or a module's ``DEPLOYMENTS = True``; checks of
    # arguments made before any database call (``@pytest.mark.argument_checks``) run on
    # SQLite alone, on both faces.
    marked = metafunc.definition.get_closest_marker
    backends = BACKENDS
    if getattr(metafunc.module, "DEPLOYMENTS", False) or marked("deployments"):
        backends += tuple(DEPLOYMENT_BACKENDS)
    if marked("argument_checks"):
        backends = ("sqlite",)
    every_path = (
        getattr(metafunc.module, "ACQUIRE_PATHS", False)
        or marked("acquire_paths")
        # a test that names the path itself (races of the grant statement) needs each
        or "acquire_path" in inspect.signature(metafunc.function).parameters
    )
    if "acquire_path" in metafunc.fixturenames:
        pairs = [(b, p) for b in backends for p in (PATHS[b] if every_path else PATHS[b][:1])]
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
    """The model under test: every database × face (× acquire path, for tests of grants)."""
    return make_model(acquire_path=acquire_path)


@pytest.fixture
def key() -> str:
    return f"job-{uuid.uuid4().hex[:8]}"
