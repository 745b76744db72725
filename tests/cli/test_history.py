"""``joblocks run --record`` and ``joblocks history`` on every database (the command line
run in the test's process, ``tests/support/cli.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import joblocks

from ..support.cli import Result, run_cli


def cli(url: str, table: str, tmp_path: Path, *args: str) -> Result:
    env = {k: v for k, v in os.environ.items() if k != "JOBLOCKS_URL"}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return run_cli("--url", url, "--table", table, *args, env=env)


def test_run_record_and_history(db_url: str, table_name: str, tmp_path: Path) -> None:
    assert (
        cli(
            db_url, table_name, tmp_path, "run", "nightly", "--ttl", "1m", "--record", "--", "true"
        ).returncode
        == 0
    )
    failed = cli(
        db_url,
        table_name,
        tmp_path,
        "run",
        "nightly",
        "--ttl",
        "1m",
        "--record",
        "--",
        "sh",
        "-c",
        "exit 4",
    )
    assert failed.returncode == 4
    cli(db_url, table_name, tmp_path, "run", "other", "--ttl", "1m", "--", "true")  # not recorded
    done = cli(db_url, table_name, tmp_path, "history", "--json")
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)
    assert [(r["key"], r["outcome"], r["error"]) for r in runs] == [
        ("nightly", "error", "exit status 4"),
        ("nightly", "ok", None),
    ]
    for run in runs:
        assert run["duration_ms"] >= 0
        assert run["started_at"].endswith("Z")
        assert run["token"] >= 1
        assert run["pid"] > 0
    text = cli(db_url, table_name, tmp_path, "history", "nightly")
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[0].split()[:3] == ["STARTED", "KEY", "OUTCOME"]
    assert len(lines) == 3
    assert "exit status 4" in lines[1]
    assert cli(db_url, table_name, tmp_path, "history", "missing", "--json").stdout.strip() == "[]"
    assert (
        len(
            json.loads(
                cli(db_url, table_name, tmp_path, "history", "--since", "1h", "--json").stdout
            )
        )
        == 2
    )
    assert (
        len(
            json.loads(
                cli(db_url, table_name, tmp_path, "history", "--limit", "1", "--json").stdout
            )
        )
        == 1
    )


def test_record_all_writes_skips(db_url: str, table_name: str, tmp_path: Path) -> None:
    model = joblocks.JobLockModel(db_url, table_name=table_name)
    try:
        held = model.try_lease("nightly", 60_000, holder="elsewhere")
        assert held is not None
        done = cli(
            db_url,
            table_name,
            tmp_path,
            "run",
            "nightly",
            "--ttl",
            "1m",
            "--record",
            "all",
            "--",
            "true",
        )
        assert done.returncode == 0  # the conflict exit code
        held.release()
    finally:
        model.dispose()
    runs = json.loads(cli(db_url, table_name, tmp_path, "history", "--json").stdout)
    assert [r["outcome"] for r in runs] == ["skipped"]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_history_without_a_ledger(db_url: str, table_name: str, tmp_path: Path) -> None:
    # No file yet: nothing is created.
    done = cli(db_url, table_name, tmp_path, "history")
    assert done.returncode == 0
    assert "no runs recorded" in done.stdout
    assert not (tmp_path / "locks.db").exists()
    assert cli(db_url, table_name, tmp_path, "status", "--json").stdout.strip() == "[]"
    bad = cli(db_url, table_name, tmp_path, "history", "--limit", "0")
    assert bad.returncode == 2
    assert "--limit" in bad.stderr


def test_prune_runs_older_than(db_url: str, table_name: str, tmp_path: Path) -> None:
    for _ in range(2):
        cli(db_url, table_name, tmp_path, "run", "nightly", "--ttl", "1m", "--record", "--", "true")
    kept = cli(db_url, table_name, tmp_path, "prune", "--runs-older-than", "1d")
    assert kept.returncode == 0, kept.stderr
    assert "deleted 0 ledger rows" in kept.stdout
    both = cli(
        db_url, table_name, tmp_path, "prune", "--expired-for", "0s", "--runs-older-than", "0s"
    )
    assert both.returncode == 0, both.stderr
    assert "lock row" in both.stdout
    assert "deleted 2 ledger rows" in both.stdout
    assert cli(db_url, table_name, tmp_path, "history", "--json").stdout.strip() == "[]"
    neither = cli(db_url, table_name, tmp_path, "prune")
    assert neither.returncode == 2
    assert "--runs-older-than" in neither.stderr
    dry = cli(db_url, table_name, tmp_path, "prune", "--dry-run", "--runs-older-than", "1d")
    assert dry.returncode == 2
    assert "--dry-run counts lock rows only" in dry.stderr


def test_history_prune(db_url: str, table_name: str, tmp_path: Path) -> None:
    for _ in range(3):
        cli(db_url, table_name, tmp_path, "run", "nightly", "--ttl", "1m", "--record", "--", "true")
    kept = cli(db_url, table_name, tmp_path, "history", "--prune", "1d")
    assert kept.returncode == 0, kept.stderr
    assert "deleted 0 ledger rows" in kept.stdout
    gone = cli(db_url, table_name, tmp_path, "history", "--prune", "0s")
    assert "deleted 3 ledger rows" in gone.stdout
    assert cli(db_url, table_name, tmp_path, "history", "--json").stdout.strip() == "[]"
