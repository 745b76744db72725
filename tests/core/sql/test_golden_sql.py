"""The SQL joblocks sends, pinned per database by golden files (``golden/<db>.sql``).

Each operation runs on the real database (SQLite; PostgreSQL and MariaDB from the
shared servers), on each face, while the driver's own cursor records every statement
handed to it: a subclass of the driver's cursor class, given to the driver through its
own option in SQLAlchemy's ``do_connect`` event (sqlite3's and aiosqlite's connection
``factory``, psycopg's ``cursor_factory``, PyMySQL's ``cursorclass``; aiomysql, whose
cursor class SQLAlchemy names at each ``cursor()``, through its connection's
``cursor``). Nothing is faked: the statements run and their outcomes are asserted. The
text is compared with the golden file, table names normalised (``job_locks``,
``job_runs``, ...), and a difference fails with a diff. The asyncio face has files of
its own (``<db>-asyncio.sql``) where its drivers are sent something else: aiomysql's
``%s`` parameters, the set-up of a new connection at another moment.

``pytest tests/core/sql --update-golden -n 0`` rewrites the files from what was sent.
"""

from __future__ import annotations

import contextlib
import difflib
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import MetaData, event

from joblocks._sql.schema import build_runs_table, build_table, ddl_statements

from ...support.faces import models, run_on
from ...support.matrix import PATHS

GOLDEN = Path(__file__).parent / "golden"
TTL = 60_000
#: A schedule whose latest slot (the last 1 January, 00:00 UTC) stays the same for the
#: whole test, so a second start in it is refused.
YEARLY = "0 0 1 1 *"
#: Statements of a set-up step kept in the golden file (SQLAlchemy's own reflection
#: queries, which depend on its version, are left out).
DDL_WORDS = ("CREATE", "ALTER", "COMMENT", "INSERT", "DROP")


class Recorder:
    """The statements handed to the driver's cursors while a block is open."""

    def __init__(self) -> None:
        self.sections: list[tuple[str, list[str]]] = []
        self.current: list[str] | None = None

    def sent(self, sql: Any) -> None:
        # "SELECT 1": the pool's ping of a connection idle for a while (not joblocks's).
        if self.current is not None and isinstance(sql, str) and sql.strip() != "SELECT 1":
            self.current.append(sql)

    @contextlib.contextmanager
    def block(self, name: str, ddl_only: bool = False) -> Iterator[None]:
        self.current = []
        try:
            yield
        finally:
            found, self.current = self.current, None
        if ddl_only:
            found = [s for s in found if s.lstrip().split(None, 1)[0].upper() in DDL_WORDS]
        self.sections.append((name, found))


RECORDER = Recorder()


class _SqliteCursor(sqlite3.Cursor):
    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        RECORDER.sent(sql)
        return super().execute(sql, parameters)


class _SqliteConnection(sqlite3.Connection):
    def cursor(self, factory: Any = _SqliteCursor) -> Any:  # type: ignore[override]
        return super().cursor(factory)


