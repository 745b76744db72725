"""Test your own jobs: a throwaway lock database, and assertions about locks.

With pytest, the plugin :mod:`joblocks.pytest_plugin` gives each test a
``joblocks_model`` fixture: a :class:`~joblocks.JobLockModel` on a new SQLite file
that is joblocks's default for the test (``joblocks.get_model()``,
``joblocks.run_with_lock`` and the asyncio face use it), restored afterwards::

    from joblocks.testing import assert_locked, assert_not_locked

    def test_report_takes_its_lock(joblocks_model):
        with joblocks.lease("report", 60_000):
            assert_locked("report")
            assert run_report() is False       # your job skips while it is held
        assert_not_locked("report")

Without pytest, :func:`temporary_model` does the same as a context manager.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._core.registry import Registry, check_options
from ._db.connections import JobLock
from ._sync import run as _run
from ._sync.model import JobLockModel

__all__ = ["assert_locked", "assert_not_locked", "temporary_model"]


@contextlib.contextmanager
def temporary_model(
    directory: str | os.PathLike[str] | None = None,
    *,
    configure: bool = True,
    **options: Any,
) -> Iterator[JobLockModel]:
    """A :class:`~joblocks.JobLockModel` on a new SQLite file, for one test.

    The file is made in ``directory`` (default: a temporary directory removed on
    exit). With ``configure=True`` the model is joblocks's default while the block
    runs — ``joblocks.get_model()`` returns it, ``joblocks.aio`` uses its URL — and the
    configuration from before (models included, undisposed) is restored on exit.
    ``options`` are model options (``table_name``, ``acquire_path``, ...).
    """
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="joblocks-"))
        path = Path(directory) / f"joblocks-{uuid.uuid4().hex[:12]}.db"
        model = JobLockModel(f"sqlite:///{path}", **options)
        stack.callback(model.dispose)
        if configure:
            stack.enter_context(_as_default(model, check_options(options)))
        yield model


@contextlib.contextmanager
def _as_default(model: JobLockModel, options: dict[str, Any]) -> Iterator[None]:
    """Make ``model`` the default of both faces; put the previous state back after."""
    sync_registry = _run.sync_registry
    saved_sync = _swap(sync_registry, {None: model.engine.url}, options, {None: model})
    aio_before = _aio_registry()
    saved_aio = _swap(aio_before, None, {}, {}) if aio_before is not None else None
    try:
        yield
    finally:
        made = _swap(sync_registry, *saved_sync)[2]
        for other in made.values():
            if other is not model:
                sync_registry._dispose(other)
        aio_after = _aio_registry()  # joblocks.aio may have been imported meanwhile
        if aio_after is not None:
            state: tuple[Any, dict[str, Any], dict[Any, Any]] = (
                saved_aio if saved_aio is not None else (None, {}, {})
            )
            for other in _swap(aio_after, *state)[2].values():
                aio_after._dispose(other)


def _aio_registry() -> Registry[Any] | None:
    aio = sys.modules.get("joblocks.aio")
    registry: Registry[Any] | None = getattr(aio, "_registry", None)
    return registry


def _swap(
    registry: Registry[Any],
    specs: dict[str | None, Any] | None,
    options: dict[str, Any],
    models: dict[str | None, Any],
) -> tuple[Any, dict[str, Any], dict[Any, Any]]:
    """Replace a registry's configuration and models as one step; return the old ones."""
    with registry._lock:
        old = (registry._specs, registry._options, registry._models)
        registry._specs, registry._options, registry._models = specs, options, models
    return old


def assert_locked(
    key: str, model: JobLockModel | None = None, holder: str | None = None
) -> JobLock:
    """Assert that ``key`` is held (its lease has not expired), by ``holder`` if given;
    return its row.

    ``model`` defaults to ``joblocks.get_model()`` (the ``joblocks_model`` fixture's
    model during a test that uses it). Raises ``AssertionError`` saying what was found.
    """
    row = (model if model is not None else _run.get_model()).peek(key)
    if row is None:
        raise AssertionError(f"lock {key!r} is not held: no row")
    if row.expired:
        raise AssertionError(
            f"lock {key!r} is not held: the lease of {row.holder!r} expired "
            f"{(row.read_at - row.expires_at).total_seconds() * 1000:.0f} ms ago"
        )
    if holder is not None and row.holder != holder:
        raise AssertionError(f"lock {key!r} is held by {row.holder!r}, not by {holder!r}")
    return row


def assert_not_locked(key: str, model: JobLockModel | None = None) -> None:
    """Assert that nobody holds ``key``: no row, or only an expired lease.

    ``model`` defaults to ``joblocks.get_model()``. Raises ``AssertionError`` naming
    the holder and the time left when the lock is held.
    """
    row = (model if model is not None else _run.get_model()).peek(key)
    if row is not None and not row.expired:
        raise AssertionError(
            f"lock {key!r} is held by {row.holder!r} for another "
            f"{row.remaining.total_seconds() * 1000:.0f} ms (fence {row.fence})"
        )
