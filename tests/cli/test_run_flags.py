"""``joblocks run`` flags cron users expect: ``--max-hold`` (a kill-after),
``--jitter``, ``--timeout``, the lock in the command's environment (``JOBLOCKS_KEY``,
``JOBLOCKS_TOKEN``, ``JOBLOCKS_HOLDER``, ``JOBLOCKS_URL``), the help of ``--wait`` and
``--record``, and a retried release.

A command the test waits for runs in the test's process (``tests/support/cli.py``); one
that runs while the test goes on (``start``: sent a signal, or its output read while it
runs) is a real ``python -m joblocks`` process.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from .test_cli import TIMEOUT, TRAP, Cli, catches, finish, lite, one_line

__all__ = ["lite"]  # the fixture, imported for these tests

# Ignores SIGTERM (writes "term" to $3), touches $1, then runs until $2 exists.
STUBBORN = 'trap \'echo term > "$3"\' TERM; touch "$1"; while [ ! -e "$2" ]; do sleep 0.02; done'


def start(cli: Cli, *args: str) -> subprocess.Popen[str]:
    """``joblocks ARGS`` as a real process, running while the test goes on."""
    proc = subprocess.Popen(
        cli.argv(*args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli.env,
    )
    cli.procs.append(proc)
    return proc


# -- --max-hold ---------------------------------------------------------------------------


def test_max_hold_terminates_a_command_that_runs_too_long(lite: Cli) -> None:
    ready, go, out = (lite.tmp / f"long.{s}" for s in ("ready", "go", "out"))
    lite.gos.append(go)
    code, _, err = lite("run", "job", "--ttl", "30s", "--max-hold", "1s", "--",
                        "sh", "-c", TRAP, "long", str(ready), str(go), str(out))  # fmt: skip
    assert ready.exists(), err  # the command ran (and waited for a go that never came)
    assert code == 5, err  # the command's exit code after its SIGTERM trap
    assert out.read_text().strip() == "term"
    assert "--max-hold 1s" in err
    assert "SIGTERM" in err
    assert lite.model().peek("job") is None


def test_max_hold_kills_a_command_that_ignores_sigterm(lite: Cli) -> None:
    ready, go, out = (lite.tmp / f"stubborn.{s}" for s in ("ready", "go", "out"))
    lite.gos.append(go)
    # ttl 3s: the grace before SIGKILL is ttl/3 = 1s, and the lock is held throughout.
    script = ["sh", "-c", STUBBORN, "stubborn", str(ready), str(go), str(out)]
    code, _, err = lite("run", "job", "--ttl", "3s", "--max-hold", "1s", "--", *script)
    assert ready.exists(), err
    assert code == 128 + signal.SIGKILL, err
    assert out.read_text().strip() == "term"  # SIGTERM first, ignored
    assert "SIGKILL" in err
    assert "lost" not in err  # the lock outlived the command
    assert lite.model().peek("job") is None


def test_max_hold_leaves_a_short_command_alone(lite: Cli) -> None:
    result = lite("run", "job", "--ttl", "30s", "--max-hold", "1h", "--", "sh", "-c", "exit 3")
    assert (result.returncode, result.stderr) == (3, "")


# -- the command's environment ------------------------------------------------------------


def test_the_command_gets_the_lock_in_its_environment(lite: Cli) -> None:
    out = lite.tmp / "env"
    script = (
        'printf "%s\\n%s\\n%s\\n%s\\n" "$JOBLOCKS_KEY" "$JOBLOCKS_TOKEN" "$JOBLOCKS_HOLDER" '
        '"$JOBLOCKS_URL" > "$1"'
    )
    result = lite("run", "the job", "--ttl", "30s", "--min-hold", "1h", "--",
                  "sh", "-c", script, "env", str(out))  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "")
    key, token, holder, url = out.read_text().splitlines()
    row = lite.model().peek("the job")  # kept by --min-hold
    assert row is not None
    assert (key, int(token), holder) == ("the job", row.fence, row.holder)
    assert url == lite.url


@pytest.mark.server
def test_joblocks_url_has_the_password_and_is_never_printed(
    tmp_path: Path, table_name: str, pg_server: object
) -> None:
    import sqlalchemy as sa

    base = sa.make_url(pg_server.url)  # type: ignore[attr-defined]
    secret = uuid.uuid4().hex  # a password of this run
    admin = sa.create_engine(base)
    with admin.connect() as conn:
        conn.execute(sa.text("DROP ROLE IF EXISTS fence_user"))
        conn.execute(sa.text(f"CREATE ROLE fence_user LOGIN SUPERUSER PASSWORD '{secret}'"))
        conn.commit()
    admin.dispose()
    url = base.set(username="fence_user", password=secret).render_as_string(hide_password=False)
    cli = Cli(url, table_name, tmp_path)
    try:
        out = tmp_path / "url"
        result = cli("run", "job", "--ttl", "30s", "--", "sh", "-c",
                     'printf "%s" "$JOBLOCKS_URL" > "$1"', "url", str(out))  # fmt: skip
        assert (result.returncode, result.stderr, result.stdout) == (0, "", "")
        # The command can reach the database with it (to fence its writes).
        fenced = sa.create_engine(out.read_text())
        with fenced.connect() as conn:
            assert conn.execute(sa.text("SELECT current_user")).scalar() == "fence_user"
        fenced.dispose()
        listed = cli("list")
        assert secret not in listed.stdout + listed.stderr
    finally:
        cli.close()


# -- --jitter, --timeout ------------------------------------------------------------------


def test_jitter_sleeps_before_taking_the_lock(lite: Cli) -> None:
    ran = lite.tmp / "ran"
    assert lite("run", "job", "--ttl", "30s", "--jitter", "200ms", "--", "touch",
                str(ran)).returncode == 0  # fmt: skip
    assert ran.exists()
    ran.unlink()
    # A long jitter: still asleep when the signal comes, so the command never started
    # and no lock was taken.
    proc = start(lite, "run", "job", "--ttl", "30s", "--jitter", "1h", "--", "touch", str(ran))
    catches(proc, signal.SIGTERM)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    code, _, err = finish(proc)
    assert code == 128 + signal.SIGTERM
    assert "before the command started" in one_line(err)
    assert not ran.exists()
    assert lite.model().peek("job") is None


def test_timeout_bounds_a_call(lite: Cli) -> None:
    assert lite("run", "job", "--ttl", "30s", "--", "true").returncode == 0  # the table
    blocker = sqlite3.connect(lite.tmp / "locks.db", isolation_level=None)
    try:
        blocker.execute("BEGIN EXCLUSIVE")
        result = lite("run", "job", "--ttl", "30s", "--timeout", "300ms", "--", "true")
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert result.returncode == 3, result.stderr
    assert "locked" in one_line(result.stderr)


# -- the release, retried -----------------------------------------------------------------

# Locks the SQLite file $1 in a process of its own until $2 exists, then ends; $3 says
# it holds the lock.
LOCKER = """
import sqlite3, sys, time, os
db, go, locked = sys.argv[1:4]
conn = sqlite3.connect(db, isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
open(locked, "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.02)
conn.execute("ROLLBACK")
"""


def test_a_failed_release_is_sent_again(lite: Cli) -> None:
    db, go, locked = lite.tmp / "locks.db", lite.tmp / "unlock", lite.tmp / "locked"
    lite.gos.append(go)
    locker = [sys.executable, "-c", LOCKER, str(db), str(go), str(locked)]
    # The command leaves a process behind that holds the database's write lock, so the
    # release after it fails; the test lets the lock go when joblocks says it retries.
    script = '"$@" & while [ ! -e "$0" ]; do sleep 0.02; done'
    proc = start(lite, "run", "job", "--ttl", "1m", "--timeout", "500ms", "--",
                 "sh", "-c", script, str(locked), *locker)  # fmt: skip
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "trying again" in line:
                go.touch()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc.wait(timeout=TIMEOUT)
    reader.join(timeout=10)
    text = "".join(lines)
    assert proc.returncode == 0, text
    assert "releasing 'job' failed" in text
    assert "could not release" not in text
    assert lite.model().peek("job") is None  # released by a later try


# -- help and bad values ------------------------------------------------------------------


def test_help_of_wait_and_record(lite: Cli) -> None:
    text = lite("run", "--help").stdout
    assert "--record [all]" in text
    assert "True" not in text
    wait = " ".join(text[text.index("--wait DURATION") :].split()[:30])
    assert "released" in wait
    for flag in ("--max-hold DURATION", "--jitter DURATION", "--timeout DURATION"):
        assert flag in text
    assert "JOBLOCKS_TOKEN" in text


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--max-hold", "5"),
        ("--max-hold", "0s"),
        ("--max-hold", "-1s"),
        ("--jitter", "2"),
        ("--jitter", "-1s"),
        ("--jitter", "1y"),
        ("--timeout", "0s"),
        ("--timeout", "500"),
        ("--timeout", "5S"),
        ("--record", "yes"),
    ],
)
def test_bad_values_name_the_flag(lite: Cli, flag: str, value: str) -> None:
    ran = lite.tmp / "ran"
    result = lite("run", "job", "--ttl", "30s", flag, value, "--", "touch", str(ran))
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert f"argument {flag}:" in line  # not --max-holders, of which --max-hold is a prefix
    assert "True" not in line
    assert not ran.exists()
    assert not (lite.tmp / "locks.db").exists()  # refused before the database
