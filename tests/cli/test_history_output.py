"""``joblocks history --html``: a path that cannot be written is a one-line error naming
it (a usage error, exit 2), not an internal error; ``-`` writes the page to stdout.
On SQLite, the command line run in the test's process (``tests/support/cli.py``)."""

from __future__ import annotations

import os
from pathlib import Path

from ..support.cli import Result, run_cli


def cli(tmp_path: Path, *args: str) -> Result:
    env = {k: v for k, v in os.environ.items() if k != "JOBLOCKS_URL"}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    return run_cli("--url", url, *args, env=env, cwd=tmp_path)


def recorded(tmp_path: Path) -> None:
    done = cli(tmp_path, "run", "nightly", "--ttl", "1m", "--record", "--", "true")
    assert done.returncode == 0, done.stderr


def test_an_unwritable_html_path_is_a_one_line_error(tmp_path: Path) -> None:
    recorded(tmp_path)
    target = tmp_path / "no" / "such" / "dir" / "x.html"
    done = cli(tmp_path, "history", "--html", str(target))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(target) in lines[0]
    assert "No such file or directory" in lines[0]
    assert "internal error" not in done.stderr
    assert not target.parent.exists()


def test_html_dash_writes_the_page_to_stdout(tmp_path: Path) -> None:
    recorded(tmp_path)
    done = cli(tmp_path, "history", "--html", "-")
    assert done.returncode == 0, done.stderr
    assert done.stdout.lstrip().lower().startswith("<!doctype html")
    assert "nightly" in done.stdout
    assert done.stdout.rstrip().endswith("</html>")
    assert not (tmp_path / "-").exists()
