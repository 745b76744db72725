"""``liveness="session"``: a crashed holder is taken over at once, a paused one is not.

While a lease of ``liveness="session"`` lives, its holder also holds a *session lock*
tied to the key, which the operating system or the database server drops by itself
when the holder's process dies (its connections close, its files close):

- PostgreSQL: ``pg_advisory_lock(bigint)`` on a connection the lease keeps for its
  life. The bigint is the registry table's oid (high 32 bits) and the key's id in it
  (low 32 bits): distinct keys, and distinct lock tables of one database, get distinct
  locks (no hash). It lives in the one-bigint keyspace, apart from the two-int one
  whose ``pg_advisory_xact_lock`` orders fencing tokens.
- MariaDB: ``GET_LOCK(name, 0)`` on a connection the lease keeps, ``name`` being
  ``joblocks:`` + the first 40 hex digits of SHA-256 of the database and registry
  table names + ``:`` + the key's id (at most 60 of the 64 characters allowed: a
  collision would need a SHA-256 collision of two database names on one server).
- SQLite: an open file description lock (Linux ``F_OFD_SETLK``) on byte *id* of a
  lock file beside the database file: two leases of one process conflict like two
  processes, and the kernel drops the lock when the process dies.

The key's id comes from a small registry table beside the lock table
(``<table>_live``: ``id``, ``lock_key``, ``fence``), one row per key ever taken with
``liveness="session"``, read once per process and key. Its ``fence`` column names the
grant whose holder took the session lock: only such a grant is ever taken over.

The order that makes it safe: a holder takes the session lock *before* it takes the
row, and lets it go only *after* the row was released. So a contender that gets the
session lock while a row is live knows the row's holder no longer holds it: when the
row's token is the one the registry names (its holder did hold the session lock),
that holder's process died, and the contender deletes that grant (same holder and
token only) and acquires the key anew, with a new, larger token. A holder that is
paused (SIGSTOP) still holds its session lock: nobody takes it over before its ttl
runs out, and the ttl rules as today. A lease that got the row but not the session
lock (its previous holder was still letting it go, or is paused past its ttl) works
as a ``liveness="ttl"`` lease.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import weakref
from typing import TYPE_CHECKING, Any, Callable

from sqlalchemy import MetaData, Table

from .._sql.statements import Prepared, Sent, Statements, prepare
from .._util.drivers import StatementFailed
from .._util.errors import translate
from . import ops as _ops
from .base import log
from .session_locks import file_lock, server_lock, server_relock, server_unlock
from .steps import Session, Sleep, Steps, Try, acquire_once, call

if TYPE_CHECKING:
    from .base import ModelCore
    from .options import LeaseOptions
    from .state import LeaseState

#: Suffix of the registry table's name (beside the lock table, in its schema).
REGISTRY_SUFFIX = "_live"
#: A grant taken without the session lock tries for it again this many times, this far
#: apart (seconds): the previous holder lets its session lock go just after its row.
RETRIES = 3
RETRY_PAUSE_S = 0.005
#: MariaDB's ``wait_timeout`` on a session-lock connection (seconds, its maximum): the
#: server must not close an idle holder's connection, which would free its lock.
_MYSQL_WAIT_TIMEOUT = 31_536_000


# -- the registry: key -> id, and the grant that holds the session lock ---------------


class _Registry:
    """A model's registry statements and what it read from them (kept per model)."""

    def __init__(self, model: ModelCore) -> None:
        table = model.table
        dialect = model.engine.dialect
        family = model.statements.family
        self.family = family
        self.name = f"{table.name}{REGISTRY_SUFFIX}"
        registry = Table(self.name, MetaData(), schema=table.schema)
        quoted = dialect.identifier_preparer.format_table(registry)
        self.quoted = quoted
        self.schema = table.schema

        def p(sql: str) -> Prepared:
            return prepare(dialect, sql)

        if family == "postgresql":
            ddl = "id SERIAL PRIMARY KEY, lock_key VARCHAR(512) NOT NULL UNIQUE, fence BIGINT"
            add = f"INSERT INTO {quoted} (lock_key) VALUES (:key) ON CONFLICT DO NOTHING"
            self.scope = p("SELECT CAST(CAST(CAST(:name AS regclass) AS oid) AS BIGINT)")
            self.lock = p("SELECT pg_try_advisory_lock(CAST(:lock AS BIGINT))")
            self.unlock = p("SELECT pg_advisory_unlock(CAST(:lock AS BIGINT))")
            self.probe = p("SELECT pg_backend_pid()")
            self.settle = p("SELECT set_config('idle_session_timeout', '0', false)")
        elif family == "mysql":
            ddl = (
                "id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, lock_key VARBINARY(512) "
                "NOT NULL, fence BIGINT NULL, UNIQUE KEY (lock_key)"
            )
            add = f"INSERT IGNORE INTO {quoted} (lock_key) VALUES (:key)"
            self.scope = p("SELECT COALESCE(:name, DATABASE())")
            self.lock = p("SELECT GET_LOCK(:lock, 0)")
            self.unlock = p("SELECT RELEASE_LOCK(:lock)")
            self.settle = p(f"SET SESSION wait_timeout = {_MYSQL_WAIT_TIMEOUT}")
        else:
            ddl = "id INTEGER PRIMARY KEY, lock_key TEXT NOT NULL UNIQUE, fence INTEGER"
            add = f"INSERT OR IGNORE INTO {quoted} (lock_key) VALUES (:key)"
        tail = " ENGINE=InnoDB" if family == "mysql" else ""
        self.create = p(f"CREATE TABLE IF NOT EXISTS {quoted} ({ddl}){tail}")
        self.add = p(add)
        self.find = p(f"SELECT id FROM {quoted} WHERE lock_key = :key")
        self.mark = p(f"UPDATE {quoted} SET fence = :fence WHERE id = :id")
        self.marked = p(f"SELECT fence FROM {quoted} WHERE id = :id")
        self.ready = False
        #: PostgreSQL: the registry's oid; MariaDB: the lock-name prefix.
        self.prefix: Any = None
        self.ids: dict[str, int] = {}

    def lock_ref(self, rid: int) -> int | str:
        """The session lock of the key whose registry id is ``rid``."""
        if self.family == "postgresql":
            value = (int(self.prefix) << 32) | rid
            return value - (1 << 64) if value >= 1 << 63 else value  # as a signed bigint
        if self.family == "mysql":
            return f"{self.prefix}:{rid}"
        return rid


