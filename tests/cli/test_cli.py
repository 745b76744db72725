"""The ``joblocks`` command line.

Most tests run on SQLite and PostgreSQL (the throwaway server of the test set-up);
behaviour that does not depend on the database (exit codes, signals, parsing) runs on
SQLite only. Commands that hold a lock run a small ``sh`` script that says when it
started and waits for the test's go-ahead, so no test depends on timing guesses.

A command the test waits for runs in the test's process, through the command line's
entry function (``tests/support/cli.py``: same exit code and output, no interpreter
start-up). A command that runs while the test goes on (``Cli.start``, ``holding``), is
sent signals, or is about the real process (its exit status, ``--version``/``--help``
and the installed script) is a real ``python -m joblocks`` process.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert

import joblocks
from joblocks.cli._format import format_duration, parse_duration

from ..support.cli import Result, joblocks_argv, run_cli

BACKENDS = [pytest.param("sqlite"), pytest.param("postgresql", marks=pytest.mark.server)]
TIMEOUT = 30

# Touches $1 once started, then waits until $2 exists.
HOLD = 'touch "$1"; while [ ! -e "$2" ]; do sleep 0.02; done'
# The same, but records a SIGTERM in $3 and exits 5 on it.
TRAP = (
    'trap \'echo term > "$3"; exit 5\' TERM; touch "$1"; while [ ! -e "$2" ]; do sleep 0.02; done'
)


def wait_for(path: Path, proc: subprocess.Popen[str] | None = None, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"exited with {proc.returncode} before {path.name}: {out}{err}")
        if time.monotonic() > deadline:
            pytest.fail(f"{path.name} did not appear within {timeout} s")
        time.sleep(0.02)


def catches(proc: subprocess.Popen[str], signum: int, timeout: float = 15) -> None:
    """Wait until ``proc`` has a handler for ``signum`` (Linux: ``SigCgt`` in /proc)."""
    status = Path(f"/proc/{proc.pid}/status")
    if not status.exists():
        time.sleep(2)
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"exited with {proc.returncode} before catching signal {signum}")
        for line in status.read_text().splitlines():
            if line.startswith("SigCgt:") and int(line.split()[1], 16) >> (signum - 1) & 1:
                return
        time.sleep(0.02)
    pytest.fail(f"no handler for signal {signum} within {timeout} s")


def default_signals() -> None:
    """``preexec_fn`` of a joblocks process a test sends signals to: the signals this
    test run inherited as ignored (``nohup`` ignores SIGHUP, a non-interactive shell's
    background job SIGINT and SIGQUIT) get their default action back, as in a shell
    or a scheduler's process, since joblocks leaves an inherited ignored signal
    ignored."""
    for sig in _INHERITED_IGNORED:
        signal.signal(sig, signal.SIG_DFL)


_INHERITED_IGNORED = [
    sig
    for sig in signal.valid_signals()
    if sig not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE)
    and signal.getsignal(sig) == signal.SIG_IGN
]


def base_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("JOBLOCKS_URL", None)
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return env


class Cli:
    """``joblocks --url URL --table TABLE ...``: called in this process (``cli(...)``) or
    started as a real process (``cli.start(...)``), and a model."""

    def __init__(self, url: str, table: str, tmp_path: Path) -> None:
        self.url = url
        self.table = table
        self.tmp = tmp_path
        self.env = base_env(tmp_path)
        self.procs: list[subprocess.Popen[str]] = []
        self.gos: list[Path] = []  # files that let the commands of holding() end
        self._model: joblocks.JobLockModel | None = None

    def words(self, *args: str) -> list[str]:
        return ["--url", self.url, "--table", self.table, *args]

    def argv(self, *args: str) -> list[str]:
        return joblocks_argv(*self.words(*args))

    def __call__(self, *args: str) -> Result:
        """The command run to its end, in this process."""
        return run_cli(*self.words(*args), env=self.env)

    def start(self, *args: str) -> subprocess.Popen[str]:
        """The command started as a real process (it runs while the test goes on)."""
        proc = subprocess.Popen(
            self.argv(*args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            preexec_fn=default_signals,
        )
        self.procs.append(proc)
        return proc

    def model(self) -> joblocks.JobLockModel:
        if self._model is None:
            self._model = joblocks.JobLockModel(self.url, table_name=self.table)
        return self._model

    def close(self) -> None:
        for go in self.gos:
            go.touch()  # so that no command outlives the test
        for proc in self.procs:
            try:
                proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
        if self._model is not None:
            self._model.dispose()


def finish(proc: subprocess.Popen[str], timeout: float = TIMEOUT) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def holding(
    cli: Cli, key: str, name: str, *options: str, script: str = HOLD
) -> tuple[subprocess.Popen[str], Path, Path]:
    """``joblocks run KEY -- sh -c SCRIPT`` started and running (``name.ready`` exists).

    Returns the process, the file that lets the command end, and the command's output file.
    """
    ready, go, out = (cli.tmp / f"{name}.{s}" for s in ("ready", "go", "out"))
    cli.gos.append(go)
    proc = cli.start(
        "run", key, "--ttl", "30s", *options, "--", "sh", "-c", script, name, str(ready),
        str(go), str(out),
    )  # fmt: skip
    wait_for(ready, proc)
    return proc, go, out


@pytest.fixture(params=BACKENDS)
def cli(request: pytest.FixtureRequest, tmp_path: Path, table_name: str) -> Iterator[Cli]:
    """The command line on SQLite and on PostgreSQL, each test on a table of its own."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'locks.db'}"
    else:
        url = request.getfixturevalue("pg_server").url
    made = Cli(url, table_name, tmp_path)
    yield made
    made.close()