def _recording(face: Any, family: str) -> None:
    """Make every new driver connection of ``face``'s model record what it is sent."""
    model = face.model
    engine = model.engine
    engines = [getattr(engine, "sync_engine", engine)]
    loop_sqlite = getattr(model, "_loop_sqlite", None)
    if loop_sqlite is not None:  # the asyncio face's sqlite3 connections on the loop
        engines.append(loop_sqlite.engine)
    asynchronous = face.face == "aio"
    if family == "sqlite":
        option, value = "factory", _SqliteConnection
    elif family == "postgresql":
        import psycopg

        class _PgCursor(psycopg.Cursor):  # type: ignore[type-arg]
            def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
                RECORDER.sent(query)
                return super().execute(query, *args, **kwargs)

        class _PgAsyncCursor(psycopg.AsyncCursor):  # type: ignore[type-arg]
            async def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
                RECORDER.sent(query)
                return await super().execute(query, *args, **kwargs)

        option, value = "cursor_factory", _PgAsyncCursor if asynchronous else _PgCursor
    elif not asynchronous:
        import pymysql.cursors

        class _MyCursor(pymysql.cursors.Cursor):
            def execute(self, query: Any, args: Any = None) -> Any:
                RECORDER.sent(query)
                return super().execute(query, args)

        option, value = "cursorclass", _MyCursor
    else:
        import aiomysql

        class _AioMyCursor(aiomysql.Cursor):  # type: ignore[misc]
            async def execute(self, query: Any, args: Any = None) -> Any:
                RECORDER.sent(query)
                return await super().execute(query, args)

        def cursors(dbapi_connection: Any, record: Any) -> None:
            # SQLAlchemy's adapter names aiomysql's cursor class at each cursor(): the
            # driver connection gives the recording subclass instead.
            raw = dbapi_connection.driver_connection
            cursor = raw.cursor
            raw.cursor = lambda *classes: cursor(_AioMyCursor)

        event.listen(engines[0], "connect", cursors)
        link = getattr(model, "_link", None)
        if link is not None:  # the asyncio face's own connections (``_async.raw``)
            link.cursor_class = type("_AioMyQuietCursor", (_AioMyCursor, link.cursor_class), {})
        return

    def connect(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        cparams[option] = value

    for each in engines:
        event.listen(each, "do_connect", connect)
    link = getattr(model, "_link", None)
    if link is not None:  # the asyncio face's own connections (``_async.raw``)
        link._cparams[option] = value


def _normalised(text: str, stem: str) -> str:
    return text.replace(stem, "job")


def _render(sections: list[tuple[str, list[str]]]) -> str:
    out: list[str] = []
    for name, statements in sections:
        if not statements:
            out.append(f"-- {name}\n-- (nothing sent)\n")
        for i, sql in enumerate(statements, 1):
            label = name if len(statements) == 1 else f"{name} [{i}/{len(statements)}]"
            out.append(f"-- {label}\n{sql.strip()};\n")
    return "\n".join(out)


def _scenario(
    make: Callable[..., Any], family: str, backend: str, stem: str
) -> list[tuple[str, list[str]]]:
    """Run every operation, one model per acquire path; the sections sent."""
    rec = RECORDER
    rec.sections = []
    table = f"{stem}_locks"
    for n, path in enumerate(PATHS[backend]):
        model = make(table_name=table, acquire_path=path)
        _recording(model, family)
        with rec.block(f"create the table ({path})", ddl_only=True):
            model.create_table()
        _acquire_paths(model, path, n)
        if n == 0:
            _operations(model)
            _features(model)
    return rec.sections


def _pages(model: Any, state: str) -> list[Any]:
    """``iter_locks(state, batch_size=1)`` read to the end, on either face."""
    if model.face == "sync":
        return list(model.iter_locks(state, batch_size=1))

    async def read() -> list[Any]:
        return [row async for row in model.model.iter_locks(state, batch_size=1)]

    return list(run_on(model.loop, read()))


def _acquire_paths(model: Any, path: str, n: int) -> None:
    rec, key = RECORDER, f"k{n}"
    with rec.block(f"acquire ({path}): a free key"):
        assert model.acquire(key, TTL, "a")
    with rec.block(f"acquire ({path}): re-entrant"):
        assert model.acquire(key, TTL, "a")
    with rec.block(f"acquire ({path}): taken"):
        assert not model.acquire(key, TTL, "b")
    assert model.update(key, ttl=1)
    _wait_expired(model, key)
    with rec.block(f"acquire ({path}): an expired row"):
        assert model.acquire(key, TTL, "b")
    assert model.release(key, "b")
    slot_key = f"slot{n}"
    with rec.block(f"try_lease schedule= ({path}): a new slot"):
        lease = model.try_lease(slot_key, TTL, holder="a", schedule=YEARLY)
        assert lease is not None
    with rec.block(f"lease release schedule= ({path})"):
        assert lease.release()
    with rec.block(f"try_lease schedule= ({path}): the slot ran already"):
        assert model.try_lease(slot_key, TTL, holder="b", schedule=YEARLY) is None
    places_key = f"places{n}"
    with rec.block(f"try_lease max_holders=2 ({path}): the first place"):
        first = model.try_lease(places_key, TTL, holder="a", max_holders=2)
        assert first is not None
    with rec.block(f"try_lease max_holders=2 ({path}): the second place"):
        second = model.try_lease(places_key, TTL, holder="b", max_holders=2)
        assert second is not None
    with rec.block(f"try_lease max_holders=2 ({path}): refused"):
        assert model.try_lease(places_key, TTL, holder="c", max_holders=2) is None
    with rec.block(f"lease refresh max_holders=2 ({path})"):
        assert first.refresh()
    with rec.block(f"lease release max_holders=2 ({path}): a place left"):
        assert first.release()
    with rec.block(f"lease release max_holders=2 ({path}): the last place"):
        assert second.release()
    assert model.peek(places_key) is None


def _wait_expired(model: Any, key: str) -> None:
    """Until the row of ``key`` (written with a 1 ms ttl) is expired by the database's
    clock (not recorded)."""
    deadline = time.monotonic() + 30
    while not model.peek(key).expired:
        assert time.monotonic() < deadline, f"{key} never expired"
        time.sleep(0.01)


def _operations(model: Any) -> None:
    rec = RECORDER
    with rec.block("release: ours"):
        assert model.acquire("r", TTL, "a")
        assert model.release("r", "a")
    with rec.block("release: not ours"):
        assert not model.release("r", "a")
    assert model.acquire("r", TTL, "a")
    with rec.block("refresh"):
        assert model.refresh("r", TTL, "a")
    with rec.block("peek"):
        assert model.peek("r") is not None
    with rec.block("now_ms"):
        assert model.now_ms() > 0
    with rec.block("insert"):
        assert model.insert("i", holder="a", ttl=TTL).holder == "a"
    with rec.block("update holder="):
        assert model.update("i", holder="b")
    with rec.block("update ttl="):
        assert model.update("i", ttl=1)
    _wait_expired(model, "i")
    for state in ("all", "live", "expired"):
        with rec.block(f"list {state}"):
            model.list(state)
        with rec.block(f"count {state}"):
            model.count(state)
        with rec.block(f"iter_locks {state} (pages of 1)"):
            _pages(model, state)
    with rec.block("prune dry_run"):
        assert model.prune(dry_run=True) >= 1
    with rec.block("prune (batches of 1)"):
        assert model.prune(batch_size=1) >= 1
    with rec.block("delete"):
        assert model.delete("r")
    with rec.block("try_lease"):
        lease = model.try_lease("l", TTL, holder="a")
        assert lease is not None
    with rec.block("lease ensure_held"):
        lease.ensure_held()
    with rec.block("lease refresh"):
        assert lease.refresh()
    with rec.block("lease refresh min_hold="):
        assert lease.refresh(min_hold=TTL)
    with rec.block("lease release min_hold="):
        assert lease.release()
    lease = model.try_lease("m", TTL, holder="a")
    with rec.block("lease release"):
        assert lease.release()


def _features(model: Any) -> None:
    rec = RECORDER
    with rec.block("try_lease liveness=session: the first (sets up the registry)", ddl_only=True):
        lease = model.try_lease("s0", TTL, holder="a", liveness="session")
        assert lease is not None
        assert lease.release()
    with rec.block("try_lease liveness=session"):
        lease = model.try_lease("s", TTL, holder="a", liveness="session")
        assert lease is not None
    with rec.block("try_lease liveness=session: taken"):
        assert model.try_lease("s", TTL, holder="b", liveness="session") is None
    with rec.block("lease release liveness=session"):
        assert lease.release()
    with rec.block("try_lease record=True: the first (creates the ledger)", ddl_only=True):
        lease = model.try_lease("r0", TTL, holder="a", record=True)
        assert lease is not None
        assert lease.release()
    with rec.block("try_lease record=True"):
        lease = model.try_lease("rec", TTL, holder="a", record=True)
        assert lease is not None
    with rec.block("lease release record=True"):
        assert lease.release()
    with rec.block("try_lease record='all': taken"):
        assert model.acquire("rec", TTL, "x")
        assert model.try_lease("rec", TTL, holder="b", record="all") is None
    with rec.block("runs"):
        assert len(model.runs("rec")) == 2
    with rec.block("runs (every key)"):
        assert len(model.runs()) == 3
    with rec.block("prune_runs"):
        assert model.prune_runs(TTL) == 0


def _init_sql(family: str) -> list[tuple[str, list[str]]]:
    """The DDL ``joblocks init --sql`` prints (compiled offline for the family)."""
    locks = build_table(MetaData(), "job_locks")
    runs = build_runs_table(MetaData(), "job_runs")
    return [
        ("init --sql: the lock table", ddl_statements(family, locks)),
        ("the run ledger's table, offline", ddl_statements(family, runs)),
    ]


def _body(path: Path) -> str:
    """A golden file without its first line (which names the database and face)."""
    return path.read_text().split("\n", 1)[1]


def _check(backend: str, face: str, body: str, update: bool) -> None:
    """Compare ``body`` with the golden file of ``backend`` (the asyncio face's own,
    ``<backend>-asyncio.sql``, where it sends something else); rewrite it instead
    with ``update``."""
    sync_file = GOLDEN / f"{backend}.sql"
    aio_file = GOLDEN / f"{backend}-asyncio.sql"
    title = f"-- The SQL joblocks sends to {backend} (tests/core/sql/test_golden_sql.py)"
    if update:
        if face == "sync":
            sync_file.write_text(f"{title}\n{body}")
        elif sync_file.exists() and _body(sync_file) == body:
            aio_file.unlink(missing_ok=True)  # the same as the sync face's
        else:
            aio_file.write_text(f"{title[:-1]}, the asyncio face)\n{body}")
        return
    golden = aio_file if face == "aio" and aio_file.exists() else sync_file
    if not golden.exists():
        pytest.fail(f"{golden.name} is missing: run pytest tests/core/sql --update-golden -n 0")
    expected = _body(golden)
    if body != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                body.splitlines(keepends=True),
                f"golden/{golden.name}",
                "sent",
            )
        )
        pytest.fail(f"the SQL sent differs from golden/{golden.name}:\n{diff}", pytrace=False)


