"""What the sync and asyncio models share: arguments, table, statements, retry policy."""

from __future__ import annotations

import functools
import logging
import random
from typing import TYPE_CHECKING, Any, Callable, Union, cast

from sqlalchemy import URL, Connection, Engine, MetaData, Table

from .._db import engines as _engines
from .._sql import tables as _tables
from .._sql.dialects import profile
from .._sql.schema import JOB_LOCKS_TABLE_NAME, build_table, ensure_table
from .._sql.statements import AcquirePath, Statements, build
from .._util import validate as _validate
from .options import check_record

log = logging.getLogger("joblocks")

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine
    from typing_extensions import Self

Database = Union[str, URL, Engine, "AsyncEngine", None]

#: Deadlocks and serialization failures are retried this many times in all.
TRANSIENT_ATTEMPTS = 8


def transient_pause(attempt: int) -> float:
    """Seconds to sleep before retry ``attempt`` (1-based) after a deadlock: jittered."""
    return random.uniform(0, min(0.05, 0.002 * 2**attempt))  # noqa: S311 - jitter


def wrong_face(model: object, expected: str, context: str = "") -> TypeError:
    """The one error for a model of the other face, or no model at all, where a
    ``expected`` (``"joblocks.JobLockModel"`` or ``"joblocks.aio.JobLockModel"``) is
    needed; ``context`` starts the message (say which function needs it)."""
    if isinstance(model, ModelCore):
        given = "joblocks.aio.JobLockModel" if model._asynchronous else "joblocks.JobLockModel"
    else:
        kind = type(model)
        given = kind.__qualname__
        if kind.__module__ != "builtins":
            given = f"{kind.__module__}.{given}"
    return TypeError(f"{context}model must be a {expected}, not {given}")


@functools.cache
def _arguments(init: Callable[..., None]) -> frozenset[str]:
    """The names of the arguments ``init`` takes (``self`` left out)."""
    import inspect

    return frozenset(inspect.signature(init).parameters) - {"self"}


