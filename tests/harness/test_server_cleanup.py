"""The throwaway servers of the test set-up (``tests/support/servers.py``) never outlive
the pytest run that started them: not when it ends normally, not when it is ended by
SIGTERM (a cancelled CI job, ``timeout``), not when it is killed outright (SIGKILL).

Each case runs a small pytest session in a subprocess that takes the suite's own
session fixtures (``tests/conftest.py``: PostgreSQL, PgBouncer in front of it, MariaDB)
and writes down their PIDs and data directories, then checks that no process of those
servers is left: in one process, and in parallel (``-n 2``), where the controlling
process starts the servers for its workers (``tests/support/shared.py``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import joblocks

from ..support import servers
from ..support.matrix import unavailable

# Each case is a whole pytest run of its own (servers started, killed, checked): in the
# `slow` step, beside the races, not in the default run.
pytestmark = [pytest.mark.server, pytest.mark.slow, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60.0

INNER = """
import os
import time
from pathlib import Path


def test_servers(pg_server, pgbouncer_transaction, mariadb_server):
    started = [pg_server, pgbouncer_transaction, mariadb_server]
    lines = [f"{s.pid} {s.root_dir}" for s in started]
    out = Path(os.environ["LEAK_CHECK_OUT"])
    out.with_suffix(".tmp").write_text("\\n".join(lines) + "\\n")
    out.with_suffix(".tmp").rename(out)
    if os.environ["LEAK_CHECK_HOW"] != "normal":
        time.sleep(120)  # until the test ends it
"""


def _require_servers() -> None:
    if servers._find_pg_bindir() is None:
        unavailable("PostgreSQL binaries (initdb, postgres) not found")
    if servers._find_exe("pgbouncer") is None:
        unavailable("pgbouncer not found")
    if servers._find_exe("mariadbd", "mysqld") is None:
        unavailable("MariaDB binaries (mariadbd) not found")


def _processes() -> dict[int, tuple[str, int, int, int]]:
    """Every process: pid → (state, ppid, process group, start time)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp session tty tpgid flags ... starttime (22nd field);
        # comm may hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        found[int(entry.name)] = (fields[0], int(fields[1]), int(fields[2]), int(fields[19]))
    return found


def _family(servers: list[int]) -> dict[int, int]:
    """The servers' processes now: each server, its children (PostgreSQL's backends and
    auxiliary processes lead groups of their own) and its group; pid → start time."""
    return {
        pid: started
        for pid, (_, ppid, pgrp, started) in _processes().items()
        if pid in servers or ppid in servers or pgrp in servers
    }


def _alive(family: dict[int, int], servers: list[int]) -> list[int]:
    """Those of ``family`` still running (not zombies, not a reused PID), and any
    process in a server's group."""
    return sorted(
        pid
        for pid, (state, _, pgrp, started) in _processes().items()
        if state != "Z" and (family.get(pid) == started or pgrp in servers)
    )


def _wait_for(what: str, done: Callable[[], object], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout:.0f}s")
        time.sleep(0.05)


@pytest.fixture
def tmpdir_for_servers() -> Iterator[Path]:
    """TMPDIR of the inner run: its servers' directories, removed afterwards.

    Not under pytest's temporary root (see ``server_or_skip``)."""
    path = Path(tempfile.mkdtemp(prefix="joblocks-leakcheck-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("workers", ["0", "2"])  # in one process; shared by xdist workers
@pytest.mark.parametrize("how", ["normal", "sigterm", "sigkill"])
def test_no_server_outlives_the_run(
    how: str, workers: str, tmp_path: Path, tmpdir_for_servers: Path
) -> None:
    _require_servers()
    (tmp_path / "test_inner.py").write_text(INNER)
    out = tmp_path / "servers.txt"
    src = str(Path(joblocks.__file__).resolve().parents[1])  # this joblocks, not another
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([src, str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "TMPDIR": str(tmpdir_for_servers),
        "LEAK_CHECK_OUT": str(out),
        "LEAK_CHECK_HOW": how,
    }
    argv = [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider"]
    argv += ["-q", "-x", "-n", workers, "test_inner.py"]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    started: list[tuple[int, Path]] = []
    family: dict[int, int] = {}
    try:
        _wait_for("servers started", lambda: out.exists() or proc.poll() is not None)
        if out.exists():
            for line in out.read_text().splitlines():
                number, root = line.split(" ", 1)
                started.append((int(number), Path(root)))
            family = _family([pid for pid, _ in started])
        if how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        elif how == "sigkill":
            proc.kill()
        output = proc.communicate(timeout=WAIT_S)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=WAIT_S)
    text = output.decode(errors="replace")
    assert len(started) == 3, text

    # A server stopped by its parent-death signal may take a moment to shut down.
    pids = [pid for pid, _ in started]
    assert len(family) > len(pids), family  # PostgreSQL's processes were seen
    deadline = time.monotonic() + 30
    left = _alive(family, pids)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _alive(family, pids)
    for pid in left:  # leave nothing running, then fail
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"server processes still running after the run: {left}\n{text}"

    if how == "normal":
        assert proc.returncode == 0, text
    elif how == "sigterm":
        assert proc.returncode == pytest.ExitCode.INTERRUPTED, text  # as on Ctrl-C
    if how != "sigkill":  # after SIGKILL no cleanup of ours runs: the dirs stay
        assert [root for _, root in started if root.exists()] == [], text
