"""Bad input: a precise TypeError/ValueError naming the argument, before any database work."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy

import joblocks
import joblocks.aio

BAD_KEYS: list[tuple[Any, type[Exception], str]] = [
    ("", ValueError, "empty"),
    ("   ", ValueError, "whitespace"),
    ("\t\n", ValueError, "whitespace"),
    ("a\x00b", ValueError, "NUL"),
    ("x" * 513, ValueError, "513 bytes"),
    ("é" * 257, ValueError, "514 bytes"),
    ("\ud800", ValueError, "surrogate"),
    (None, TypeError, "str"),
    (b"job", TypeError, "bytes"),
    (42, TypeError, "int"),
]

BAD_TTLS: list[tuple[Any, type[Exception]]] = [
    (0, ValueError),
    (-1, ValueError),
    (-0.5, ValueError),
    (math.nan, ValueError),
    (math.inf, ValueError),
    (-math.inf, ValueError),
    (366 * 24 * 3600 * 1000 + 1, ValueError),
    (timedelta(0), ValueError),
    (timedelta(days=400), ValueError),
    (timedelta(seconds=-1), ValueError),
    (True, TypeError),
    (False, TypeError),
    ("30000", TypeError),
    (None, TypeError),
]


@pytest.fixture
def unreachable_model() -> joblocks.JobLockModel:
    """A model whose database would fail on first contact: any DB work would raise."""
    return joblocks.JobLockModel("postgresql://u:secret@127.0.0.1:1/db")


@pytest.mark.parametrize(("bad", "exc", "_why"), BAD_KEYS)
def test_bad_keys(unreachable_model: joblocks.JobLockModel, bad: Any, exc: type, _why: str) -> None:
    with pytest.raises(exc, match="lock_key"):
        unreachable_model.acquire(bad, 1000, "w1")
    with pytest.raises(exc, match="lock_key"):
        unreachable_model.peek(bad)
    with pytest.raises(exc, match="lock_key"):
        joblocks.run_with_lock(bad, 1000, lambda: None, model=unreachable_model)


@pytest.mark.parametrize(("bad", "exc"), BAD_TTLS)
def test_bad_ttls(unreachable_model: joblocks.JobLockModel, bad: Any, exc: type) -> None:
    with pytest.raises(exc, match="ttl"):
        unreachable_model.acquire("job", bad, "w1")
    with pytest.raises(exc, match="ttl"):
        unreachable_model.refresh("job", bad, "w1")
    with pytest.raises(exc, match="ttl"):
        joblocks.run_with_lock("job", bad, lambda: None, model=unreachable_model)


@pytest.mark.parametrize("bad", ["", " ", "a\x00", "h" * 256, None, 7])
def test_bad_holders(unreachable_model: joblocks.JobLockModel, bad: Any) -> None:
    with pytest.raises((TypeError, ValueError), match="holder"):
        unreachable_model.acquire("job", 1000, bad)
    with pytest.raises((TypeError, ValueError), match="holder"):
        unreachable_model.release("job", bad)


def test_fractional_ttl_rounds_up_to_a_whole_millisecond(tmp_path: Path) -> None:
    model = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'l.db'}")
    assert model.acquire("job", 0.2, "w1")
    row = model.peek("job")
    assert row is not None
    assert row.expires_at - row.acquired_at == timedelta(milliseconds=1)
    model.dispose()


def test_work_must_be_callable(unreachable_model: joblocks.JobLockModel) -> None:
    with pytest.raises(TypeError, match="work must be callable"):
        joblocks.run_with_lock("job", 1000, "not callable", model=unreachable_model)  # type: ignore[arg-type]


def test_async_work_is_refused_by_the_sync_face(unreachable_model: joblocks.JobLockModel) -> None:
    async def work() -> None:
        pass

    class AsyncCallable:
        async def __call__(self) -> None:
            pass

    for bad in (work, AsyncCallable()):
        with pytest.raises(TypeError, match=r"joblocks\.aio\.run_with_lock"):
            joblocks.run_with_lock("job", 1000, bad, model=unreachable_model)


def test_sync_work_is_refused_by_the_asyncio_face() -> None:
    model = joblocks.aio.JobLockModel("postgresql://u:secret@127.0.0.1:1/db")

    async def main() -> None:
        with pytest.raises(TypeError, match="async def"):
            await joblocks.aio.run_with_lock("job", 1000, lambda: None, model=model)  # type: ignore[arg-type, return-value]
        with pytest.raises(ValueError, match="lock_key"):
            await model.acquire("", 1000, "w1")
        await model.dispose()

    asyncio.run(main())


def test_model_of_the_wrong_face_is_refused(tmp_path: Path) -> None:
    async_model = joblocks.aio.JobLockModel(f"sqlite:///{tmp_path / 'a.db'}")
    with pytest.raises(TypeError, match=r"model must be a joblocks\.JobLockModel"):
        joblocks.run_with_lock("job", 1000, lambda: None, model=async_model)  # type: ignore[arg-type]
    asyncio.run(async_model.dispose())


@pytest.mark.parametrize(
    "name", ["job locks", "1abc", "drop;table", "a-b", "x" * 49, "", "naïve", 'a"b']
)
def test_bad_table_names(name: str) -> None:
    with pytest.raises(ValueError, match="table_name"):
        joblocks.JobLockModel("sqlite:///ignored.db", table_name=name)


@pytest.mark.parametrize("schema", ["my schema", "x;y", ""])
def test_bad_schema_names(schema: str) -> None:
    with pytest.raises(ValueError, match="schema"):
        joblocks.JobLockModel("postgresql://u@127.0.0.1:1/db", schema=schema)


def test_sqlite_schema_other_than_main_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="schema"):
        joblocks.JobLockModel(f"sqlite:///{tmp_path / 'l.db'}", schema="other")


@pytest.mark.parametrize(
    "url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:x?mode=memory&uri=true"]
)
def test_in_memory_sqlite_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="in-memory"):
        joblocks.JobLockModel(url)
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.StaticPool)
    with pytest.raises(ValueError, match="in-memory"):
        joblocks.JobLockModel(engine)


def test_engine_of_the_wrong_face_is_refused(tmp_path: Path) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'l.db'}")
    with pytest.raises(TypeError, match="AsyncEngine"):
        joblocks.JobLockModel(engine)
    sync_engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'l.db'}")
    with pytest.raises(TypeError, match="sync Engine"):
        joblocks.aio.JobLockModel(sync_engine)
    sync_engine.dispose()
    asyncio.run(engine.dispose())


def test_database_of_a_wrong_type_is_refused() -> None:
    with pytest.raises(TypeError, match="database"):
        joblocks.JobLockModel(42)  # type: ignore[arg-type]


def test_unknown_acquire_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="acquire_path"):
        joblocks.JobLockModel(f"sqlite:///{tmp_path / 'l.db'}", acquire_path="fast")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "url",
    [
        "not a url",
        "nosuchdb://u:secret@host/db",
        "postgresql+nosuchdriver://u:secret@host/db",
    ],
)
def test_malformed_urls_are_backend_errors_with_the_password_masked(url: str) -> None:
    with pytest.raises(joblocks.LockBackendError) as info:
        joblocks.JobLockModel(url)
    assert "secret" not in str(info.value)


def test_unreachable_server_fails_fast_with_the_password_masked(
    unreachable_model: joblocks.JobLockModel,
) -> None:
    started = time.monotonic()
    with pytest.raises(joblocks.LockBackendError) as info:
        unreachable_model.acquire("job", 1000, "w1")
    assert time.monotonic() - started < 10
    assert "secret" not in str(info.value)
    assert "***" in str(info.value)
    assert info.value.__cause__ is not None


def test_unreachable_server_on_the_asyncio_face() -> None:
    model = joblocks.aio.JobLockModel("mysql://u:secret@127.0.0.1:1/db")

    async def main() -> None:
        with pytest.raises(joblocks.LockBackendError) as info:
            await model.acquire("job", 1000, "w1")
        assert "secret" not in str(info.value)
        await model.dispose()

    asyncio.run(main())


def test_configure_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError, match="default"):
        joblocks.configure(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unexpected option"):
        joblocks.configure("sqlite:///x.db", tablename="x")
    with pytest.raises(ValueError, match="table_name"):
        joblocks.configure("sqlite:///x.db", table_name="bad name")
    with pytest.raises(ValueError, match="instances"):
        joblocks.configure("sqlite:///x.db", instances={"": "sqlite:///y.db"})


class _Text(str):
    """A str subclass: skips the validators' one-test fast path (``type(v) is str``)."""


