"""``configure()`` and ``get_model()``: the default and named lock databases."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._core.base import Database
from .._core.registry import Registry, check_options
from .model import JobLockModel


def _make_sync(database: Database, **options: Any) -> Any:
    return JobLockModel(database, **options)


sync_registry: Registry[Any] = Registry(_make_sync, lambda model: model.dispose(), face="sync")


def configure(
    default: Database = None,
    *,
    instances: Mapping[str, Database] | None = None,
    **options: Any,
) -> None:
    """Say where the locks live.

    ``default`` is a URL or an ``Engine`` (None: ``JOBLOCKS_URL``, else the per-user
    SQLite file); ``instances`` maps names to more databases, for
    ``get_model("name")``. ``options`` (``table_name``, ``schema``, ``create_table``,
    ``errors_as_taken``, ``acquire_path``, ``timeout`` in milliseconds or a
    ``timedelta``, ``record`` for the run ledger) apply to every model, as in
    :class:`joblocks.JobLockModel`. URLs and
    options are checked here: a string that is not a database URL, a database
    joblocks does not support or an unknown ``acquire_path`` raises now (a
    ``ValueError`` naming the argument; URL errors are also ``LockBackendError``). A
    later call replaces this one and disposes the engines joblocks made for it. The
    asyncio face uses the same URLs unless ``joblocks.aio.configure`` is called.
    """
    sync_registry.configure(default, instances, check_options(options))


def get_model(name: str | None = None) -> Any:
    """The model of the default database, or of the instance ``name``."""
    return sync_registry.get(name)
