"""What joblocks knows about each database family, in one place.

One frozen :class:`Profile` per family (SQLite, PostgreSQL, MariaDB — MySQL URLs are
read as MariaDB's family), and :func:`profile`, the one lookup every other module uses
instead of comparing dialect names. The SQL text of the lock statements is built per
family in ``_sql.statements``; which family, which acquire path, which error codes are
transient, how time-outs reach the driver and what the DDL looks like come from here.

:func:`profile` raises the one error for an unsupported database (a ``ValueError``).

"Now" as epoch milliseconds, read from the database server's clock (:func:`db_now_ms`).

Every comparison and every written timestamp uses these expressions, so clients with
skewed clocks still agree on who holds what. Each is stable within one statement, and
each is the same arithmetic: the database clock's epoch time, floored to a whole
millisecond (a lease written with ttl T at ms N is live while now < N + T).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import BigInteger, Connection, Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from .._util.drivers import ConnectionLost, DuplicateKey, StatementFailed, Transient

Family = Literal["sqlite", "postgresql", "mysql"]
AcquirePath = Literal["upsert", "update_insert", "portable"]
#: Every acquire path, in the order the docs list them (see docs/performance.md).
ACQUIRE_PATHS: tuple[AcquirePath, ...] = ("upsert", "update_insert", "portable")


def _postgresql_ms(timestamp: str) -> str:
    # Truncated to the millisecond first (exact: timestamps are whole microseconds), so
    # the product is a whole number whether EXTRACT gives numeric (14+) or double.
    return f"CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', {timestamp})) * 1000 AS BIGINT)"


@dataclass(frozen=True)
class Profile:
    """One database family as joblocks uses it."""

    #: The family: ``sqlite``, ``postgresql`` or ``mysql`` (MySQL and MariaDB).
    family: Family
    #: Its name in messages and in the header of ``joblocks init --sql``.
    label: str
    #: SQLAlchemy dialect names (``dialect.name``, URL backends) of the family.
    names: tuple[str, ...]
    #: The database clock in whole epoch milliseconds, stable within one statement.
    statement_now: str
    #: The wall clock right now in epoch ms (for writes inside a caller's transaction:
    #: PostgreSQL's ``now()`` is frozen for a whole transaction).
    wall_now: str
    #: Connect arguments that carry joblocks's time-out, in seconds, on the sync
    #: drivers joblocks picks (PyMySQL also reads the handshake with ``read_timeout``).
    timeout_args: tuple[str, ...]
    #: The module the asyncio face's driver comes from.
    async_module: str
    #: URL drivername -> the one joblocks uses for a sync / an asyncio engine.
    sync_drivers: tuple[tuple[str, str], ...]
    async_drivers: tuple[tuple[str, str], ...]
    #: The SQLAlchemy URL drivername the DDL is compiled with when only the family is
    #: known (``init --sql``, the Django migration); no driver is imported for it.
    ddl_drivername: str
    #: Django's ``connection.vendor`` of the family.
    django_vendor: str
    #: SQLSTATEs (``orig.sqlstate``) of deadlocks and serialization failures.
    transient_sqlstates: frozenset[str] = frozenset()
    #: Driver error numbers (``orig.args[0]``) of the same.
    transient_errnos: frozenset[int] = frozenset()
    #: Pooled connections idle for a while are pinged before use (a server may have
    #: dropped them; a SQLite file cannot).
    ping: bool = True
    #: How the fencing counter is kept: a ``SEQUENCE`` or a counter table + triggers.
    fence_kind: Literal["sequence", "counter"] = "sequence"
    #: The acquire paths the family offers, and the one used unless told otherwise.
    acquire_paths: tuple[AcquirePath, ...] = ACQUIRE_PATHS
    default_path: AcquirePath = "upsert"
    #: The lowest server version joblocks works with, as said in messages (None: any).
    version_floor: str | None = None
    #: One database file: no schemas but ``main``, a table identity read from the file,
    #: one writer at a time (a prune pauses between batches).
    single_file: bool = False
    #: Text columns are ``VARBINARY`` (compared byte for byte) instead of ``VARCHAR``.
    binary_text: bool = False
    #: Column names compare exactly (PostgreSQL) rather than ignoring case.
    exact_column_names: bool = False
    #: The session's default isolation is read once per connection: joblocks's
    #: statements run in a read committed transaction of their own when it is stricter.
    checks_isolation: bool = False
    #: Each asyncio call is bounded by the model's time-out (aiomysql has no read or
    #: write time-out of its own).
    bounds_async_calls: bool = False
    #: A pooler between client and server can be told from the server's answers
    #: (PostgreSQL: the backend pid of the cancel key; see ``joblocks doctor``).
    detects_pooler: bool = False
    #: The lowest ``dialect.server_version_info`` joblocks works with, and what to do
    #: below it (``joblocks doctor``).
    min_version: tuple[int, ...] = ()
    upgrade_hint: str = ""
    #: Only MariaDB's server of the family will do (MySQL has no ``SEQUENCE``).
    requires_mariadb: bool = False
    #: A server-side bound on a statement's waits for locks (another session's table
    #: lock, say): what is sent before the statement (``{ms}``: the bound in
    #: milliseconds, ``{s}``: in seconds), after it, and after it failed. Empty: none
    #: (SQLite's busy time-out bounds its one wait).
    lock_wait_begin: tuple[str, ...] = ()
    lock_wait_end: tuple[str, ...] = ()
    lock_wait_undo: tuple[str, ...] = ()

    def check_server(self, dialect: Dialect) -> tuple[str, str | None, str | None]:
        """The connected server as reports name it (``"MariaDB 10.11.6"``), and when
        joblocks cannot use it, why and what to do (else two Nones)."""
        found = tuple(dialect.server_version_info or ())
        version = ".".join(str(part) for part in found)
        if self.requires_mariadb and not getattr(dialect, "is_mariadb", False):
            return (
                f"MySQL {version}",
                f"MySQL {version} is not supported (it has no SEQUENCE for fencing tokens)",
                "use MariaDB 10.3 or newer, PostgreSQL or SQLite",
            )
        server = f"{self.label} {version}"
        if found < self.min_version:
            return server, f"{server} is too old", self.upgrade_hint
        return server, None, None

    def failed(self, orig: BaseException, lost: bool = False) -> StatementFailed:
        """A statement's failure as the driver raised it (``orig``; ``lost``: its
        connection went with it), normalized: what a driver throws into an operation."""
        if lost:
            return ConnectionLost(orig, lost=True)
        if any(cls.__name__ == "IntegrityError" for cls in type(orig).__mro__):
            return DuplicateKey(orig)
        if self.is_transient_error(orig):
            return Transient(orig)
        return StatementFailed(orig)

    def is_transient_error(self, orig: object) -> bool:
        """Whether a driver exception is a deadlock or serialization failure."""
        if getattr(orig, "sqlstate", None) in self.transient_sqlstates:
            return True
        args = tuple(getattr(orig, "args", ()))
        return bool(args) and args[0] in self.transient_errnos


_SQLITE_NOW = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
_MYSQL_NOW = (
    "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)"
)

SQLITE = Profile(
    family="sqlite",
    label="SQLite",
    names=("sqlite",),
    # 'now' is the same for every use within one sqlite3_step(), and is whole
    # milliseconds (julianday() = that integer / 86400000.0): the product below lands
    # within 0.001 ms of it, often just under, so it is rounded, not truncated.
    statement_now=_SQLITE_NOW,
    wall_now=_SQLITE_NOW,
    timeout_args=("timeout",),
    async_module="aiosqlite",
    sync_drivers=(("sqlite", "sqlite+pysqlite"), ("sqlite+aiosqlite", "sqlite+pysqlite")),
    async_drivers=(("sqlite", "sqlite+aiosqlite"), ("sqlite+pysqlite", "sqlite+aiosqlite")),
    ddl_drivername="sqlite+pysqlite",
    django_vendor="sqlite",
    ping=False,
    fence_kind="counter",
    single_file=True,
    min_version=(3, 35),
    upgrade_hint="joblocks needs SQLite 3.35 or newer (RETURNING); upgrade Python's sqlite3",
)

POSTGRESQL = Profile(
    family="postgresql",
    label="PostgreSQL",
    names=("postgresql",),
    # statement_timestamp(): the start of the current statement, stable inside it.
    statement_now=_postgresql_ms("statement_timestamp()"),
    wall_now=_postgresql_ms("clock_timestamp()"),
    # libpq counts whole seconds; tcp_user_timeout (ms) bounds unacknowledged data.
    timeout_args=("connect_timeout", "tcp_user_timeout"),
    async_module="psycopg",
    sync_drivers=(
        ("postgresql", "postgresql+psycopg"),
        ("postgresql+psycopg_async", "postgresql+psycopg"),
        ("postgresql+asyncpg", "postgresql+psycopg"),
    ),
    async_drivers=(
        ("postgresql", "postgresql+psycopg"),
        ("postgresql+psycopg2", "postgresql+psycopg"),
        ("postgresql+psycopg_async", "postgresql+psycopg"),
    ),
    ddl_drivername="postgresql+psycopg",
    django_vendor="postgresql",
    transient_sqlstates=frozenset({"40001", "40P01"}),  # serialization failure; deadlock
    exact_column_names=True,
    checks_isolation=True,
    detects_pooler=True,
    # pg_current_wal_lsn() (the timeline in fencing tokens) is PostgreSQL 10's.
    min_version=(10,),
    upgrade_hint="joblocks needs PostgreSQL 10 or newer",
    # lock_timeout for one transaction (SET LOCAL: nothing outlives it, behind a
    # transaction-mode pooler too), at read committed whatever the server's default.
    lock_wait_begin=("BEGIN ISOLATION LEVEL READ COMMITTED", "SET LOCAL lock_timeout = {ms}"),
    lock_wait_end=("COMMIT",),
    lock_wait_undo=("ROLLBACK",),
)

MYSQL = Profile(
    family="mysql",
    label="MariaDB",
    names=("mysql", "mariadb"),
    # UTC_TIMESTAMP(6) is constant for a statement; TIMESTAMPDIFF on DATETIME values is
    # plain arithmetic, independent of the session time zone; DIV floors (positive).
    statement_now=_MYSQL_NOW,
    wall_now=_MYSQL_NOW,
    timeout_args=("connect_timeout", "read_timeout", "write_timeout"),
    async_module="aiomysql",
    sync_drivers=(
        ("mysql", "mysql+pymysql"),
        ("mysql+aiomysql", "mysql+pymysql"),
        ("mysql+asyncmy", "mysql+pymysql"),
        ("mariadb", "mariadb+pymysql"),
        ("mariadb+aiomysql", "mariadb+pymysql"),
        ("mariadb+asyncmy", "mariadb+pymysql"),
    ),
    async_drivers=(
        ("mysql", "mysql+aiomysql"),
        ("mysql+pymysql", "mysql+aiomysql"),
        ("mariadb", "mariadb+aiomysql"),
        ("mariadb+pymysql", "mariadb+aiomysql"),
    ),
    # MySQL has no SEQUENCE: the DDL of the family is MariaDB's.
    ddl_drivername="mariadb+pymysql",
    django_vendor="mysql",
    transient_errnos=frozenset({1213, 1020}),  # deadlock; record changed since read
    acquire_paths=("upsert", "portable"),
    # MySQL has no SEQUENCE for the fencing counter.
    version_floor="MariaDB 10.3",
    binary_text=True,
    bounds_async_calls=True,
    min_version=(10, 3),
    upgrade_hint="joblocks needs MariaDB 10.3+",
    requires_mariadb=True,
    # max_statement_time (seconds, to the microsecond) also ends a wait for a metadata
    # lock (LOCK TABLES ... WRITE), which lock_wait_timeout counts in whole seconds
    # only; DEFAULT puts the session back on the server's setting.
    lock_wait_begin=("SET SESSION max_statement_time = {s}",),
    lock_wait_end=("SET SESSION max_statement_time = DEFAULT",),
    lock_wait_undo=("SET SESSION max_statement_time = DEFAULT",),
)

PROFILES: tuple[Profile, ...] = (SQLITE, POSTGRESQL, MYSQL)
_BY_NAME = {name: p for p in PROFILES for name in (*p.names, p.family, p.django_vendor)}
#: URL backends joblocks supports (``postgres://`` is read as ``postgresql://``).
SUPPORTED_BACKENDS: tuple[str, ...] = tuple(name for p in PROFILES for name in p.names)

#: The one message for a database joblocks does not support (``{name!r}`` follows).
UNSUPPORTED = (
    "joblocks supports SQLite, PostgreSQL (postgresql:// or postgres://) and "
    "MariaDB (mysql:// or mariadb://), not "
)


def profile(dialect_or_name: Dialect | str) -> Profile:
    """The profile of a SQLAlchemy dialect, or of a dialect, family, URL backend or
    Django vendor name; a ``ValueError`` for a database joblocks does not support."""
    name = dialect_or_name if isinstance(dialect_or_name, str) else dialect_or_name.name
    found = _BY_NAME.get(name)
    if found is None:
        raise ValueError(f"{UNSUPPORTED}{name!r}")
    return found


def ddl_dialect(dialect_or_name: Dialect | str) -> Dialect:
    """A dialect to compile the DDL with: ``dialect_or_name`` itself when a dialect,
    else the family's (see :attr:`Profile.ddl_drivername`), without importing a driver."""
    if not isinstance(dialect_or_name, str):
        return dialect_or_name
    from sqlalchemy import URL

    dialect: Dialect = URL.create(profile(dialect_or_name).ddl_drivername).get_dialect()()
    return dialect