@pytest.mark.parametrize("face", ["sync", "aio"])
@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mariadb"])
def test_the_sql_sent_is_the_golden_files(
    backend: str, face: str, db_url: str, update_golden: bool
) -> None:
    """Each face sends the statements of its golden file: the sync face's, or the
    asyncio face's own where its drivers are sent something else (aiomysql's parameter
    style, a connection set up at another moment). ``--update-golden -n 0`` writes
    the sync face's first, then the asyncio face's where it differs."""
    family = "mysql" if backend == "mariadb" else backend
    stem = f"jl{uuid.uuid4().hex[:10]}"
    made = models(face, db_url, "")
    sections = _scenario(next(made), family, backend, stem)
    next(made, None)  # closes the models (and checks that no connection leaked)
    body = "\n" + _normalised(_render(sections + _init_sql(family)), stem)
    _check(backend, face, body, update_golden)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mariadb"])
def test_every_statement_is_pinned_by_the_golden_file(backend: str) -> None:
    """Each statement a model prepares (every acquire path, a counted lease's) is sent
    by the scenario above, so the golden file pins it: none goes unchecked."""
    from sqlalchemy import create_engine

    from joblocks._sql.statements import AcquireStep, Prepared, build, paths_for, places

    # The drivers joblocks uses (their parameter style is in the compiled SQL).
    driver = {"sqlite": "sqlite+pysqlite", "postgresql": "postgresql+psycopg"}
    engine = create_engine(f"{driver.get(backend, 'mysql+pymysql')}://")
    dialect = engine.dialect
    table = build_table(MetaData(), "job_locks")
    golden = (GOLDEN / f"{backend}.sql").read_text()
    prepared: dict[str, str] = {}
    for path in paths_for(dialect):
        st = build(dialect, table, path)
        for field in type(st).__dataclass_fields__:
            value = getattr(st, field)
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, AcquireStep):
                    prepared[f"{path}.{field}"] = item.stmt.sql
                    if item.redraw is not None:
                        prepared[f"{path}.{field}.redraw"] = item.redraw.sql
                elif isinstance(item, Prepared):
                    prepared[f"{path}.{field}"] = item.sql
    group = places(dialect, table, 2)
    for field in type(group).__dataclass_fields__:
        prepared[f"places.{field}"] = getattr(group, field).sql
    missing = sorted(name for name, sql in prepared.items() if f"\n{sql};\n" not in golden)
    assert not missing, missing
    assert len(set(prepared.values())) >= 30


