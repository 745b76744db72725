"""The command line refuses keys holding U+241F (the separator of a counted lease's
places) like other bad keys, still shows and releases a place by its row id, and names
the effective user, not ``USER``/``LOGNAME``, in the forced-release audit line. The
command line runs in the test's process (``tests/support/cli.py``)."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

import joblocks

from ..support import cli

MARK = "\u241f"


def run_cli(tmp_path: Path, *args: str, **env: str) -> cli.Result:
    environ = dict(os.environ)
    environ.pop("JOBLOCKS_URL", None)
    environ["XDG_STATE_HOME"] = str(tmp_path / "state")
    environ.update(env)
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    return cli.run_cli("--url", url, *args, env=environ)


def test_run_refuses_a_key_with_the_place_mark_like_other_bad_keys(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    bad = run_cli(tmp_path, "run", f"export{MARK}1", "--ttl", "10s", "--", "touch", str(marker))
    other = run_cli(tmp_path, "run", "a\tb" * 200, "--ttl", "10s", "--", "touch", str(marker))
    assert other.returncode == 2, other.stderr
    assert bad.returncode == other.returncode, bad.stderr
    assert "must not contain U+241F" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert not marker.exists()
    assert not (tmp_path / "locks.db").exists()


def test_a_place_is_shown_and_force_released_by_its_row_id(tmp_path: Path) -> None:
    model = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'locks.db'}")
    try:
        held = model.try_lease("export", 60_000, max_holders=2, keepalive=False)
        assert held is not None
        done = run_cli(tmp_path, "peek", held.key)
        assert done.returncode == 0, done.stderr
        done = run_cli(tmp_path, "release", held.key, "--force")
        assert done.returncode == 0, done.stderr
        assert model.peek(held.key) is None
    finally:
        model.dispose()


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX uids")
def test_the_forced_release_audit_line_names_the_effective_user(tmp_path: Path) -> None:
    model = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'locks.db'}")
    try:
        assert model.acquire("cleanup", 60_000, "cron@web-1:4242")
    finally:
        model.dispose()
    done = run_cli(tmp_path, "release", "cleanup", "--force", USER="mallory", LOGNAME="mallory")
    assert done.returncode == 0, done.stderr
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert f"force-released by {me}@" in done.stderr
    assert "mallory" not in done.stderr
