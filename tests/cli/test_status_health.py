"""``joblocks status`` as a health check, and runs whose process died, on every database.

A key whose last run failed (the command exited non-zero) is ``FAILED`` and ``status``
exits 1. A run whose ``joblocks run`` process was killed (SIGKILL: it never writes its
end) is ``abandoned`` once its lease is no longer live — expired, or broken by
``release --force`` — in ``status``, ``history`` and ``history --json``; while its
holder lives it is ``running`` and healthy. The killed runs are real ``python -m
joblocks`` processes; the other calls run in the test's process (``tests/support/cli.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..support.cli import Result, run_cli

TIMEOUT = 60


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JOBLOCKS_URL"}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return env


def cli(url: str, table: str, tmp_path: Path, *args: str) -> Result:
    return run_cli("--url", url, "--table", table, *args, env=_env(tmp_path))


def status_rows(url: str, table: str, tmp_path: Path) -> tuple[int, dict[str, str]]:
    done = cli(url, table, tmp_path, "status")
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, {line.split()[0]: line for line in done.stdout.splitlines()[1:]}


def history_json(url: str, table: str, tmp_path: Path, key: str) -> list[dict[str, Any]]:
    done = cli(url, table, tmp_path, "history", key, "--json")
    assert done.returncode == 0, done.stderr
    runs: list[dict[str, Any]] = json.loads(done.stdout)
    return runs


def wait_for(what: str, check: Any, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def test_failed_last_run_fails_status(db_url: str, table_name: str, tmp_path: Path) -> None:
    run = ("run", "nightly", "--ttl", "1m", "--record", "--")
    assert cli(db_url, table_name, tmp_path, *run, "true").returncode == 0
    assert cli(db_url, table_name, tmp_path, "status").returncode == 0
    assert cli(db_url, table_name, tmp_path, *run, "sh", "-c", "exit 4").returncode == 4

    code, rows = status_rows(db_url, table_name, tmp_path)
    assert code == 1
    assert rows["nightly"].split()[-1] == "FAILED"
    assert " error " in rows["nightly"]
    as_json = cli(db_url, table_name, tmp_path, "status", "--json")
    assert as_json.returncode == 1
    [entry] = json.loads(as_json.stdout)
    assert (entry["outcome"], entry["failed"], entry["state"], entry["overdue"]) == (
        "error",
        True,
        "FAILED",
        False,
    )

    # The next run succeeds: healthy again.
    assert cli(db_url, table_name, tmp_path, *run, "true").returncode == 0
    code, rows = status_rows(db_url, table_name, tmp_path)
    assert code == 0
    assert rows["nightly"].split()[-1] == "ok"


def _start_holder(
    url: str, table: str, tmp_path: Path, key: str, ttl: str
) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "joblocks", "--url", url, "--table", table]
    argv += ["run", key, "--ttl", ttl, "--record", "--", "sleep", "300"]
    return subprocess.Popen(
        argv,
        env=_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own process group: joblocks and its command
    )


def _kill(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=TIMEOUT)


def test_killed_holder_is_abandoned(db_url: str, table_name: str, tmp_path: Path) -> None:
    expiring = _start_holder(db_url, table_name, tmp_path, "short-ttl", "2s")
    forced = _start_holder(db_url, table_name, tmp_path, "long-ttl", "10m")
    try:
        for key in ("short-ttl", "long-ttl"):
            wait_for(
                f"{key}'s run row", lambda key=key: history_json(db_url, table_name, tmp_path, key)
            )
        # Alive: running, and healthy.
        code, rows = status_rows(db_url, table_name, tmp_path)
        assert rows["long-ttl"].split()[-1] == "running"
        assert " running " in rows["long-ttl"]
        assert history_json(db_url, table_name, tmp_path, "long-ttl")[0]["outcome"] == "running"
        assert code == 0, rows
    finally:
        _kill(expiring)
        _kill(forced)

    # long-ttl's lease is live for 10 minutes: still shown running until it is broken.
    assert history_json(db_url, table_name, tmp_path, "long-ttl")[0]["outcome"] == "running"
    released = cli(db_url, table_name, tmp_path, "release", "long-ttl", "--force")
    assert released.returncode == 0, released.stderr
    [gone] = history_json(db_url, table_name, tmp_path, "long-ttl")
    assert (gone["outcome"], gone["ended_at"]) == ("abandoned", None)

    # short-ttl's lease expires within its 2 s once nobody renews it.
    wait_for(
        "short-ttl abandoned",
        lambda: (
            history_json(db_url, table_name, tmp_path, "short-ttl")[0]["outcome"] == "abandoned"
        ),
    )
    code, rows = status_rows(db_url, table_name, tmp_path)
    assert code == 1
    for key in ("short-ttl", "long-ttl"):
        assert rows[key].split()[-1] == "ABANDONED"
        assert " abandoned " in rows[key]
    table = cli(db_url, table_name, tmp_path, "history")
    assert table.stdout.count(" abandoned ") == 2
    entries = json.loads(cli(db_url, table_name, tmp_path, "status", "--json").stdout)
    assert {(e["key"], e["outcome"], e["state"], e["failed"]) for e in entries} == {
        ("short-ttl", "abandoned", "ABANDONED", True),
        ("long-ttl", "abandoned", "ABANDONED", True),
    }

    # A new run of the key: it is the last run, healthy; the dead one stays abandoned.
    again = ("run", "long-ttl", "--ttl", "1m", "--record", "--", "true")
    assert cli(db_url, table_name, tmp_path, *again).returncode == 0
    assert [r["outcome"] for r in history_json(db_url, table_name, tmp_path, "long-ttl")] == [
        "ok",
        "abandoned",
    ]
    code, rows = status_rows(db_url, table_name, tmp_path)
    assert rows["long-ttl"].split()[-1] == "ok"
    assert code == 1  # short-ttl still abandoned
