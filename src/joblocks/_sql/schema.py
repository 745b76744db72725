"""The ``job_locks`` table, its fencing counter, and their DDL.

One row per lock: ``id`` (the key), ``holder``, ``acquired_at``, ``expires_at`` (epoch
milliseconds by the database's clock) and ``fence`` (the fencing token of the grant).

The fencing counter only grows. It is a SEQUENCE named ``<table>_fence_seq`` on
PostgreSQL and MariaDB, and on SQLite a one-row table ``<table>_fence`` that two
triggers advance whenever a grant writes a larger token.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    DDL,
    BigInteger,
    Column,
    Connection,
    Dialect,
    Index,
    Integer,
    MetaData,
    Sequence,
    String,
    Table,
    event,
    inspect,
)
from sqlalchemy.schema import CreateIndex, CreateSequence, CreateTable, SetTableComment
from sqlalchemy.types import TypeDecorator, TypeEngine

from .._util import validate as _validate
from .dialects import ddl_dialect, galera, profile
from .tables import check_shape as check_shape  # the run ledger checks its table too

JOB_LOCKS_TABLE_NAME = "job_locks"


class ExactText(TypeDecorator[str]):
    """Text compared byte for byte on every database.

    PostgreSQL and SQLite compare ``VARCHAR`` exactly already; on MySQL/MariaDB the
    column is ``VARBINARY`` so that ``Job``, ``job``, ``job `` and ``jöb`` stay four
    different keys (a ``_ci`` or PAD SPACE collation would merge some of them).
    """

    impl = String
    cache_ok = True

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.length = length

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if profile(dialect).binary_text:
            # Imported here: the MySQL dialect package costs ~5 % of ``import joblocks``.
            from sqlalchemy.dialects.mysql import VARBINARY

            return dialect.type_descriptor(VARBINARY(self.length))
        return dialect.type_descriptor(String(self.length))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if isinstance(value, str) and profile(dialect).binary_text:
            return value.encode("utf-8")
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        text: str | None = decode_text(value)
        return text


def decode_text(value: Any) -> Any:
    """Bytes from a VARBINARY column back to str."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8")
    return value


def fence_sequence_name(table_name: str) -> str:
    return f"{table_name}_fence_seq"


def fence_sequence(table: Table, nocache: bool = False) -> Sequence:
    """The fencing SEQUENCE of ``table`` (PostgreSQL, MariaDB), as a schema object.

    ``nocache``: every value is drawn from the stored sequence (``CACHE 0``, MariaDB's
    ``NOCACHE``), as a Galera cluster needs for tokens in grant order across nodes.
    """
    if nocache:
        return Sequence(fence_sequence_name(table.name), schema=table.schema, cache=0)
    return Sequence(fence_sequence_name(table.name), schema=table.schema)


def fence_counter_name(table_name: str) -> str:
    return f"{table_name}_fence"


def build_table(
    metadata: MetaData, table_name: str = JOB_LOCKS_TABLE_NAME, schema: str | None = None
) -> Table:
    """Add the lock table (and its fencing counter) to ``metadata`` and return the table.

    Use this to put the table into your own migrations::

        from sqlalchemy import MetaData
        import joblocks
        joblocks.build_table(my_metadata)
    """
    _validate.identifier(table_name, "table_name", _validate.MAX_TABLE_NAME)
    if schema is not None:
        _validate.identifier(schema, "schema")
    Sequence(fence_sequence_name(table_name), metadata=metadata, schema=schema)
    table = Table(
        table_name,
        metadata,
        Column("id", ExactText(_validate.MAX_KEY_BYTES), primary_key=True),
        Column("holder", ExactText(_validate.MAX_HOLDER_BYTES), nullable=False),
        Column("acquired_at", BigInteger, nullable=False),
        Column("expires_at", BigInteger, nullable=False),
        Column("fence", BigInteger, nullable=False),
        schema=schema,
        comment="joblocks leases: one row per held or expired lock",
    )
    counter = fence_counter_name(table_name)
    for statement in sqlite_counter_ddl(table_name, counter):
        ddl = DDL(statement)  # type: ignore[no-untyped-call]
        event.listen(table, "after_create", ddl.execute_if(dialect="sqlite"))
    event.listen(
        table,
        "after_drop",
        DDL(f'DROP TABLE IF EXISTS "{counter}"').execute_if(dialect="sqlite"),  # type: ignore[no-untyped-call]
    )
    return table


