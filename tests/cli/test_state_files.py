"""The per-user SQLite file: private modes whatever the umask, refused when another user
owns it or may write it, a relative ``XDG_STATE_HOME`` ignored, and SQLite paths that
are not regular files refused before anything is created. The command line runs in the
test's process (``tests/support/cli.py``, with the umask and working directory of the
call); a run whose files are looked at while it holds the lock is a real process."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..support.cli import Result, run_cli

TIMEOUT = 60

posix_only = pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX file modes")


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("JOBLOCKS_URL", None)
    env["HOME"] = str(tmp_path / "home")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env.update(extra)
    return env


def joblocks_cli(
    env: dict[str, str], *args: str, umask: int | None = None, cwd: Path | None = None
) -> Result:
    return run_cli(*args, env=env, cwd=cwd, umask=umask)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"exited with {proc.returncode} before {path.name}: {out}{err}")
        if time.monotonic() > deadline:
            pytest.fail(f"{path.name} did not appear within {timeout} s")
        time.sleep(0.02)


@posix_only
def test_the_default_directory_and_files_are_private_under_umask_000(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    ready, go = tmp_path / "ready", tmp_path / "go"
    script = 'touch "$1"; while [ ! -e "$2" ]; do sleep 0.02; done'
    # A real process: the files are looked at while it holds the lock.
    proc = subprocess.Popen(
        [sys.executable, "-m", "joblocks", "run", "job", "--ttl", "30s", "--record", "--",
         "sh", "-c", script, "held", str(ready), str(go)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, umask=0,
    )  # fmt: skip
    try:
        wait_for(ready, proc)
        directory = tmp_path / "state" / "joblocks"
        # While the lock is held, SQLite's side files exist: they take the file's mode.
        files = sorted(directory.iterdir())
        assert directory / "locks.db" in files
        assert mode(directory) == 0o700
        for path in files:
            assert mode(path) == 0o600, (path, oct(mode(path)))
    finally:
        go.touch()
        _out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err


@posix_only
def test_an_older_readable_file_is_tightened(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    directory = tmp_path / "state" / "joblocks"
    directory.mkdir(parents=True, mode=0o755)
    directory.chmod(0o755)
    done = joblocks_cli(env, "run", "job", "--ttl", "10s", "--", "true")
    assert done.returncode == 0, done.stderr
    (directory / "locks.db").chmod(0o644)
    done = joblocks_cli(env, "list")
    assert done.returncode == 0, done.stderr
    assert mode(directory) == 0o700
    assert mode(directory / "locks.db") == 0o600


@posix_only
@pytest.mark.parametrize(("which", "chmod"), [("dir", 0o777), ("dir", 0o720), ("file", 0o646)])
def test_a_directory_or_file_others_may_write_is_refused(
    tmp_path: Path, which: str, chmod: int
) -> None:
    env = env_for(tmp_path)
    done = joblocks_cli(env, "run", "job", "--ttl", "10s", "--", "true")
    assert done.returncode == 0, done.stderr
    directory = tmp_path / "state" / "joblocks"
    target = directory if which == "dir" else directory / "locks.db"
    target.chmod(chmod)
    marker = tmp_path / "ran"
    for command in (["run", "job", "--ttl", "10s", "--", "touch", str(marker)], ["list"]):
        done = joblocks_cli(env, *command)
        assert done.returncode == 3, done.stdout + done.stderr
        line = done.stderr.strip()
        assert len(line.splitlines()) == 1, line
        assert str(target) in line
        assert "writable by" in line
        assert f"{chmod:04o}" in line
    assert not marker.exists()
    assert mode(target) == chmod  # refused, not silently changed


@posix_only
@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() != 0, reason="chown needs root")
def test_a_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    done = joblocks_cli(env, "run", "job", "--ttl", "10s", "--", "true")
    assert done.returncode == 0, done.stderr
    path = tmp_path / "state" / "joblocks" / "locks.db"
    os.chown(path, 65534, 65534)
    done = joblocks_cli(env, "run", "job", "--ttl", "10s", "--", "true")
    assert done.returncode == 3, done.stderr
    assert str(path) in done.stderr
    assert "owned by uid 65534" in done.stderr


def test_a_relative_xdg_state_home_is_ignored(tmp_path: Path) -> None:
    env = env_for(tmp_path, XDG_STATE_HOME="relative/state")
    expected = tmp_path / "home" / ".local" / "state" / "joblocks" / "locks.db"
    for cwd in (tmp_path / "one", tmp_path / "two"):
        cwd.mkdir()
        done = joblocks_cli(env, "where", "--json", cwd=cwd)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["url"] == f"sqlite+pysqlite:///{expected}"
        done = joblocks_cli(env, "run", "job", "--ttl", "10s", "--", "true", cwd=cwd)
        assert done.returncode == 0, done.stderr
        assert not (cwd / "relative").exists()
    assert expected.is_file()


def test_where_prints_absolute_paths(tmp_path: Path) -> None:
    done = joblocks_cli(env_for(tmp_path), "--url", "sqlite:///rel.db", "where", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"sqlite:///{tmp_path / 'rel.db'}" in done.stdout


@pytest.mark.parametrize("where", ["/dev/null", "directory"])
@pytest.mark.parametrize("command", [["run", "job", "--ttl", "10s", "--", "true"], ["init"]])
def test_a_sqlite_path_that_is_not_a_regular_file_is_refused(
    tmp_path: Path, where: str, command: list[str]
) -> None:
    path = Path(where) if where.startswith("/") else tmp_path / where
    sides = [path.with_name(path.name + side) for side in ("-journal", "-wal", "-shm")]
    sides_before = {side: side.exists() and side.stat().st_mtime_ns for side in sides}
    before = None
    if where == "directory":
        path.mkdir()
        before = set(tmp_path.iterdir())
    done = joblocks_cli(env_for(tmp_path), "--url", f"sqlite:///{path}", *command)
    assert done.returncode == 2, done.stdout + done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert str(path) in line
    assert "not a regular file" in line or "is a directory" in line
    # nothing created (or written) beside it
    assert {side: side.exists() and side.stat().st_mtime_ns for side in sides} == sides_before
    if before is not None:
        assert set(tmp_path.iterdir()) == before
