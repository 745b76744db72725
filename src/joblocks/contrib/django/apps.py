"""The Django app of joblocks: settings checks, and the default database at start-up."""

from __future__ import annotations

import logging
from typing import Any

from django.apps import AppConfig  # type: ignore[import-untyped, unused-ignore]
from django.core import checks  # type: ignore[import-untyped, unused-ignore]

log = logging.getLogger("joblocks")


class JoblocksConfig(AppConfig):  # type: ignore[misc, unused-ignore]
    """``joblocks.contrib.django``: the lock table's migration and settings checks."""

    name = "joblocks.contrib.django"
    label = "joblocks"
    verbose_name = "joblocks"

    def ready(self) -> None:
        """Register the settings check; make the lock database joblocks's default."""
        checks.register(check_settings)
        from django.conf import settings  # type: ignore[import-untyped, unused-ignore]

        if not getattr(settings, "JOBLOCKS_CONFIGURE", True):
            return
        from . import configure

        try:
            configure()
        except Exception as exc:  # reported by the check, not at import time
            log.debug("joblocks: not configured from DATABASES: %s", exc)


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """Django system check: ``JOBLOCKS_DATABASE`` names a usable database."""
    from django.conf import settings  # type: ignore[import-untyped, unused-ignore]

    from ..._sql.dialects import profile
    from . import database_alias, model_options
    from ._urls import backend_of

    errors: list[Any] = []
    try:
        alias = database_alias()
        model_options()
    except (TypeError, ValueError) as exc:
        return [checks.Error(str(exc), id="joblocks.E001")]
    entry = settings.DATABASES.get(alias)
    if entry is None:
        return [
            checks.Error(
                f"JOBLOCKS_DATABASE names {alias!r}, which is not in DATABASES",
                id="joblocks.E002",
            )
        ]
    try:
        backend = backend_of(str(entry.get("ENGINE") or ""))
    except ValueError as exc:
        return [checks.Error(f"DATABASES[{alias!r}]: {exc}", id="joblocks.E003")]
    name = str(entry.get("NAME") or "")
    if profile(backend).single_file and (name in ("", ":memory:") or "mode=memory" in name):
        errors.append(
            checks.Error(
                f"DATABASES[{alias!r}] is an in-memory SQLite database, which cannot "
                "exclude anything across processes",
                hint="Use a database file, or another JOBLOCKS_DATABASE.",
                id="joblocks.E004",
            )
        )
    return errors
