"""The session locks of ``liveness="session"`` (see ``_core.liveness``), one primitive per
kind: on a server, a lock of a connection the lease keeps for itself (PostgreSQL
``pg_try_advisory_lock``, MariaDB ``GET_LOCK`` with no wait), checked once per
connection to reach the server directly and never to be closed for idling; on SQLite,
an open file description lock on one byte of a lock file, which the kernel drops with
the process."""

from __future__ import annotations

import os
import struct
from typing import Any, Protocol

from sqlalchemy import Connection

from .._db.execute import execute
from .._sql.dialects import galera
from .._sql.statements import Prepared, Statements
from .._util.errors import LockBackendError
from .._util.validate import mask_url


class _Registry(Protocol):
    """The session-lock statements of a model (``_core.liveness``'s registry of keys)."""

    family: str
    lock: Prepared
    unlock: Prepared
    probe: Prepared
    settle: Prepared


def server_lock(conn: Connection, st: Statements, reg: _Registry, lock: int | str) -> bool:
    """On a connection of the lease's own: check (once per driver connection) that it
    reaches the server directly and is never closed for idling, then try the session
    lock (never waits); True when taken."""
    info = conn.connection.info
    if not info.get(_READY):
        _set_up(conn, reg)
        info[_READY] = True
    return server_relock(conn, st, reg, lock)


#: Key in a pooled connection's ``info``: it was checked and set up for session locks.
_READY = "joblocks_session_locks"


def _set_up(conn: Connection, reg: _Registry) -> None:
    if reg.family == "postgresql":
        pid = int(execute(conn, reg.probe, {}).scalar())
        dbapi: Any = conn.connection.dbapi_connection
        told = getattr(dbapi, "driver_connection", dbapi).info.backend_pid
        if pid != told:
            raise LockBackendError(
                "liveness='session'",
                mask_url(conn.engine.url),
                "a connection pooler (e.g. PgBouncer) sits between joblocks and PostgreSQL "
                f"(the server runs this session in backend {pid}, the connection was told "
                f"{told}): a session-level lock needs a connection of its own to the "
                "server, which a transaction-mode pooler does not give. Connect directly, "
                "or use liveness='ttl'",
            )
        if (conn.dialect.server_version_info or (0,)) >= (14,):
            execute(conn, reg.settle, {})
    else:
        if galera(conn):
            raise LockBackendError(
                "liveness='session'",
                conn.engine.url.render_as_string(hide_password=True),
                "the server is a node of a MariaDB Galera cluster (wsrep_on is ON): "
                "GET_LOCK holds only on the node it was taken on, so a holder on another "
                "node would not see it and would take the lease over. Use liveness='ttl'",
            )
        execute(conn, reg.settle, {})


def server_relock(conn: Connection, st: Statements, reg: _Registry, lock: int | str) -> bool:
    """Try the session lock again on a connection :func:`server_lock` set up."""
    return bool(execute(conn, reg.lock, {"lock": lock}).scalar())


def server_unlock(conn: Connection, st: Statements, reg: _Registry, lock: int | str) -> None:
    execute(conn, reg.unlock, {"lock": lock})


def file_lock(path: str, offset: int) -> int | None:
    """An open file description holding a write lock on byte ``offset``, or None when
    another open file description (of any process, this one included) holds it."""
    import fcntl

    ofd = getattr(fcntl, "F_OFD_SETLK", None)
    if ofd is None:
        raise OSError("liveness='session' on SQLite needs open file description locks (Linux)")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks).
    request = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0)
    try:
        fcntl.fcntl(fd, ofd, request)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (11, 13):  # EAGAIN, EACCES: held by another
            return None
        raise
    return fd