class ModelCore:
    """Validated construction shared by ``JobLockModel`` and ``aio.JobLockModel`` (the
    face's class says ``_asynchronous``; the arguments are documented there)."""

    engine: Any
    table: Table
    statements: Statements
    owns_engine: bool
    errors_as_taken: bool
    database: str
    timeout_ms: int
    table_ready: bool
    _asynchronous: bool
    #: ``record=``: the run ledger's default for this model's leases (``_core.ledger``).
    record: bool | str
    #: The face's lease class (built by ``_lifecycle.take``).
    _lease_type: Any

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # Unknown or extra arguments are reported with the public class's name (and the
        # closest argument names), not as ``ModelCore.__init__()``'s.
        where = cls._public_name()
        known = _arguments(cls.__init__)
        for name in kwargs:
            if name not in known:
                raise _validate.unknown_keyword(where + "()", name, known)
        if len(args) > 1:
            raise TypeError(
                f"{where}() takes one positional argument (database), got {len(args)}: "
                f"pass the others by keyword ({', '.join(sorted(known - {'database'}))})"
            )
        return super().__new__(cls)

    @classmethod
    def _public_name(cls) -> str:
        if not cls.__module__.startswith("joblocks._"):
            return cls.__name__  # a subclass of the caller's own
        return "joblocks.aio.JobLockModel" if cls._asynchronous else "joblocks.JobLockModel"

    def __init__(
        self,
        database: Database = None,
        *,
        table_name: str = JOB_LOCKS_TABLE_NAME,
        schema: str | None = None,
        create_table: bool = True,
        errors_as_taken: bool = False,
        acquire_path: AcquirePath | None = None,
        timeout: _validate.Duration | None = None,
        record: bool | str = False,
        runs_table_name: str | None = None,
    ) -> None:
        asynchronous = self._asynchronous
        self.record = check_record(record)
        timeout_ms = None if timeout is None else _validate.duration_ms(timeout, "timeout")
        _validate.identifier(table_name, "table_name", _validate.MAX_TABLE_NAME)
        if runs_table_name is not None:
            _validate.identifier(runs_table_name, "runs_table_name", _validate.MAX_TABLE_NAME)
        #: The run ledger's table name (None: ``_schema.runs_table_name(table_name)``).
        self.runs_table_name = runs_table_name
        if schema is not None:
            _validate.identifier(schema, "schema")
        if not isinstance(create_table, bool):
            raise TypeError(f"create_table must be a bool, not {type(create_table).__name__}")
        if not isinstance(errors_as_taken, bool):
            raise TypeError(f"errors_as_taken must be a bool, not {type(errors_as_taken).__name__}")
        face = "joblocks.aio.JobLockModel" if asynchronous else "joblocks.JobLockModel"
        is_async = _engines.is_async_engine(database)
        if is_async and not asynchronous:
            raise TypeError("database is an AsyncEngine: use joblocks.aio.JobLockModel for asyncio")
        if isinstance(database, Engine) and asynchronous:
            raise TypeError(
                "database is a sync Engine: use joblocks.JobLockModel, or pass an "
                f"AsyncEngine or a URL to {face}"
            )
        if isinstance(database, Engine) or is_async:
            given = cast("Engine | AsyncEngine", database)
            if timeout_ms is not None:
                raise ValueError(
                    "timeout applies to the engines joblocks makes from a URL; set your "
                    "engine's own connect_args instead (see docs/reliability.md)"
                )
            _engines.ensure_usable(given)
            engine: Any = given.execution_options(isolation_level="AUTOCOMMIT")
            self.owns_engine = False
        else:
            url, _source = _engines.resolve(cast("str | URL | None", database))
            _engines.check_backend(url)
            engine = _engines.create(url, asynchronous=asynchronous, timeout_ms=timeout_ms)
            self.owns_engine = True
            self._url = url
        dialect = engine.dialect
        single_file = profile(dialect).single_file
        if single_file and schema not in (None, "main"):
            raise ValueError(
                f"schema: SQLite keeps the lock table in the main database; got {schema!r}"
            )
        if schema == "main" and single_file:
            schema = None
        self.engine = engine
        self.database = _engines.describe(engine)
        self.table = build_table(MetaData(), table_name, schema)
        self.statements = build(dialect, self.table, acquire_path)
        self.errors_as_taken = errors_as_taken
        self.timeout_ms = _engines.TIMEOUT_MS if timeout_ms is None else timeout_ms
        self._create = create_table
        self._tune_sqlite = single_file and not self.owns_engine
        # A SQLite model always has a first-use step: it reads the file's identity.
        self.table_ready = not create_table and not single_file
        self._set_up()

    def _set_up(self) -> None:
        """What a face adds to a new model (its connection cache, ...)."""

    @property
    def table_name(self) -> str:
        """The lock table's name."""
        return self.table.name

    @property
    def schema(self) -> str | None:
        """The lock table's schema (None: the connection's default)."""
        return self.table.schema

    @property
    def acquire_path(self) -> AcquirePath:
        """How ``acquire`` reaches the database (see ``joblocks._sql.statements``)."""
        return self.statements.path

    @property
    def identity(self) -> tuple[Any, ...] | None:
        """Which lock table this model talks to, as the file system or the server
        reports it (see :func:`joblocks._sql.tables.table_identity`); None until known.

        Equal for two models (sync or asyncio) exactly when they reach the same table,
        however their URLs are spelled: the in-process overlap guard of
        ``run_with_lock`` is keyed by it. Read on the first ``run_with_lock`` (on
        SQLite: on the first call) and kept for the model's life.
        """
        return None if self._found is None else self._found.key

    #: The URL joblocks made the engine from (None for an engine passed in).
    _url: URL | None = None

    #: The identity once read (see ``identity``).
    _found: _tables.TableIdentity | None = None

    def _identified(self, found: _tables.TableIdentity) -> _tables.TableIdentity:
        """Keep the identity ``found`` unless one was kept meanwhile; the one kept."""
        if self._found is None:
            self._found = found
        return self._found

    @property
    def _first_use_name(self) -> str:
        return "create table" if self._create else "open database"

    def _first_use(self, conn: Connection, create: bool) -> None:
        """What a model does once, before its first operation: create the table
        (``create``), on a caller's SQLite engine switch the file to WAL, and on SQLite
        read the file's identity (which a keep-alive lease watches)."""
        if create:
            ensure_table(conn, self.table)
        if self._tune_sqlite:
            _tables.tune_user_sqlite(conn)
            self._tune_sqlite = False
        if self._found is None and self.statements.profile.single_file:
            self._found = _tables.table_identity(conn, self.statements, self.table)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__qualname__} {self.database} table={self.table.fullname} "
            f"path={self.statements.path}>"
        )
