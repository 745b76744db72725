"""joblocks for Django: locks in your project's database, a migration, a command decorator.

Add the app and migrate::

    INSTALLED_APPS = [..., "joblocks.contrib.django"]
    JOBLOCKS_DATABASE = "default"          # the DATABASES alias holding the lock table

    $ python manage.py migrate joblocks

then keep a management command to one running instance::

    from django.core.management.base import BaseCommand
    from joblocks.contrib.django import single_instance_command

    class Command(BaseCommand):
        @single_instance_command(ttl=30 * 60 * 1000)    # key: the command's name
        def handle(self, *args, **options):
            ...

Settings: ``JOBLOCKS_DATABASE`` (alias, default ``"default"``), ``JOBLOCKS_OPTIONS``
(model options: ``table_name``, ``schema``, ``create_table``, ``errors_as_taken``,
``acquire_path``, ``record``: the run ledger) and ``JOBLOCKS_CONFIGURE`` (default
True: at start-up the app makes that database joblocks's default, so
``joblocks.run_with_lock`` uses it too).

Django is imported only when these functions run, so :mod:`joblocks.contrib.django`
itself imports without configured settings.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import URL

from ... import JobLockModel
from .. import _support
from ._urls import url_from_settings
from .decorators import single_instance_command

__all__ = [
    "DEFAULT_ALIAS",
    "configure",
    "database_alias",
    "database_url",
    "get_model",
    "model_options",
    "single_instance_command",
    "url_from_settings",
]

#: The ``DATABASES`` alias used when ``JOBLOCKS_DATABASE`` is not set.
DEFAULT_ALIAS = "default"

_models: dict[tuple[str, tuple[tuple[str, Any], ...]], JobLockModel] = {}
_models_lock = threading.Lock()


def _settings() -> Any:
    from django.conf import settings  # type: ignore[import-untyped, unused-ignore]

    return settings


def database_alias() -> str:
    """The ``DATABASES`` alias of the lock table: ``settings.JOBLOCKS_DATABASE``."""
    alias = getattr(_settings(), "JOBLOCKS_DATABASE", DEFAULT_ALIAS)
    if not isinstance(alias, str) or not alias:
        raise TypeError(f"JOBLOCKS_DATABASE must be a non-empty str, got {alias!r}")
    return alias


def model_options() -> dict[str, Any]:
    """The model options of ``settings.JOBLOCKS_OPTIONS`` (checked), as keyword arguments."""
    options = getattr(_settings(), "JOBLOCKS_OPTIONS", None) or {}
    if not isinstance(options, dict):
        raise TypeError(f"JOBLOCKS_OPTIONS must be a dict, not {type(options).__name__}")
    return _support.check_options(options)


def database_url(alias: str | None = None) -> URL:
    """The SQLAlchemy URL of Django's database ``alias`` (default: ``JOBLOCKS_DATABASE``).

    Read from the live connection settings, so under Django's test runner it names the
    test database once the runner has created it.
    """
    from django.db import connections  # type: ignore[import-untyped, unused-ignore]

    name = alias if alias is not None else database_alias()
    return url_from_settings(connections[name].settings_dict)


def get_model(alias: str | None = None) -> JobLockModel:
    """The :class:`~joblocks.JobLockModel` of Django's database ``alias``.

    One model per database URL and options, made on first use and kept for the life
    of the process (its engine is fork-safe).
    """
    url = database_url(alias)
    options = model_options()
    cache_key = (url.render_as_string(hide_password=False), tuple(sorted(options.items())))
    with _models_lock:
        model = _models.get(cache_key)
        if model is None:
            model = JobLockModel(url, **options)
            _models[cache_key] = model
        return model


def configure(alias: str | None = None) -> None:
    """Make Django's database ``alias`` joblocks's default (:func:`joblocks.configure`).

    The app calls this at start-up unless ``JOBLOCKS_CONFIGURE = False``. Call it again
    after Django's test runner has set up the test database to move the default there.
    """
    _support.configure(database_url(alias), **model_options())