@pytest.fixture
def lite(tmp_path: Path, table_name: str) -> Iterator[Cli]:
    """The command line on a SQLite file (for behaviour that does not depend on the database)."""
    made = Cli(f"sqlite:///{tmp_path / 'locks.db'}", table_name, tmp_path)
    yield made
    made.close()


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


# -- durations ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("500ms", 500),
        ("30s", 30_000),
        ("5m", 300_000),
        ("2h", 7_200_000),
        ("1d", 86_400_000),
        ("1500", 1_500),
        ("1h30m", 5_400_000),
        ("1m30s", 90_000),
        ("1.5s", 1_500),
        (".5s", 500),
        (" 2H ", 7_200_000),
        ("0.0001s", 1),  # rounded up to a whole millisecond
        ("366d", 366 * 86_400_000),
    ],
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize(
    "text", ["", " ", "5x", "-5s", "1.5", "s", "5 m", "1m30", "m5", "367d", "nan", "inf", "1e3"]
)
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_zero_durations() -> None:
    with pytest.raises(ValueError, match="positive"):
        parse_duration("0s")
    assert parse_duration("0", allow_zero=True) == 0
    assert parse_duration("0s", allow_zero=True) == 0


def test_format_duration() -> None:
    shown = [format_duration(ms) for ms in (0, 850, 42_000, 598_000, 7_500_000, 277_200_000)]
    assert shown == ["0ms", "850ms", "42s", "9m58s", "2h05m", "3d5h"]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["run", "k", "--ttl", "5x", "--", "true"], "--ttl"),
        (["prune", "--expired-for", "-1d"], "--expired-for"),
    ],
)
def test_bad_duration_is_a_usage_error(lite: Cli, args: list[str], option: str) -> None:
    result = lite(*args)
    assert result.returncode == 2
    assert option in one_line(result.stderr)
    assert result.stdout == ""


def test_usage_errors_are_one_line(lite: Cli) -> None:
    missing_dashes = lite("run", "k", "--ttl", "1m", "true")
    assert missing_dashes.returncode == 2
    assert "after --" in one_line(missing_dashes.stderr)
    bad_key = lite("peek", " ")
    assert bad_key.returncode == 2
    assert "key" in one_line(bad_key.stderr)


# -- run ----------------------------------------------------------------------------------


