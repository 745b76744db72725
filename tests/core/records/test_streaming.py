"""``iter_locks``: the rows of ``list()`` a page at a time, on every database and face,
and ``joblocks list`` printing them as it reads them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import joblocks
from joblocks.cli._format import printable

from ...support.cli import Result, run_cli
from ...support.faces import run_on
from .test_prune import HOUR, fill


def collect(model: Any, *args: Any, **kwargs: Any) -> list[joblocks.JobLock]:
    """Everything ``model.iter_locks(...)`` yields, on either face."""
    if model.face == "sync":
        return list(model.model.iter_locks(*args, **kwargs))

    async def gather() -> list[joblocks.JobLock]:
        return [lock async for lock in model.model.iter_locks(*args, **kwargs)]

    return list(run_on(model.loop, gather()))


# Keys whose order differs between byte order and a case- or accent-folding collation.
ODD_KEYS = ["B", "a", "b", "A", "é", "e", "z", "Z", "~", "key with space", "ü-2", "0"]


def _rows(now: int) -> list[tuple[str, int, int]]:
    rows = [(f"k-{i:04d}", now, now + HOUR if i % 3 else now - HOUR) for i in range(57)]
    rows += [(k, now, now + HOUR if i % 2 else now - 1) for i, k in enumerate(ODD_KEYS)]
    return rows


@pytest.mark.parametrize("state", ["all", "live", "expired"])
def test_iter_locks_yields_what_list_returns(
    make_model: Callable[..., Any], db_url: str, table_name: str, state: str
) -> None:
    model = make_model()
    fill(db_url, table_name, _rows(model.now_ms()))
    expected = [(lock.key, lock.holder, lock.fence) for lock in model.list(state)]
    assert expected  # every state has rows
    for size in (1, 7, 23, 1000):
        got = [
            (lock.key, lock.holder, lock.fence) for lock in collect(model, state, batch_size=size)
        ]
        assert got == expected, size


def test_iter_locks_of_an_empty_table(make_model: Callable[..., Any]) -> None:
    model = make_model()
    assert collect(model) == []
    assert collect(model, "live", batch_size=1) == []


def test_iter_locks_reads_page_by_page(make_model: Callable[..., Any], key: str) -> None:
    """Each page is read when the loop gets to it, and no connection is held between."""
    model = make_model()
    for i in range(6):
        assert model.acquire(f"{key}-{i}", 60_000, "worker")
    if model.face == "sync":
        it = model.model.iter_locks(batch_size=2)
        first = [next(it), next(it)]
        # Between pages: no connection checked out beyond the idle ones kept.
        cache = model.model._cache
        assert model.model.engine.pool.checkedout() == (len(cache) if cache is not None else 0)
        assert model.acquire(f"{key}-9", 60_000, "worker")  # after the first page: seen
        rest = list(it)
    else:
        agen = model.model.iter_locks(batch_size=2)

        async def two() -> list[joblocks.JobLock]:
            return [await agen.__anext__(), await agen.__anext__()]

        async def drain() -> list[joblocks.JobLock]:
            return [lock async for lock in agen]

        first = run_on(model.loop, two())
        assert model.model.engine.sync_engine.pool.checkedout() == 0
        assert model.acquire(f"{key}-9", 60_000, "worker")
        rest = run_on(model.loop, drain())
    keys = [lock.key for lock in first + rest]
    assert keys == [f"{key}-{i}" for i in (0, 1, 2, 3, 4, 5, 9)]


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(
    ("args", "kwargs", "error", "needle"),
    [
        (("alive",), {}, ValueError, "state"),
        ((), {"batch_size": 0}, ValueError, "batch_size"),
        ((), {"batch_size": 100_001}, ValueError, "batch_size"),
        ((), {"batch_size": "10"}, TypeError, "batch_size"),
    ],
)
def test_iter_locks_checks_its_arguments_at_the_call(
    make_model: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    error: type[Exception],
    needle: str,
) -> None:
    model = make_model(url="sqlite:////nonexistent-dir/never.db", create_table=False)
    with pytest.raises(error, match=needle):
        model.model.iter_locks(*args, **kwargs)  # not iterated: raised at the call


# -- joblocks list --------------------------------------------------------------------------


def _cli(url: str, table: str, *args: str, tmp_path: Path) -> Result:
    """The command line, in this process (``tests/support/cli.py``)."""
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    return run_cli("--url", url, "--table", table, *args, env=env)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_cli_list_prints_more_than_a_page(
    make_model: Callable[..., Any], db_url: str, table_name: str, tmp_path: Path
) -> None:
    """Over several CLI pages (1000 rows each): the same rows, a valid JSON array, and
    a table whose columns fit every row (a wider key on a later page widens them)."""
    model = make_model()
    now = model.now_ms()
    rows = [(f"job-{i:05d}", now, now + HOUR if i % 4 else now - HOUR) for i in range(2500)]
    rows.append(("z" + "w" * 40, now, now + HOUR))  # on the third page, wider than all
    # JSON escapes: quotes, backslashes, control characters, non-ASCII (kept as UTF-8).
    rows += [(k, now, now + HOUR) for k in ('job-"q"\\b', "job-\t\x01", "job-ü\u2028é")]
    fill(db_url, table_name, rows)
    every = _cli(db_url, table_name, "list", "--all", "--json", tmp_path=tmp_path)
    assert every.returncode == 0, every.stderr
    listed = json.loads(every.stdout)
    assert [r["key"] for r in listed] == [lock.key for lock in model.list()]
    live = json.loads(_cli(db_url, table_name, "list", "--json", tmp_path=tmp_path).stdout)
    assert [r["key"] for r in live] == [lock.key for lock in model.list("live")]
    # Byte for byte what json.dumps of the whole list gives (the documented format).
    assert every.stdout == json.dumps(listed, indent=2, ensure_ascii=False) + "\n"

    text = _cli(db_url, table_name, "list", "--all", tmp_path=tmp_path)
    assert text.returncode == 0, text.stderr
    header, *lines = text.stdout.split("\n")[:-1]
    assert len(lines) == len(rows)
    assert [line.split()[0] for line in lines] == [printable(r["key"]) for r in listed]
    for line in lines[:1000]:  # the first page: aligned with the header
        assert line.index(line.split()[1]) == header.index("HOLDER")


@pytest.mark.parametrize("backend", ["sqlite"])
def test_cli_list_empty(
    make_model: Callable[..., Any], db_url: str, table_name: str, tmp_path: Path
) -> None:
    make_model().create_table()
    shown = _cli(db_url, table_name, "list", "--json", tmp_path=tmp_path)
    assert (shown.returncode, shown.stdout) == (0, "[]\n")
    text = _cli(db_url, table_name, "list", tmp_path=tmp_path)
    assert text.stdout.startswith("no held locks")