def sqlite_counter_ddl(table_name: str, counter: str) -> list[str]:
    """The SQLite fencing counter: a one-row table advanced by triggers on the lock table."""
    bump = f'BEGIN UPDATE "{counter}" SET value = NEW.fence WHERE value < NEW.fence; END'
    return [
        f'CREATE TABLE IF NOT EXISTS "{counter}" '
        "(id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL)",
        f'INSERT OR IGNORE INTO "{counter}" (id, value) '
        f'SELECT 1, COALESCE(MAX(fence), 0) FROM "{table_name}"',
        f'CREATE TRIGGER IF NOT EXISTS "{table_name}_fence_ins" AFTER INSERT ON "{table_name}" '
        + bump,
        f'CREATE TRIGGER IF NOT EXISTS "{table_name}_fence_upd" AFTER UPDATE OF fence ON '
        f'"{table_name}" WHEN NEW.fence > OLD.fence ' + bump,
    ]


if TYPE_CHECKING:
    #: The default table, ready for Alembic's ``target_metadata`` or
    #: ``metadata.create_all`` (made on first use: see ``__getattr__`` below).
    metadata: MetaData
    job_locks: Table

# -- the run ledger (``record=True``; see ``_core.ledger``) ---------------------------------

JOB_RUNS_TABLE_NAME = "job_runs"

#: The longest error text kept in a ledger row, in characters.
MAX_RUN_ERROR = 500


class BoundText(ExactText):
    """:class:`ExactText` bound as text on every driver (aiomysql cannot bind bytes; the
    server stores a text parameter in a VARBINARY column as its UTF-8 bytes)."""

    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> None:
        return None


def runs_table_name(lock_table_name: str) -> str:
    """The ledger's table beside a lock table: ``job_locks`` -> ``job_runs``, any other
    ``<name>_locks`` -> ``<name>_runs``, else ``<name>_runs``."""
    stem = (
        lock_table_name[: -len("_locks")] if lock_table_name.endswith("_locks") else lock_table_name
    )
    return f"{stem}_runs"


def build_runs_table(
    metadata: MetaData, table_name: str = JOB_RUNS_TABLE_NAME, schema: str | None = None
) -> Table:
    """Add the run ledger's table (one row per run, see :doc:`/ledger`) to ``metadata``.

    Not part of :data:`metadata`: the ledger is opt-in (``record=True``). For your own
    migrations, ``joblocks.build_runs_table(my_metadata)`` (or ``joblocks.runs_metadata``).
    Times are epoch milliseconds by the database's clock; ``outcome`` is NULL while a run
    is in progress, then ``ok``, ``error``, ``lost`` or ``skipped``.
    """
    _validate.identifier(table_name, "table_name", _validate.MAX_TABLE_NAME + 5)
    if schema is not None:
        _validate.identifier(schema, "schema")
    table = Table(
        table_name,
        metadata,
        Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
        Column("key", BoundText(_validate.MAX_KEY_BYTES), nullable=False),
        Column("slot", BigInteger, nullable=True),
        Column("schedule", String(255), nullable=True),
        Column("timezone", String(64), nullable=True),
        Column("holder", BoundText(_validate.MAX_HOLDER_BYTES), nullable=False),
        Column("host", String(255), nullable=False),
        Column("pid", Integer, nullable=False),
        Column("token", BigInteger, nullable=True),
        Column("started_at", BigInteger, nullable=False),
        Column("ended_at", BigInteger, nullable=True),
        Column("duration_ms", BigInteger, nullable=True),
        Column("outcome", String(16), nullable=True),
        Column("error", String(MAX_RUN_ERROR), nullable=True),
        Index(f"{table_name}_key_ix", "key", "started_at"),
        Index(f"{table_name}_start_ix", "started_at"),
        schema=schema,
        comment="joblocks run ledger: one row per run",
        info={"joblocks": "runs"},
    )
    return table


if TYPE_CHECKING:
    #: The default ledger table, in a MetaData of its own (opt-in, see
    #: ``build_runs_table``; made on first use).
    runs_metadata: MetaData
    job_runs: Table


def ddl_statements(
    dialect: Dialect | str, table: Table, *, if_not_exists: bool = False
) -> list[str]:
    """The DDL of ``table`` and its fencing counter, one statement a string, in order.

    The one source of the lock table's DDL: :func:`ensure_table` runs it,
    ``joblocks init --sql`` prints it and the Django migration applies it.
    ``dialect`` is a SQLAlchemy dialect or a family's name (then compiled for that
    family, no driver needed; ``mysql`` gives MariaDB's). PostgreSQL and MariaDB: the
    ``<table>_fence_seq`` SEQUENCE, the table and (where the comment is not inline) its
    comment; SQLite: the table, the counter table and its two triggers (which are
    always ``IF NOT EXISTS``). ``if_not_exists`` adds ``IF NOT EXISTS`` to the table and
    the sequence, so that the whole script may run where they exist.
    """
    compiled = ddl_dialect(dialect)
    return [statement for _kind, statement in _ddl(compiled, table, if_not_exists)]