def test_two_runs_race_for_one_key(cli: Cli) -> None:
    first, go, _ = holding(cli, "nightly", "first")
    ran = cli.tmp / "second-ran"
    second = cli("run", "nightly", "--ttl", "30s", "--", "touch", str(ran))
    assert second.returncode == 0  # the default conflict code keeps cron quiet
    line = one_line(second.stderr)
    assert "'nightly' is held by" in line
    assert "not running touch" in line
    third = cli("run", "nightly", "--ttl", "30s", "--quiet", "--conflict-exit-code", "9", "--",
                "touch", str(ran))  # fmt: skip
    assert (third.returncode, third.stderr) == (9, "")
    assert not ran.exists()
    go.touch()
    assert finish(first) == (0, "", "")
    assert cli.model().peek("nightly") is None  # released
    after = cli("run", "nightly", "--ttl", "30s", "--", "touch", str(ran))
    assert after.returncode == 0
    assert ran.exists()


@pytest.mark.parametrize(
    ("script", "code"),
    [("exit 7", 7), ("kill -KILL $$", 128 + 9), ("kill -TERM $$", 128 + 15)],
)
def test_exit_code_of_the_command(lite: Cli, script: str, code: int) -> None:
    # A real process: the exit status the shell (or cron) sees, not main()'s return value.
    result = subprocess.run(
        lite.argv("run", "job", "--ttl", "1m", "--", "sh", "-c", script),
        capture_output=True,
        text=True,
        env=lite.env,
        timeout=TIMEOUT,
    )
    assert result.returncode == code
    assert result.stderr == ""
    assert lite.model().peek("job") is None


def test_command_not_found(lite: Cli) -> None:
    result = lite("run", "job", "--ttl", "1m", "--", str(lite.tmp / "no-such-command"))
    assert result.returncode == 127
    assert "not found" in one_line(result.stderr)
    assert lite.model().peek("job") is None


def test_sigterm_reaches_the_command_and_the_lock_is_released(cli: Cli) -> None:
    proc, _go, out = holding(cli, "job", "trap", script=TRAP)
    proc.send_signal(signal.SIGTERM)  # to joblocks only, not to its process group
    code, _, err = finish(proc)
    assert code == 5, err  # the command's own exit code
    assert out.read_text().strip() == "term"
    peek = cli("peek", "job")
    assert peek.returncode == 1
    assert "no lock row" in one_line(peek.stderr)


def test_wait_runs_after_the_holder_ends(cli: Cli) -> None:
    first, go, _ = holding(cli, "job", "first")
    ran = cli.tmp / "second-ran"
    second = cli.start("run", "job", "--ttl", "30s", "--wait", "20s", "--", "touch", str(ran))
    catches(second, signal.SIGTERM)  # started: about to ask for the lock
    time.sleep(0.3)
    assert second.poll() is None
    assert not ran.exists()
    go.touch()
    assert finish(first)[0] == 0
    assert finish(second) == (0, "", "")
    assert ran.exists()


def test_signal_while_waiting_ends_without_running(lite: Cli) -> None:
    first, go, _ = holding(lite, "job", "first")
    ran = lite.tmp / "second-ran"
    second = lite.start("run", "job", "--ttl", "30s", "--wait", "20s", "--", "touch", str(ran))
    catches(second, signal.SIGTERM)  # started, and waiting for the lock
    time.sleep(0.2)
    second.send_signal(signal.SIGTERM)
    code, _, err = finish(second)
    assert code == 128 + 15
    assert "before the command started" in one_line(err)
    assert not ran.exists()
    go.touch()
    assert finish(first)[0] == 0


def test_min_hold_keeps_the_row(lite: Cli) -> None:
    result = lite("run", "job", "--ttl", "1m", "--min-hold", "1h", "--", "true")
    assert result.returncode == 0
    row = lite.model().peek("job")
    assert row is not None
    assert not row.expired
    assert row.expires_at - row.acquired_at == timedelta(hours=1)