_registries: weakref.WeakKeyDictionary[Any, _Registry] = weakref.WeakKeyDictionary()


def _registry(model: ModelCore) -> _Registry:
    found = _registries.get(model)
    if found is None:
        found = _registries[model] = _Registry(model)
    return found


def _key_id(st: Statements, reg: _Registry, key: str) -> Sent[int]:
    """The registry id of ``key`` (added when missing; the table made on first use)."""
    if not reg.ready:
        try:
            yield reg.create, {}
        except StatementFailed:
            # Made at the same moment by another process (PostgreSQL reports that as a
            # duplicate), or not ours to make: the reads below say whether it exists.
            log.debug("joblocks: creating %s failed; using it if it exists", reg.name)
        if reg.family == "postgresql":
            reg.prefix = int((yield reg.scope, {"name": reg.quoted}).scalar())
        elif reg.family == "mysql":
            database = str((yield reg.scope, {"name": reg.schema}).scalar())
            digest = hashlib.sha256(f"{database}\0{reg.name}".encode()).hexdigest()
            reg.prefix = f"joblocks:{digest[:40]}"
        reg.ready = True
    rows = (yield reg.find, {"key": key}).rows
    if not rows:
        yield reg.add, {"key": key}
        rows = (yield reg.find, {"key": key}).rows
    return int(rows[0][0])


def _mark(st: Statements, reg: _Registry, rid: int, fence: int | None) -> Sent[None]:
    yield reg.mark, {"id": rid, "fence": fence}


def _marked(st: Statements, reg: _Registry, rid: int) -> Sent[int | None]:
    value = (yield reg.marked, {"id": rid}).scalar()
    return None if value is None else int(value)


# -- the session lock on SQLite: an open file description lock ------------------------


def lock_file(database_file: str, table_name: str) -> str:
    """The lock file of a SQLite lock table's session locks (beside the database file)."""
    return f"{database_file}.{table_name}{REGISTRY_SUFFIX}.lock"


# -- one lease's session lock ------------------------------------------------------


