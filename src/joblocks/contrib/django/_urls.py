"""A SQLAlchemy URL from one entry of Django's ``DATABASES`` (no Django import needed)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from sqlalchemy import URL

from ..._sql.dialects import profile

#: Django ENGINE suffix -> the joblocks (SQLAlchemy) backend name.
_BACKENDS = {
    "sqlite3": "sqlite",
    "spatialite": "sqlite",
    "postgresql": "postgresql",
    "postgresql_psycopg2": "postgresql",
    "postgis": "postgresql",
    "mysql": "mysql",
}

#: OPTIONS that configure Django's own connection handling, not the driver's connect().
_DJANGO_ONLY_OPTIONS = frozenset(
    {
        "isolation_level",
        "server_side_binding",
        "pool",
        "assume_role",
        "cursor_factory",
        "autocommit",
        "transaction_mode",
    }
)

#: The only OPTIONS passed on for SQLite (the rest belong to Django's sqlite3 backend).
_SQLITE_OPTIONS = frozenset({"timeout"})


def backend_of(engine: str) -> str:
    """``sqlite``, ``postgresql`` or ``mysql`` for a Django ``ENGINE`` path.

    Raises ``ValueError`` for a database joblocks does not support (Oracle, ...).
    """
    suffix = engine.rsplit(".", 1)[-1]
    backend = _BACKENDS.get(suffix)
    if backend is None:
        raise ValueError(
            f"ENGINE {engine!r} is not supported by joblocks (use SQLite, PostgreSQL or MariaDB)"
        )
    return backend


def url_from_settings(settings_dict: Mapping[str, Any]) -> URL:
    """The SQLAlchemy URL of one Django database entry (``DATABASES[alias]``).

    Uses ``ENGINE``, ``NAME``, ``USER``, ``PASSWORD``, ``HOST``, ``PORT`` and the
    driver-level entries of ``OPTIONS`` (those that only configure Django's own
    connection handling, such as ``isolation_level`` or ``pool``, are left out). A
    ``HOST`` starting with ``/`` is a Unix socket directory (PostgreSQL) or socket
    file (MariaDB). The driver is the one joblocks picks for the backend: psycopg 3
    for PostgreSQL, PyMySQL for MariaDB.
    """
    backend = backend_of(str(settings_dict.get("ENGINE") or ""))
    options = dict(settings_dict.get("OPTIONS") or {})
    name = settings_dict.get("NAME")
    if profile(backend).single_file:
        return _sqlite_url(name, options)
    query: dict[str, str] = {}
    host = _text(settings_dict.get("HOST"))
    if host is not None and host.startswith("/"):
        query["host" if backend == "postgresql" else "unix_socket"] = host
        host = None
    port = _text(settings_dict.get("PORT"))
    for option, value in options.items():
        if option in _DJANGO_ONLY_OPTIONS:
            continue
        if option == "ssl" and isinstance(value, Mapping):
            # mysqlclient's ssl={"ca": ...} is ssl_ca=... in SQLAlchemy's MySQL URL.
            query.update({f"ssl_{k}": str(v) for k, v in value.items() if _is_scalar(v)})
        elif _is_scalar(value):
            query[option] = _scalar(value)
    return URL.create(
        backend,
        username=_text(settings_dict.get("USER")),
        password=_text(settings_dict.get("PASSWORD")),
        host=host,
        port=int(port) if port is not None else None,
        database=_text(name),
        query=query,
    )


def _sqlite_url(name: object, options: Mapping[str, Any]) -> URL:
    query = {k: _scalar(v) for k, v in options.items() if k in _SQLITE_OPTIONS and _is_scalar(v)}
    database = (
        ""
        if name is None
        else os.fsdecode(name)
        if isinstance(name, (bytes, os.PathLike))
        else str(name)
    )
    if database.startswith("file:"):
        # Django opens NAME as a URI when it starts with "file:" (its test databases do).
        path, _, params = database.partition("?")
        for pair in params.split("&") if params else ():
            key, _, value = pair.partition("=")
            query[key] = value
        query["uri"] = "true"
        database = path
    return URL.create("sqlite", database=database, query=query)


def _text(value: object) -> str | None:
    if value is None or value == "":
        return None
    return str(value)


def _is_scalar(value: object) -> bool:
    return isinstance(value, (str, int, float))


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