def test_lost_lock_terminates_the_command(lite: Cli) -> None:
    # Keep-alive renews every ttl/3; a renewal finds the row gone (broken by force).
    ready, go, out = (lite.tmp / f"lost.{s}" for s in ("ready", "go", "out"))
    lite.gos.append(go)
    proc = lite.start(
        "run", "job", "--ttl", "1500ms", "--", "sh", "-c", TRAP, "lost", str(ready), str(go),
        str(out),
    )  # fmt: skip
    wait_for(ready, proc)
    assert lite.model().delete("job")
    code, _, err = finish(proc)
    assert code == 75
    assert "lost the lock 'job'" in err
    assert "SIGTERM" in err
    assert out.read_text().strip() == "term"


def test_ttl_running_out_without_keepalive(lite: Cli) -> None:
    ended = lite("run", "a", "--ttl", "300ms", "--no-keepalive", "--", "sleep", "10")
    assert ended.returncode == 75
    assert "ran out" in ended.stderr
    kept = lite("run", "b", "--ttl", "300ms", "--no-keepalive", "--on-lost", "continue", "--",
                "sh", "-c", "sleep 1; exit 4")  # fmt: skip
    assert kept.returncode == 4
    assert "keeps running" in one_line(kept.stderr)


# -- list, peek, release, prune -----------------------------------------------------------


def _setup_rows(cli: Cli) -> None:
    model = cli.model()
    assert model.acquire("alpha", 60_000, "holder-1")
    assert model.acquire("beta", 1, "holder-2")
    time.sleep(0.02)  # beta expires


def _parse_time(text: str) -> datetime:
    assert text.endswith("Z")
    return datetime.fromisoformat(text[:-1] + "+00:00")


def test_list(cli: Cli) -> None:
    _setup_rows(cli)
    live = cli("list", "--json")
    assert live.returncode == 0, live.stderr
    rows = json.loads(live.stdout)
    assert [row["key"] for row in rows] == ["alpha"]
    row = rows[0]
    assert list(row) == [
        "key", "holder", "state", "acquired_at", "expires_at", "remaining_ms", "token", "read_at",
    ]  # fmt: skip
    assert (row["holder"], row["state"]) == ("holder-1", "held")
    assert isinstance(row["token"], int)
    assert row["token"] > 0
    assert isinstance(row["remaining_ms"], int)
    assert 30_000 < row["remaining_ms"] <= 60_000
    acquired, expires = _parse_time(row["acquired_at"]), _parse_time(row["expires_at"])
    assert expires - acquired == timedelta(seconds=60)
    every = json.loads(cli("list", "--all", "--json").stdout)
    assert [(r["key"], r["state"], r["remaining_ms"]) for r in every][1] == ("beta", "expired", 0)
    text = cli("list", "--all")
    assert text.returncode == 0
    header, *lines = text.stdout.splitlines()
    assert header.split() == ["KEY", "HOLDER", "ACQUIRED", "EXPIRES", "REMAINING", "TOKEN", "STATE"]
    assert lines[0].split()[0:2] == ["alpha", "holder-1"]
    assert lines[0].endswith("held")
    assert lines[1].split()[0] == "beta"
    assert lines[1].endswith("expired")
    assert header.index("HOLDER") == lines[0].index("holder-1")  # aligned


def test_peek(cli: Cli) -> None:
    _setup_rows(cli)
    found = cli("peek", "alpha", "--json")
    assert found.returncode == 0
    row = json.loads(found.stdout)
    assert (row["key"], row["holder"], row["state"]) == ("alpha", "holder-1", "held")
    expired = cli("peek", "beta")
    assert expired.returncode == 0  # a row in any state
    shown = dict(line.split(None, 1) for line in expired.stdout.splitlines())
    assert (shown["holder"], shown["state"], shown["remaining"]) == ("holder-2", "expired", "-")
    missing = cli("peek", "gamma", "--json")
    assert missing.returncode == 1
    assert json.loads(missing.stdout) is None


def test_release(cli: Cli) -> None:
    _setup_rows(cli)
    wrong = cli("release", "alpha", "--holder", "somebody-else")
    assert wrong.returncode == 1
    assert "held by 'holder-1'" in one_line(wrong.stderr)
    assert cli.model().peek("alpha") is not None
    right = cli("release", "alpha", "--holder", "holder-1")
    assert right.returncode == 0
    assert cli.model().peek("alpha") is None
    assert cli.model().acquire("gamma", 60_000, "stuck-worker")
    forced = cli("release", "gamma", "--force")
    assert forced.returncode == 0
    line = one_line(forced.stderr)
    assert "force-released by" in line
    assert "'stuck-worker'" in line
    assert "@" in line
    assert cli.model().peek("gamma") is None
    nothing = cli("release", "gamma", "--force")
    assert nothing.returncode == 1


