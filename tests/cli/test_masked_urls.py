"""Passwords in URLs are never printed by the command line: ``where`` (text and JSON),
``doctor``, and every error line, for passwords in the user part and in password-like
query parameters, and for URLs that do not parse. The command line runs in the test's
process (``tests/support/cli.py``); the servers are unreachable ports (nothing listens
on port 1), so no server is needed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ..support.cli import Result, run_cli

SECRETS = ("hunter2", "s3cr")


def joblocks_cli(tmp_path: Path, *args: str, **env: str) -> Result:
    environ = dict(os.environ)
    environ.pop("JOBLOCKS_URL", None)
    environ["XDG_STATE_HOME"] = str(tmp_path / "state")
    environ.update(env)
    return run_cli(*args, env=environ)


def shows_no_secret(done: Result) -> None:
    for secret in SECRETS:
        assert secret not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr


MULTI_HOST = (
    "postgresql://u:hunter2@/db?host=a:5432,b:5432&target_session_attrs=read-write"
    "&password=s3cr-pw&sslpassword=s3cr-sslpw"
)
SHOWN = (
    "postgresql://u:***@/db?host=a:5432,b:5432&password=***&sslpassword=***"
    "&target_session_attrs=read-write"
)


def test_where_shows_a_multi_host_url_readably_and_masked(tmp_path: Path) -> None:
    done = joblocks_cli(tmp_path, "--url", MULTI_HOST, "where")
    assert done.returncode == 0, done.stderr
    shows_no_secret(done)
    assert SHOWN in done.stdout
    assert "%3A" not in done.stdout


def test_where_json_from_the_environment_is_masked(tmp_path: Path) -> None:
    done = joblocks_cli(tmp_path, "where", "--json", JOBLOCKS_URL=MULTI_HOST)
    assert done.returncode == 0, done.stderr
    shows_no_secret(done)
    assert json.loads(done.stdout)["url"] == SHOWN


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@127.0.0.1:1/db?password=s3cr-pw&sslpassword=s3cr-sslpw",
        "mysql://u@127.0.0.1:1/db?password=s3cr-pw",
        "mysql://u@127.0.0.1:1/db?passwd=s3cr-passwd",
    ],
)
def test_doctor_masks_query_passwords(tmp_path: Path, url: str) -> None:
    for args in (["doctor"], ["doctor", "--json"]):
        done = joblocks_cli(tmp_path, "--url", url, *args)
        assert done.returncode == 1, done.stdout + done.stderr
        shows_no_secret(done)
        assert "=***" in done.stdout


@pytest.mark.parametrize(
    "command", [["list"], ["peek", "job"], ["run", "job", "--ttl", "10s", "--", "true"]]
)
def test_error_lines_mask_query_passwords(tmp_path: Path, command: list[str]) -> None:
    url = "postgresql://u:hunter2@127.0.0.1:1/db?password=s3cr-pw"
    done = joblocks_cli(tmp_path, "--url", url, *command)
    assert done.returncode == 3, done.stderr
    shows_no_secret(done)
    assert "***" in done.stderr


@pytest.mark.parametrize(
    "url",
    [
        "u:hunter2@db/app",
        "postgresql://u:hunter2@db:54x/app?password=s3cr-pw",
        "postgres ql://u:hunter2@db/app",
    ],
)
@pytest.mark.parametrize("command", [["where"], ["list"], ["doctor"]])
def test_a_url_that_does_not_parse_is_printed_masked(
    tmp_path: Path, url: str, command: list[str]
) -> None:
    done = joblocks_cli(tmp_path, "--url", url, *command)
    assert done.returncode != 0
    shows_no_secret(done)
    assert "u:***@" in done.stdout + done.stderr