def test_the_postgresql_token_is_the_documented_one() -> None:
    """The token drawn in the PostgreSQL statements is ``nextval + (timeline - 1) *
    2**TIMELINE_SHIFT`` with the timeline read as ``PG_TIMELINE_SQL`` (which
    ``joblocks doctor`` reads too)."""
    from joblocks._sql.postgresql import PG_TIMELINE_SQL, STATEMENTS, TIMELINE_SHIFT

    token = f"(SELECT nextval('{{seq}}') + ({PG_TIMELINE_SQL} - 1) * {1 << TIMELINE_SHIFT} "
    drawing = [name for name, sql in STATEMENTS.items() if "nextval" in sql]
    assert sorted(drawing) == [
        "insert",
        "insert_ignore",
        "update",
        "update_holder",
        "update_in_slot",
        "upsert",
    ]
    for name in drawing:
        assert token in STATEMENTS[name], name


@pytest.mark.parametrize("family", ["sqlite", "postgresql", "mysql"])
def test_the_statements_read_the_profiles_clock(family: str) -> None:
    """The database's now written out in each family's statements is the profile's
    (``_dialects``), which the ledger's SQLAlchemy expressions use (``_clock``)."""
    from joblocks._sql.dialects import profile
    from joblocks._sql.statements import TEMPLATES

    now = profile(family).statement_now
    statements = TEMPLATES[family]  # type: ignore[index]
    assert statements["now"] == f"SELECT {now}"
    untimed = {name for name, sql in statements.items() if now not in sql}
    # Every other statement reads the clock this way; these compare with parameters or
    # copy values only (a release by holder or token, a new holder, the group row's
    # extension to a place's expiry, MariaDB's second draw of a token).
    assert untimed == {
        "count_all",
        "delete",
        "place_extend",
        "release",
        "release_lease",
        "update_holder",
        *(["redraw"] if family == "mysql" else []),
    }
