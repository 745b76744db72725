"""``joblocks run --schedule CRON [--timezone TZ] [--skip-exit-code N]`` (the command line
run in the test's process, ``tests/support/cli.py``)."""

from __future__ import annotations

from joblocks._core.schedule import Schedule
from joblocks._db.connections import from_ms
from tests.cli.test_cli import Cli, cli, lite, one_line  # noqa: F401 - fixtures

YEARLY = "0 0 1 1 *"


def test_one_run_per_slot(cli: Cli) -> None:  # noqa: F811 - the fixture
    ran = cli.tmp / "ran"
    first = cli("run", "nightly", "--ttl", "1m", "--schedule", YEARLY, "--", "touch", str(ran))
    assert (first.returncode, first.stderr) == (0, "")
    assert ran.exists()
    ran.unlink()
    # the command ended: the row is kept to the end of the slot
    row = cli.model().peek("nightly")
    assert row is not None
    slot = Schedule.parse(YEARLY).slot(round(row.acquired_at.timestamp() * 1000))
    assert row.expires_at == from_ms(slot[1])
    second = cli("run", "nightly", "--ttl", "1m", "--schedule", YEARLY, "--", "touch", str(ran))
    assert second.returncode == 0  # like a conflict, quiet for cron by default
    line = one_line(second.stderr)
    assert "'nightly': the slot" in line
    assert "was already run" in line
    assert "not running touch" in line
    options = ["--quiet", "--skip-exit-code", "9", "--conflict-exit-code", "8"]
    third = cli("run", "nightly", "--ttl", "1m", "--schedule", YEARLY, *options, "--", "true")
    assert (third.returncode, third.stderr) == (9, "")
    assert not ran.exists()


def test_timezone(lite: Cli) -> None:  # noqa: F811 - the fixture
    result = lite("run", "job", "--ttl", "1m", "--schedule", "0 3 * * *", "--timezone",
                  "America/New_York", "--", "true")  # fmt: skip
    assert result.returncode == 0
    row = lite.model().peek("job")
    assert row is not None
    slot = Schedule.parse("0 3 * * *", "America/New_York").slot(
        round(row.acquired_at.timestamp() * 1000)
    )
    assert row.expires_at == from_ms(slot[1])


def test_usage_errors(lite: Cli) -> None:  # noqa: F811 - the fixture
    for args, words in [
        (["--schedule", "0 0 * *"], "has 4 fields"),
        (["--schedule", "61 * * * *"], "not a valid cron expression"),
        (["--timezone", "UTC"], "timezone needs --schedule"),
        (["--schedule", "* * * * *", "--timezone", "Mars/Base"], "not a known IANA time zone"),
    ]:
        result = lite("run", "job", "--ttl", "1m", *args, "--", "true")
        assert result.returncode == 2, args
        assert words in one_line(result.stderr)
    assert lite.model().peek("job") is None