class _Int(int):
    """An int subclass: skips ``duration_ms``'s one-test fast path (``type(v) is int``)."""


def _outcome(check: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return check(value, *args, **kwargs)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)


@pytest.mark.parametrize(
    "text",
    [
        "job",
        "x" * 255,
        "x" * 256,
        "x" * 512,
        "x" * 513,
        " a ",
        "",
        " ",
        "\x1c",
        "\t\n\x0b",
        "a\x00",
        "é",
        "é" * 256,
        "é" * 257,
        "\ud800",
        "a\u3000",
        "\u3000",
    ],
)
def test_text_fast_path_decides_as_the_full_checks(text: str) -> None:
    from joblocks._util import validate as _validate

    for check in (_validate.lock_key, _validate.holder):
        assert _outcome(check, text) == _outcome(check, _Text(text))


_MAX_MS = 366 * 24 * 3600 * 1000


@pytest.mark.parametrize("ms", [1, 0, -1, 30_000, _MAX_MS, _MAX_MS + 1, 10**400])
@pytest.mark.parametrize("allow_zero", [False, True])
def test_duration_fast_path_decides_as_the_full_checks(ms: int, allow_zero: bool) -> None:
    from joblocks._util import validate as _validate

    fast = _outcome(_validate.duration_ms, ms, "ttl", allow_zero=allow_zero)
    assert fast == _outcome(_validate.duration_ms, _Int(ms), "ttl", allow_zero=allow_zero)
