"""``configure()`` and ``get_model()`` for the asyncio face: the default and named lock
databases (public in ``joblocks.aio``); the mirror of ``_sync.config``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from .._core.base import Database
from .._core.registry import Registry, check_options
from .model import JobLockModel


def _make_async(database: Database, **options: Any) -> JobLockModel:
    return JobLockModel(database, **options)


_disposing: set[asyncio.Task[None]] = set()


def _dispose_later(model: JobLockModel) -> None:
    if not model.owns_engine:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        # No loop: its connections belong to a loop that is gone; drop the pool.
        model.engine.sync_engine.dispose(close=False)
        return
    task = loop.create_task(model.dispose())
    _disposing.add(task)
    task.add_done_callback(_disposing.discard)


_registry: Registry[JobLockModel] = Registry(
    _make_async, _dispose_later, face="asyncio", fallback="sync"
)


def configure(
    default: Database = None,
    *,
    instances: Mapping[str, Database] | None = None,
    **options: Any,
) -> None:
    """Say where the locks live for asyncio; see :func:`joblocks.configure`.

    Until this is called, the asyncio face uses the URLs given to
    ``joblocks.configure`` (engines are not shared between faces), else
    ``JOBLOCKS_URL``, else the per-user SQLite file. Replacing a configuration
    disposes the engines joblocks made for the old one in the background.
    """
    _registry.configure(default, instances, check_options(options))


def get_model(name: str | None = None) -> JobLockModel:
    """The asyncio model of the default database, or of instance ``name``."""
    return _registry.get(name)
