"""``joblocks run --max-holders N`` and ``joblocks peek`` of a counted key on SQLite and
PostgreSQL (the helpers of tests/cli: the holders are real ``python -m joblocks``
processes, the other calls run in the test's process)."""

from __future__ import annotations

import json

from .test_cli import Cli, cli, finish, holding

__all__ = ["cli"]  # the fixture, used by name


def test_run_max_holders(cli: Cli) -> None:
    first, go_first, _ = holding(cli, "export", "a", "--max-holders", "2")
    second, go_second, _ = holding(cli, "export", "b", "--max-holders", "2")

    third = cli("run", "export", "--ttl", "30s", "--max-holders", "2", "--", "true")
    assert third.returncode == 0  # skipped: the conflict exit code
    assert "is held by 2 of 2 holders" in third.stderr
    assert "not running true" in third.stderr

    peek = cli("peek", "export", "--json")
    assert peek.returncode == 0
    shown = json.loads(peek.stdout)
    assert shown["holder"] == "joblocks:max_holders=2"
    assert sorted(h["key"] for h in shown["holders"]) == ["export\u241f1", "export\u241f2"]
    assert all(h["state"] == "held" for h in shown["holders"])
    text = cli("peek", "export")
    assert "holders (2 held of 2 places):" in text.stdout

    plain = cli("run", "export", "--ttl", "30s", "--", "true")
    assert plain.returncode == 0
    assert "joblocks:max_holders=2" in plain.stderr  # a plain run meets the group row

    other = cli("run", "export", "--ttl", "30s", "--max-holders", "3", "--", "true")
    assert other.returncode == 3
    assert "cannot be taken with max_holders=3: it is in use with max_holders=2" in other.stderr

    go_first.touch()
    assert finish(first)[0] == 0
    ran = cli("run", "export", "--ttl", "30s", "--max-holders", "2", "--", "echo", "in")
    assert (ran.returncode, ran.stdout.strip()) == (0, "in")  # a place is free again
    go_second.touch()
    assert finish(second)[0] == 0


def test_bad_max_holders_is_a_usage_error(cli: Cli) -> None:
    for bad in ("0", "1001", "two"):
        done = cli("run", "export", "--ttl", "30s", "--max-holders", bad, "--", "true")
        assert done.returncode == 2, done.stderr
        assert "--max-holders" in done.stderr