def test_prune(cli: Cli) -> None:
    model = cli.model()
    model.create_table()
    now = model.now_ms()
    day, hour = 86_400_000, 3_600_000
    rows = [("old", now - 3 * day, now - 2 * day), ("recent", now - 2 * hour, now - hour),
            ("live", now, now + hour)]  # fmt: skip
    with model.engine.begin() as conn:
        conn.execute(
            insert(model.table),
            [
                {"id": key, "holder": "h", "acquired_at": a, "expires_at": e, "fence": i + 1}
                for i, (key, a, e) in enumerate(rows)
            ],
        )
    dry = cli("prune", "--expired-for", "1d", "--dry-run")
    assert (dry.returncode, dry.stdout.split()[:3]) == (0, ["would", "delete", "1"])
    assert model.count() == 3
    pruned = cli("prune", "--expired-for", "1d")
    assert pruned.returncode == 0
    assert pruned.stdout.startswith("deleted 1 lock row ")
    assert [lock.key for lock in model.list()] == ["live", "recent"]


# -- init, doctor, where ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("sqlite:///unused.db", 'CREATE TRIGGER IF NOT EXISTS "t_ddl_fence_ins"'),
        ("postgresql://app:s3cret@db.invalid/app", "COMMENT ON TABLE t_ddl"),
        ("mysql://app:s3cret@db.invalid/app", "id VARBINARY(512) NOT NULL"),
        ("mariadb://app:s3cret@db.invalid/app", "CREATE SEQUENCE t_ddl_fence_seq;"),
    ],
)
def test_init_sql_needs_no_database(tmp_path: Path, url: str, needle: str) -> None:
    argv = ["--url", url, "--table", "t_ddl", "init", "--sql"]
    result = run_cli(*argv, env=base_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "CREATE TABLE t_ddl (" in result.stdout
    assert needle in result.stdout
    assert ("CREATE SEQUENCE" in result.stdout) == (not url.startswith("sqlite"))
    assert "s3cret" not in result.stdout + result.stderr
    assert not (tmp_path / "unused.db").exists()


def test_init_sql_output_applies(cli: Cli) -> None:
    ddl = cli("init", "--sql")
    assert ddl.returncode == 0
    if cli.url.startswith("sqlite"):
        conn = sqlite3.connect(cli.url.removeprefix("sqlite:///"))
        conn.executescript(ddl.stdout)
        conn.close()
    else:
        body = "\n".join(line for line in ddl.stdout.splitlines() if not line.startswith("--"))
        with cli.model().engine.connect() as conn:
            for statement in body.split(";"):
                if statement.strip():
                    conn.exec_driver_sql(statement)
    model = joblocks.JobLockModel(cli.url, table_name=cli.table, create_table=False)
    try:
        first = model.acquire_token("k", 60_000, "a")
        assert first is not None
        assert model.release("k", "a")
        second = model.acquire_token("k", 60_000, "b")
        assert second is not None
        assert second > first
    finally:
        model.dispose()


def test_init_and_doctor(cli: Cli) -> None:
    if cli.url.startswith("sqlite"):
        sqlite3.connect(cli.url.removeprefix("sqlite:///")).close()  # an empty database
    missing = cli("doctor")
    assert missing.returncode == 1
    assert f"table {cli.table} missing: run `joblocks init`" in missing.stdout
    assert "joblocks init" in one_line(missing.stderr)
    created = cli("init")
    assert created.returncode == 0
    assert created.stdout.startswith(f"created table {cli.table}")
    again = cli("init")
    assert again.returncode == 0
    assert "already exists" in again.stdout
    healthy = cli("doctor", "--json")
    assert healthy.returncode == 0, healthy.stdout
    report = json.loads(healthy.stdout)
    assert report["ok"] is True
    names = [(check["name"], check["status"]) for check in report["checks"]]
    assert [name for name, _ in names] == [
        "connect",
        "latency",
        "clock",
        "table",
        "fencing",
        "probe",
    ]
    assert all(status in ("ok", "warn") for _, status in names)
    assert report["round_trip_ms"] >= 0
    assert isinstance(report["clock_offset_ms"], float)
    assert cli.model().count() == 0  # the probe left nothing behind


def test_doctor_takes_the_url_as_its_argument(lite: Cli) -> None:
    assert lite("init").returncode == 0
    result = run_cli("--table", lite.table, "doctor", lite.url, "--json", env=lite.env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["source"] == "--url"
    assert report["database"].endswith(lite.url.removeprefix("sqlite:///"))
    other = lite.url + "-other"
    twice = lite("doctor", other)  # lite() passes --url too: two different URLs
    assert twice.returncode == 2
    assert "once" in one_line(twice.stderr)
    same = lite("doctor", lite.url)
    assert same.returncode == 0, same.stderr


def test_unreachable_database(tmp_path: Path) -> None:
    url = "postgresql://joblocks:s3cret@127.0.0.1:1/nothing"  # port 1: connection refused
    for command, code in (["doctor"], 1), (["list"], 3):
        result = run_cli("--url", url, *command, env=base_env(tmp_path))
        assert result.returncode == code
        line = one_line(result.stderr)
        assert "connect" in line.lower()
        assert "127.0.0.1" in line
        assert "Traceback" not in result.stdout
        assert "s3cret" not in result.stdout + result.stderr


def test_missing_sqlite_file_is_not_created(lite: Cli) -> None:
    listed = lite("list", "--json")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])
    peeked = lite("peek", "k", "--json")
    assert (peeked.returncode, json.loads(peeked.stdout)) == (1, None)
    released = lite("release", "k", "--force")  # a write: a wrong path is an error
    assert released.returncode == 3
    assert "does not exist" in one_line(released.stderr)
    assert not (lite.tmp / "locks.db").exists()