#: A MariaDB server is a node of a Galera cluster when this reports ``wsrep_on`` ON
#: (no row on a server built without Galera).
GALERA_PROBE = "SHOW VARIABLES LIKE 'wsrep_on'"

_galera: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def galera(conn: Connection) -> bool:
    """Whether ``conn`` reaches a node of a MariaDB Galera cluster, asked once per
    engine (never on other families).

    On Galera the fencing sequence is made ``NOCACHE`` (a cached sequence cannot be
    created there, and ``INCREMENT BY 0`` gives tokens out of grant order across
    nodes), and ``liveness="session"`` is refused (``GET_LOCK`` is local to a node).
    """
    if profile(conn.dialect).family != "mysql":
        return False
    engine = conn.engine
    found = _galera.get(engine)
    if found is None:
        row = conn.exec_driver_sql(GALERA_PROBE).first()
        found = row is not None and str(row[1]).upper() == "ON"
        _galera[engine] = found
    return found


def statement_now_sql(dialect: Dialect) -> str:
    """SQL for the database's current time in epoch ms, stable within a statement
    (the expressions are in ``_sql.dialects``:
    :attr:`~joblocks._sql.dialects.Profile.statement_now`)."""
    return profile(dialect).statement_now


class db_now_ms(FunctionElement[int]):
    """SQL expression: the database server's current time in epoch milliseconds."""

    type = BigInteger()
    inherit_cache = True


@compiles(db_now_ms)
def _compile_db_now_ms(element: db_now_ms, compiler: SQLCompiler, **kw: object) -> str:
    return profile(compiler.dialect).wall_now


class statement_now_ms(FunctionElement[int]):
    """SQL expression: the database's now in epoch ms, one value for the whole statement
    (:attr:`~joblocks._sql.dialects.Profile.statement_now`)."""

    type = BigInteger()
    inherit_cache = True


@compiles(statement_now_ms)
def _compile_statement_now_ms(
    element: statement_now_ms, compiler: SQLCompiler, **kw: object
) -> str:
    return profile(compiler.dialect).statement_now


def deadline(sent_at: float, ttl_ms: int) -> float:
    """When a grant (or renewal) sent at monotonic ``sent_at`` surely still holds: the
    database wrote ``floor(its now) + ttl``, its now being at or after ``sent_at`` but up
    to 1 ms above the floored value, so 1 ms is taken off."""
    return sent_at + (ttl_ms - 1) / 1000
