"""``joblocks run --liveness session``: a run whose ``joblocks`` process was killed
(SIGKILL, with its command) is taken over by the next run at once, not after the ttl.

The killed run is a real ``python -m joblocks`` process (it must die, as a process);
the others run in the test's process (``tests/support/cli.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import joblocks

from ..support.cli import run_cli

TIMEOUT = 60


def _argv(url: str, table: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "joblocks", *_words(url, table, *args)]


def _words(url: str, table: str, *args: str) -> list[str]:
    return ["--url", url, "--table", table, *args]


def test_a_killed_run_is_taken_over_by_the_next_one(
    db_url: str, table_name: str, key: str, tmp_path: Path
) -> None:
    run = ("run", key, "--ttl", "60s", "--liveness", "session", "--conflict-exit-code", "9")
    first = subprocess.Popen(
        _argv(db_url, table_name, *run, "--", "sleep", "600"),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    model = joblocks.JobLockModel(db_url, table_name=table_name)
    try:
        deadline = time.monotonic() + TIMEOUT
        while model.peek(key) is None:
            assert first.poll() is None, "the first run ended early"
            assert time.monotonic() < deadline, "the first run never took the key"
            time.sleep(0.05)
        # Another run is refused while the first one lives.
        taken = run_cli(*_words(db_url, table_name, *run, "--", "true"))
        assert taken.returncode == 9, taken.stderr
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=TIMEOUT)
        ran = tmp_path / "ran"
        second = run_cli(*_words(db_url, table_name, *run, "--", "touch", str(ran)))
        assert second.returncode == 0, second.stderr
        assert ran.exists(), "the killed run's key was not taken over"
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=TIMEOUT)
        model.dispose()


def test_an_unknown_liveness_is_a_usage_error(db_url: str, table_name: str) -> None:
    result = run_cli(
        *_words(db_url, table_name, "run", "k", "--ttl", "1m", "--liveness", "bogus", "--", "true")
    )
    assert result.returncode == 2
    assert "--liveness" in result.stderr
