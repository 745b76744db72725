"""An application table in the run ledger's name (``job_runs`` beside ``job_locks``)
is refused as ``LockTableMismatch`` naming it, as a foreign lock table is, instead of
raw "no such column" errors; and the ledger's table name can be chosen
(``runs_table_name=``, ``--runs-table``). Every database, both faces, and the command
line as real processes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
from sqlalchemy import Engine, create_engine, text

import joblocks

from ...support.cli import Result, run_cli

FOREIGN = "(id INTEGER PRIMARY KEY, name VARCHAR(50), payload VARCHAR(50))"


@pytest.fixture
def plain(db_url: str) -> Iterator[Engine]:
    engine = create_engine(db_url, isolation_level="AUTOCOMMIT")
    yield engine
    engine.dispose()


def foreign_runs(engine: Engine, name: str) -> None:
    with engine.begin() as conn:
        conn.execute(text(f"CREATE TABLE {name} {FOREIGN}"))
        conn.execute(text(f"INSERT INTO {name} (id, name, payload) VALUES (1, 'app', 'x')"))


def rows_of(engine: Engine, name: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {name}")).scalar_one())


def test_a_foreign_ledger_table_is_refused_and_another_name_can_be_chosen(
    make_model: Callable[..., Any], plain: Engine, table_name: str, key: str
) -> None:
    runs = f"{table_name}_runs"
    foreign_runs(plain, runs)
    model = make_model(record=True)
    with pytest.raises(joblocks.LockTableMismatch) as info:
        model.runs()
    assert info.value.table.endswith(runs)
    assert "not a joblocks run ledger table" in str(info.value)
    assert "runs_table_name=" in str(info.value)
    # The job still runs (a ledger failure never stops it); the table is left alone.
    ran: list[str] = []
    assert model.run_with_lock(key, 10_000, lambda: ran.append("first"))
    assert ran == ["first"]
    assert rows_of(plain, runs) == 1

    chosen = make_model(record=True, runs_table_name=f"{table_name}_ledger")
    assert chosen.run_with_lock(key, 10_000, lambda: ran.append("second"))
    assert ran == ["first", "second"]
    assert [run.outcome for run in chosen.runs(key)] == ["ok"]
    assert rows_of(plain, f"{table_name}_ledger") == 1
    assert rows_of(plain, runs) == 1


def test_runs_table_name_is_checked() -> None:
    with pytest.raises(ValueError, match="runs_table_name"):
        joblocks.JobLockModel("sqlite:///x.db", runs_table_name="bad name")
    with pytest.raises(ValueError, match="runs_table_name"):
        joblocks.configure("sqlite:///x.db", runs_table_name="bad name")


def cli(url: str, table: str, tmp_path: Path, *args: str) -> Result:
    """The command line, in this process (``tests/support/cli.py``)."""
    env = {k: v for k, v in os.environ.items() if k != "JOBLOCKS_URL"}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return run_cli("--url", url, "--table", table, *args, env=env)


def test_the_command_line_refuses_it_and_takes_runs_table(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    engine = create_engine(url)
    try:
        foreign_runs(engine, "job_runs")
        for args in (["history"], ["status"]):
            done = cli(url, "job_locks", tmp_path, *args)
            assert done.returncode == 3, done.stdout + done.stderr
            line = done.stderr.strip()
            assert len(line.splitlines()) == 1, line
            assert "job_runs is not a joblocks run ledger table" in line
            assert "no such column" not in line
        done = cli(url, "job_locks", tmp_path, "run", "nightly", "--ttl", "1m", "--record",
                   "--", "true")  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "not a joblocks run ledger table" in done.stderr  # the warning says why
        done = cli(url, "job_locks", tmp_path, "--runs-table", "nightly_runs", "run", "nightly",
                   "--ttl", "1m", "--record", "--", "true")  # fmt: skip
        assert done.returncode == 0, done.stderr
        done = cli(url, "job_locks", tmp_path, "history", "--runs-table", "nightly_runs", "--json")
        assert done.returncode == 0, done.stderr
        assert '"nightly"' in done.stdout
        assert rows_of(engine, "job_runs") == 1
    finally:
        engine.dispose()