def _ddl(
    dialect: Dialect, table: Table, if_not_exists: bool, nocache: bool = False
) -> list[tuple[str, str]]:
    """:func:`ddl_statements`, each with what it creates: ``sequence``, ``table`` (the
    table and its comment) or ``counter`` (SQLite's counter table and triggers).
    ``nocache``: the sequence draws every value from storage (a Galera cluster)."""
    prof = profile(dialect)
    out: list[tuple[str, str]] = []
    # A dialect that met its server knows whether it has sequences (MySQL has none,
    # and create_all skips it there); one compiled offline is taken at its family's word.
    offline = getattr(dialect, "server_version_info", None) is None
    runs = table.info.get("joblocks") == "runs"  # the ledger: no fencing counter
    if prof.fence_kind == "sequence" and (dialect.supports_sequences or offline) and not runs:
        create = CreateSequence(fence_sequence(table, nocache), if_not_exists=if_not_exists)
        out.append(("sequence", str(create.compile(dialect=dialect)).strip()))
    create_table = CreateTable(table, if_not_exists=if_not_exists)
    out.append(("table", str(create_table.compile(dialect=dialect)).strip()))
    if table.comment and dialect.supports_comments and not dialect.inline_comments:
        out.append(("table", str(SetTableComment(table).compile(dialect=dialect)).strip()))
    for index in sorted(table.indexes, key=lambda found: str(found.name)):
        create_index = CreateIndex(index, if_not_exists=if_not_exists)
        out.append(("index", str(create_index.compile(dialect=dialect)).strip()))
    if prof.fence_kind == "counter" and not runs:
        counter = sqlite_counter_ddl(table.name, fence_counter_name(table.name))
        out.extend(("counter", statement) for statement in counter)
    return out


def ensure_table(conn: Connection, table: Table) -> None:
    """Create the lock table and its fencing counter where missing (safe under races).

    Runs :func:`ddl_statements`, skipping the table and the sequence where they exist
    already (SQLite's counter statements always run: they are idempotent, and repair a
    missing counter). Not with ``IF NOT EXISTS``: another object in the sequence's
    name (a table, say) must fail the creation, not be taken for the sequence.

    Several processes may start at once on an empty database: each checks, creates
    what is missing, and when another one got there first (a "duplicate" error from
    the CREATE, even with IF NOT EXISTS on PostgreSQL), checks again.

    A table of that name that is not a joblocks lock table (see :func:`._tables.shape_problems`),
    or for the run ledger's table not a ledger (:func:`._tables.runs_shape_problems`), raises
    :class:`~joblocks.LockTableMismatch`, and nothing is created.
    """
    check_shape(conn, table)
    # A Galera node refuses a cached sequence, and INCREMENT BY 0 (what it accepts
    # besides) hands out tokens out of grant order across nodes: NOCACHE keeps order.
    statements = _ddl(conn.dialect, table, if_not_exists=False, nocache=galera(conn))
    for attempt in range(1, 6):
        try:
            found = inspect(conn)
            exists = {
                "table": found.has_table(table.name, schema=table.schema),
                "sequence": any(kind == "sequence" for kind, _ in statements)
                and found.has_sequence(fence_sequence_name(table.name), schema=table.schema),
                "counter": False,
            }
            exists["index"] = exists["table"]  # created with the table
            for kind, statement in statements:
                if not exists[kind]:
                    conn.exec_driver_sql(statement)
            break
        except Exception:
            if attempt == 5:
                raise
            time.sleep(0.02 * attempt)


def __getattr__(name: str) -> Any:
    """``metadata``/``job_locks`` and ``runs_metadata``/``job_runs``, built once, on first
    use: a process that names its own table (the CLI, ``JobLockModel(table_name=...)``)
    does not build the default ones at import."""
    if name in ("metadata", "job_locks"):
        made = MetaData()
        globals().update(metadata=made, job_locks=build_table(made))
    elif name in ("runs_metadata", "job_runs"):
        made = MetaData()
        globals().update(runs_metadata=made, job_runs=build_runs_table(made))
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return globals()[name]
