"""``joblocks run --record``: a run whose lock was lost is recorded ``lost``, with the
command's own exit status (not joblocks' 75), whether the command was stopped
(``--on-lost terminate``) or kept running (``--on-lost continue``). Real processes.
"""

from __future__ import annotations

from .test_cli import Cli, lite, one_line

__all__ = ["lite"]  # the fixture, imported for these tests


def test_ttl_running_out_is_recorded_lost_with_the_commands_status(lite: Cli) -> None:
    # The command gets SIGTERM when the ttl runs out: its own status is 128 + 15.
    ended = lite("run", "a", "--ttl", "500ms", "--no-keepalive", "--record", "--",
                 "sh", "-c", "exec sleep 20")  # fmt: skip
    assert ended.returncode == 75, ended.stderr
    assert "ran out" in ended.stderr
    (run,) = lite.model().runs("a")
    assert run.outcome == "lost"
    assert run.error is not None
    assert "exit status 143" in run.error
    assert "75" not in run.error
    assert "ran out" in run.error


def test_on_lost_continue_is_recorded_lost(lite: Cli) -> None:
    kept = lite("run", "b", "--ttl", "500ms", "--no-keepalive", "--on-lost", "continue",
                "--record", "--", "sh", "-c", "sleep 1.5")  # fmt: skip
    assert kept.returncode == 0
    assert "keeps running" in one_line(kept.stderr)
    (run,) = lite.model().runs("b")
    assert run.outcome == "lost"
    assert run.error is not None
    assert "ran out" in run.error
    assert "exit status" not in run.error

    failed = lite("run", "c", "--ttl", "500ms", "--no-keepalive", "--on-lost", "continue",
                  "--record", "--", "sh", "-c", "sleep 1.5; exit 4")  # fmt: skip
    assert failed.returncode == 4
    (run,) = lite.model().runs("c")
    assert run.outcome == "lost"
    assert run.error is not None
    assert "exit status 4" in run.error


def test_a_run_within_its_ttl_is_recorded_as_before(lite: Cli) -> None:
    """The control: ok and error (its exit status) while the lock is held."""
    ok_run = lite("run", "d", "--ttl", "30s", "--no-keepalive", "--record", "--", "true")
    assert ok_run.returncode == 0
    failed = lite("run", "e", "--ttl", "30s", "--record", "--", "sh", "-c", "exit 3")
    assert failed.returncode == 3
    (ok,) = lite.model().runs("d")
    (error,) = lite.model().runs("e")
    assert (ok.outcome, ok.error) == ("ok", None)
    assert (error.outcome, error.error) == ("error", "exit status 3")