class Live:
    """The session lock of one lease (or of one attempt to take a key)."""

    __slots__ = ("conn", "fd", "key", "lock", "locked", "model", "reg", "rid")

    def __init__(self, model: ModelCore, key: str) -> None:
        self.model = model
        self.key = key
        self.reg = _registry(model)
        self.rid: int | None = None
        self.lock: int | str | None = None
        self.conn: Any = None  # the face's connection for a server's session lock
        self.locked = False  # the session lock is held on ``conn``
        self.fd: int | None = None  # SQLite: the lock file's open file description

    @property
    def held(self) -> bool:
        return self.locked or self.fd is not None

    def hold(self) -> Steps[bool]:
        """Try to take the session lock, without waiting; True when held."""
        if self.held:
            return True
        model = self.model
        if self.rid is None:
            reg = self.reg
            rid = reg.ids.get(self.key)
            if rid is None:
                rid = yield from call(model, "liveness registry", _key_id, reg, self.key)
                reg.ids[self.key] = rid
            self.rid = rid
            self.lock = reg.lock_ref(rid)
        with translate("session lock", model.database):
            if self.reg.family == "sqlite":
                found = model._found
                watched = None if found is None else found.file
                if watched is None:
                    raise ValueError("liveness='session' needs a SQLite database file")
                self.fd = file_lock(lock_file(watched[0], model.table.name), self.rid)
                return self.fd is not None
            try:
                if self.conn is None:
                    self.conn, got = yield Session(server_lock, (self.reg, self.lock))
                else:
                    got = yield Session(server_relock, (self.reg, self.lock), self.conn)
            except BaseException:
                self.conn = None  # invalidated and closed by the face
                raise
            self.locked = bool(got)
            return self.locked

    def hold_again(self) -> Steps[bool]:
        """After a grant taken without the session lock: a few more tries, a few ms apart
        (the previous holder lets its session lock go just after its row)."""
        for _ in range(RETRIES):
            yield Sleep(RETRY_PAUSE_S)
            if (yield from self.hold()):
                return True
        return False

    def mark(self, fence: int | None) -> Steps[None]:
        """Name ``fence`` in the registry as the grant holding the session lock."""
        yield from call(self.model, "liveness registry", _mark, self.reg, self.rid, fence)

    def aim(self, key: str) -> None:
        """Point this (not held) session lock at another key: one place after the other
        of a counted lease (``_places.take_live``), on the same connection."""
        if key != self.key:
            assert not self.held  # noqa: S101 - let go first (``unhold``)
            self.key, self.rid, self.lock = key, None, None

    def unhold(self) -> Steps[None]:
        """Let the session lock go, keeping the connection for the next try."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.locked:
            self.locked = False
            try:
                yield Session(server_unlock, (self.reg, self.lock), self.conn)
            except BaseException:
                self.conn = None  # invalidated and closed by the face
                raise

    def take_over(
        self,
        holder: str,
        ttl_ms: int,
        again: Callable[[], Steps[_ops.Grant | None]] | None = None,
    ) -> Steps[_ops.Grant | None]:
        """Holding the session lock, with the row live: take the row over when its grant
        is the one the registry names (its holder held the session lock, so it died).
        ``again``: the acquire after it (default: a single lease's of the key)."""
        model = self.model
        row = yield from call(model, "peek", _ops.peek, self.key)
        if row is not None:
            marked = yield from call(model, "liveness registry", _marked, self.reg, self.rid)
            if row.fence != marked:
                return None  # a grant that never held the session lock: the ttl rules
            taken = yield from call(
                model, "take over", _ops.release_lease, self.key, row.holder, row.fence, 0, 0
            )
            if taken:
                log.info(
                    "joblocks: %r taken over from %r (token %d): its holder's session is gone",
                    self.key,
                    row.holder,
                    row.fence,
                )
        if again is not None:
            return (yield from again())
        return (yield from call(model, "acquire", _ops.acquire, self.key, holder, ttl_ms))

    def let_go(self) -> Steps[None]:
        """Let the session lock go (after the row); errors drop the connection instead."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.conn is not None:
            conn, self.conn = self.conn, None
            unlock = server_unlock if self.locked else None
            self.locked = False
            try:
                yield Session(unlock, (self.reg, self.lock), conn, close=True)
            except Exception as exc:
                # The face closed the connection (invalidated): the server ends the
                # session, and the lock with it. Nothing more to do; not the caller's error.
                log.warning("joblocks: unlocking the session lock of %r failed: %s", self.key, exc)


def release(lease: LeaseState, kept: bool) -> Steps[None]:
    """After a lease's row was released: its session lock goes too. ``kept``: the row
    stays for a min_hold, so the registry stops naming it first (not to be taken over)."""
    live: Live | None = lease._live
    if live is None:
        return
    try:
        if kept and live.held:
            yield from live.mark(None)
    finally:
        yield from live.let_go()


def granted(
    live: Live, grant: _ops.Grant | None, holder: str, ttl_ms: int
) -> Steps[_ops.Grant | None]:
    """After one acquire of a ``liveness="session"`` lease: take a dead holder's row
    over, or let the session lock go when the key stays taken; mark a grant held with
    its session lock in the registry. The grant, or None."""
    if grant is None:
        if live.held:
            grant = yield from live.take_over(holder, ttl_ms)
        if grant is None:
            if live.held:
                yield from live.let_go()
            return None
    elif not live.held and not (yield from live.hold_again()):
        log.debug("joblocks: %r granted without its session lock: ttl liveness", live.key)
        yield from live.let_go()  # the connection kept for the tries
    if live.held:
        yield from live.mark(grant.fence)
    return grant


#: A ``liveness="session"`` waiter looks again at least this often (seconds): a holder
#: whose process died is taken over within about this long.
POLL_S = 0.025


def take(model: ModelCore, key: str, opts: LeaseOptions, live: Live) -> Steps[Try]:
    """One try at a single lease of ``liveness="session"``: its session lock (without
    waiting), the acquire (shielded), then :func:`granted`."""
    holder = opts.holder
    yield from live.hold()
    got = yield from acquire_once(model, key, holder, opts.ttl_ms)
    return Try((yield from granted(live, got.grant, holder, opts.ttl_ms)), key)


def abandon(live: Live) -> Steps[None]:
    """Let the session lock go after a failed attempt, never raising over its error."""
    try:
        yield from live.let_go()
    except Exception as exc:
        log.debug("joblocks: letting the session lock of %r go failed: %s", live.key, exc)