def test_where(tmp_path: Path) -> None:
    env = base_env(tmp_path)

    def where(*args: str, **extra: str) -> dict[str, Any]:
        result = run_cli(*args, "where", "--json", env={**env, **extra})
        assert result.returncode == 0, result.stderr
        assert "s3cret" not in result.stdout
        info: dict[str, Any] = json.loads(result.stdout)
        return info

    flag = where("--url", "postgresql://app:s3cret@db.example/app")
    assert flag["source"] == "--url"
    assert flag["url"] == "postgresql://app:***@db.example/app"
    from_env = where(JOBLOCKS_URL="mysql://app:s3cret@db.example/app")
    assert from_env["source"] == "JOBLOCKS_URL"
    assert from_env["backend"] == "mysql"
    default = where()
    assert default["source"] == "default"
    assert default["backend"] == "sqlite"
    assert default["url"].endswith(str(tmp_path / "state" / "joblocks" / "locks.db"))
    assert (default["table"], default["schema"]) == ("job_locks", None)


def test_version_help_and_script(tmp_path: Path) -> None:
    # Real processes: `python -m joblocks` and the installed `joblocks` script exist and
    # start (the other tests call the entry function they both run).
    env = base_env(tmp_path)
    version = subprocess.run(
        [sys.executable, "-m", "joblocks", "--version"], capture_output=True, text=True, env=env
    )
    assert version.stdout.strip() == f"joblocks {joblocks.__version__}"
    helped = subprocess.run(
        [sys.executable, "-m", "joblocks", "--help"], capture_output=True, text=True, env=env
    )
    assert helped.returncode == 0
    assert "examples:" in helped.stdout
    assert "joblocks run" in helped.stdout
    script = Path(sysconfig.get_path("scripts")) / "joblocks"
    assert script.exists(), "install the package (pip install -e .) for the joblocks script"
    installed = subprocess.run([str(script), "--version"], capture_output=True, text=True, env=env)
    assert installed.stdout == version.stdout
