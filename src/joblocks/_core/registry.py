"""The models of ``configure()``/``get_model()``, by instance name, for both faces.

Each face has one :class:`Registry` (``_sync.run``, ``_async.run``) that makes
its models on first use from the databases configured. Until ``joblocks.aio.configure``
is called, the asyncio face's registry uses the URLs given to ``joblocks.configure``:
it finds the sync face's registry by name, so neither face imports the other.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Callable, Generic, TypeVar

from sqlalchemy import URL, Engine

from .._db import engines as _engines
from .._db.engines import is_async_engine
from .._sql.dialects import profile
from .._sql.statements import ACQUIRE_PATHS
from .._util import validate as _validate
from .base import Database, wrong_face
from .options import check_record

M = TypeVar("M")


def _is_spec(value: object) -> bool:
    return isinstance(value, (str, URL, Engine)) or is_async_engine(value)


#: The registries of the faces, by face (``"sync"``, ``"asyncio"``), once made.
_FACES: dict[str, Registry[Any]] = {}


class Registry(Generic[M]):
    """Models by instance name, made on first use from the configured databases."""

    def __init__(
        self,
        factory: Callable[..., M],
        dispose: Callable[[M], None],
        *,
        face: str | None = None,
        fallback: str | None = None,
    ) -> None:
        self._factory = factory
        self._dispose = dispose
        # The face whose configuration this one falls back on until configured itself:
        # found by its name (``face=``) when asked, so neither face imports the other.
        self._fallback = fallback
        if face is not None:
            _FACES[face] = self
        self._lock = threading.Lock()
        self._specs: dict[str | None, Database] | None = None
        self._options: dict[str, Any] = {}
        self._models: dict[str | None, M] = {}

    def configure(
        self,
        default: Database = None,
        instances: Mapping[str, Database] | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        if default is not None and not _is_spec(default):
            raise TypeError(
                "default must be a URL string, a sqlalchemy URL, an Engine or None, "
                f"not {type(default).__name__}"
            )
        specs: dict[str | None, Database] = {None: default}
        _check_url(default, "default", options or {})
        for name, spec in (instances or {}).items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"instances: names must be non-empty str, got {name!r}")
            if not _is_spec(spec):
                raise TypeError(
                    f"instances[{name!r}] must be a URL string, a sqlalchemy URL or an "
                    f"Engine, not {type(spec).__name__}"
                )
            _check_url(spec, f"instances[{name!r}]", options or {})
            specs[name] = spec
        with self._lock:
            old = self._models
            self._specs, self._options, self._models = specs, dict(options or {}), {}
        for model in old.values():
            self._dispose(model)

    def url_specs(self) -> tuple[dict[str | None, Database], dict[str, Any]] | None:
        """The configured URLs (not engines), for the other face to fall back on."""
        with self._lock:
            if self._specs is None:
                return None
            urls: dict[str | None, Database] = {
                k: v
                for k, v in self._specs.items()
                if not (isinstance(v, Engine) or is_async_engine(v))
            }
            return urls, dict(self._options)

    def get(self, name: str | None = None) -> M:
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"name must be a non-empty str or None, got {name!r}")
        with self._lock:
            model = self._models.get(name)
            if model is not None:
                return model
            specs, options = self._specs, self._options
            other = None if self._fallback is None else _FACES.get(self._fallback)
            if specs is None and other is not None:
                fallback = other.url_specs()
                if fallback is not None:
                    specs, options = fallback
            if specs is None:
                specs = {None: None}
            if name not in specs:
                known = sorted(n for n in specs if n is not None)
                raise LookupError(
                    f"no joblocks instance named {name!r} is configured (known: {known})"
                )
            model = self._factory(specs[name], **options)
            self._models[name] = model
            return model


_OPTIONS = (
    "table_name",
    "schema",
    "create_table",
    "errors_as_taken",
    "acquire_path",
    "timeout",
    "record",
    "runs_table_name",
)


def _check_url(spec: Database, name: str, options: Mapping[str, Any]) -> None:
    """Refuse at ``configure()`` what the first use would refuse: a string that is not
    a database URL, a database joblocks does not support, an acquire path the
    database does not offer."""
    if isinstance(spec, (str, URL)):
        url = _engines._parse(spec, name)
        _engines.check_backend(url, name)
        backend = url.get_backend_name()
    elif isinstance(spec, Engine) or is_async_engine(spec):
        backend = spec.dialect.name
    else:
        return
    path = options.get("acquire_path")
    if path is not None:
        offered = profile(backend).acquire_paths
        if path not in offered:
            raise ValueError(f"acquire_path must be one of {offered} on {backend}, got {path!r}")


def check_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Model options given to ``configure``: known names, valid identifiers."""
    for name in options:
        if name not in _OPTIONS:
            raise _validate.unknown_keyword("configure()", name, _OPTIONS, "option")
    if "table_name" in options:
        _validate.identifier(options["table_name"], "table_name", _validate.MAX_TABLE_NAME)
    if options.get("runs_table_name") is not None:
        _validate.identifier(
            options["runs_table_name"], "runs_table_name", _validate.MAX_TABLE_NAME
        )
    if options.get("schema") is not None:
        _validate.identifier(options["schema"], "schema")
    for flag in ("create_table", "errors_as_taken"):
        if flag in options and not isinstance(options[flag], bool):
            raise TypeError(f"{flag} must be a bool, not {type(options[flag]).__name__}")
    path = options.get("acquire_path")
    if path is not None and path not in ACQUIRE_PATHS:
        raise ValueError(f"acquire_path must be one of {ACQUIRE_PATHS}, got {path!r}")
    if options.get("timeout") is not None:
        _validate.duration_ms(options["timeout"], "timeout")
    if "record" in options:
        check_record(options["record"])
    return dict(options)


def resolve_model(model: object, expected: type[M], default: Callable[[], M], name: str) -> M:
    """``model``, or the default model when None; a ``TypeError`` naming ``name`` when it
    is a model of the other face (or not a model at all)."""
    if model is None:
        return default()
    if not isinstance(model, expected):
        raise wrong_face(model, name)
    return model
