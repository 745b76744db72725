"""The SQLAlchemy internals joblocks relies on (``joblocks._util.drivers``) exist, behave as
joblocks assumes, and the installed SQLAlchemy is in the range ``pyproject.toml`` allows.

These fail loudly, each naming the missing piece, when a SQLAlchemy release renames or
drops one of them: upgrade the seam in ``_drivers.py`` (and the range) together.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from sqlalchemy import create_engine, event, text
from sqlalchemy.pool import QueuePool

from joblocks._util import drivers as _drivers

ROOT = Path(__file__).resolve().parents[3]


def _pyproject_range() -> SpecifierSet:
    found = re.search(r'"sqlalchemy([^"]*)"', (ROOT / "pyproject.toml").read_text())
    assert found, "pyproject.toml names no sqlalchemy requirement"
    return SpecifierSet(found.group(1))


def test_installed_sqlalchemy_is_in_the_supported_range() -> None:
    installed = Version(sqlalchemy.__version__)
    allowed = _pyproject_range()
    assert installed in allowed, f"SQLAlchemy {installed} is outside pyproject's {allowed}"
    low = Version(".".join(map(str, _drivers.SUPPORTED_MIN)))
    below = Version(".".join(map(str, _drivers.SUPPORTED_BELOW)))
    assert low <= installed < below, (
        f"SQLAlchemy {installed} is outside the range joblocks._util.drivers was checked against "
        f"(>={low}, <{below}): check every seam, then move the range"
    )
    # The seam's lower bound is pyproject's lower bound.
    assert low in allowed
    assert Version(str(low).rsplit(".", 1)[0] + "." + str(low.micro - 1)) not in allowed


def test_pool_invalidate_signature() -> None:
    signature = inspect.signature(QueuePool._invalidate)
    assert list(signature.parameters)[:3] == ["self", "connection", "exception"]
    assert "_checkin" in signature.parameters


def test_pool_invalidate_replaces_older_connections(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'seam.db'}", poolclass=QueuePool)
    try:
        with engine.connect() as conn:
            first = conn.connection.dbapi_connection
            _drivers.invalidate_pool(conn, RuntimeError("gone"))
            conn.invalidate()
        with engine.connect() as conn:
            assert conn.connection.dbapi_connection is not first
    finally:
        engine.dispose()


def test_dbapi_error_is_the_drivers_base_exception(tmp_path: Path) -> None:
    import sqlite3

    engine = create_engine(f"sqlite:///{tmp_path / 'seam.db'}")
    try:
        assert _drivers.dbapi_error(engine.dialect) is sqlite3.Error
    finally:
        engine.dispose()


def test_checkout_proxy_leads_to_the_dialect(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'seam.db'}")
    seen: list[Any] = []

    def on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        seen.append(_drivers.checkout_dialect(proxy))

    event.listen(engine.pool, "checkout", on_checkout)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        assert seen == [engine.dialect]
    finally:
        engine.dispose()


def test_overflow_counts_what_queuepool_opened(tmp_path: Path) -> None:
    engine = create_engine(
        f"sqlite:///{tmp_path / 'seam.db'}", poolclass=QueuePool, pool_size=1, max_overflow=2
    )
    try:
        assert _drivers.overflow(engine.pool) == (2, -1)  # none opened yet: -pool_size
        with engine.connect(), engine.connect():
            assert _drivers.overflow(engine.pool) == (2, 1)
        unlimited = create_engine(f"sqlite:///{tmp_path / 'u.db'}", max_overflow=-1)
        assert _drivers.overflow(unlimited.pool) is None
        unlimited.dispose()
    finally:
        engine.dispose()


@pytest.mark.skipif(sys.version_info < (3, 9), reason="asyncio face")
def test_greenlet_spawn_runs_sync_code_that_awaits(tmp_path: Path) -> None:
    pytest.importorskip("greenlet")
    pytest.importorskip("aiosqlite")
    from sqlalchemy.ext.asyncio import create_async_engine

    async def main() -> int:
        engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'seam.db'}")
        try:

            def work(value: int) -> int:
                with engine.sync_engine.connect() as conn:
                    return int(conn.execute(text("SELECT :v"), {"v": value}).scalar())

            return int(await _drivers.greenlet_spawn(work, 41)) + 1
        finally:
            await engine.dispose()

    assert asyncio.run(main()) == 42


@pytest.mark.skipif(sys.version_info < (3, 9), reason="asyncio face")
def test_aiosqlite_connection_and_its_thread_are_reachable(tmp_path: Path) -> None:
    pytest.importorskip("greenlet")
    pytest.importorskip("aiosqlite")
    import sqlite3
    import threading

    from sqlalchemy.ext.asyncio import create_async_engine

    async def main() -> tuple[bool, bool, int, int]:
        engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'seam.db'}")
        try:
            assert _drivers.hands_off_per_statement(engine.sync_engine.dialect)

            def work() -> tuple[bool, bool, int, int]:
                with engine.sync_engine.connect() as conn:
                    adapted = conn.connection.dbapi_connection
                    raw = _drivers.driver_connection(adapted)

                    def on_thread(driver_connection: Any) -> tuple[int, int]:
                        value = driver_connection.execute("SELECT 41 + 1").fetchone()[0]
                        return threading.get_ident(), int(value)

                    tid, value = _drivers.on_driver_thread(adapted, on_thread)
                    return (
                        isinstance(raw, sqlite3.Connection),
                        tid != threading.get_ident(),
                        value,
                        int(raw.execute("SELECT 1").fetchone()[0]),
                    )

            result: tuple[bool, bool, int, int] = await _drivers.greenlet_spawn(work)
            return result
        finally:
            await engine.dispose()

    assert asyncio.run(main()) == (True, True, 42, 1)
    assert not _drivers.hands_off_per_statement(create_engine("sqlite://").dialect)


def test_binary_type_is_what_reflection_gives_varbinary() -> None:
    from sqlalchemy.dialects.mysql import VARBINARY
    from sqlalchemy.types import LargeBinary

    assert issubclass(VARBINARY, _drivers.BinaryType)
    assert issubclass(LargeBinary, _drivers.BinaryType)


def test_no_other_module_reaches_into_sqlalchemy_privates() -> None:
    """Every private SQLAlchemy name joblocks uses goes through ``_sqla``."""
    private = re.compile(
        r"\._invalidate\(|\._max_overflow|\._overflow\b|\._pool\._dialect|"
        r"loaded_dbapi|sqltypes import _|from sqlalchemy\.util import"
    )
    offenders = []
    for path in sorted((ROOT / "src" / "joblocks").rglob("*.py")):
        if path.name == "drivers.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if private.search(line) and "_sqla" not in line:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
