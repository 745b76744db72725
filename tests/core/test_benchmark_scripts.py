"""The benchmark scripts docs/performance.md quotes for issue 14's limits run, at tiny
sizes, and print every figure the docs read off them. Their figures are not judged
here (timed assertions do not belong in a test suite on shared machines); that each
layer was measured, and the ceilings computed from them, is."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.servers import Server

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"(\d+(?:\.\d+)?)"


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _row(out: str, name: str) -> list[float]:
    """The numbers printed after the row called ``name``."""
    for line in out.splitlines():
        if line.strip().startswith(name):
            return [float(x) for x in re.findall(NUMBER, line.strip()[len(name) :])]
    raise AssertionError(f"no row {name!r} in:\n{out}")


def test_profile_hot_layers_prints_every_layer() -> None:
    out = _run("profile_hot.py", "--layers", "--rounds", "1", "--pairs", "30")
    layers = (
        "raw sqlite3, no token (the bar's baseline)",
        "raw sqlite3, with token",
        "joblocks' statements, bare sqlite3 cursor",
        "the thinnest library: checks, a kept connection, errors",
        "+ _execute.execute",
        "+ _ops (parameters, outcome)",
        "+ the connection cache (_attempt)",
        "+ life cycle, validation, call (_drive)",
        "JobLockModel.acquire + release",
        "the same, stand-in cursor (no database)",
    )
    for name in layers:
        median, low, ratio = _row(out, name)
        assert 0 < low <= median, name
        assert ratio > 0, name
    assert _row(out, layers[0])[2] == 1.0


def test_profile_hot_fence_prints_each_token() -> None:
    out = _run("profile_hot.py", "--fence", "--rounds", "1", "--pairs", "30")
    for name in ("no token", "counter read, no trigger", "counter table + triggers (joblocks)"):
        median, low, ratio = _row(out, name)
        assert 0 < low <= median, name
        assert ratio > 0, name


def test_aio_pg_layers_prints_the_floor_and_the_ceiling(pg_server: Server) -> None:
    out = _run("aio_pg_layers.py", "--url", pg_server.url, "--calls", "20", "--rounds", "1")
    for name in (
        "raw psycopg async, own connection",
        "psycopg connection of the pool, joblocks' SQL",
        "greenlet_spawn x2, nothing in it",
        "greenlet_spawn x2 + pool check-out/in",
        "greenlet per call, pooled connection held, SQL only",
        "_in_greenlet acquire + release (no life cycle)",
        "joblocks.aio acquire + release",
    ):
        cpu, wall = _row(out, name)[-2:]
        assert min(cpu, wall) > 0, name
    found = re.search(
        rf"the face ÷ raw: {NUMBER} wall, {NUMBER} CPU; ceiling on the run_sync path "
        rf".*: {NUMBER} wall, {NUMBER} CPU",
        out,
    )
    assert found, out
    assert all(float(x) > 0 for x in found.groups())


def test_aio_pg_layers_rejects_bad_sizes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "aio_pg_layers.py"), "--calls", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "--calls and --rounds" in done.stderr


def test_aio_versions_cpu_compares_two_checkouts_on_sqlite() -> None:
    src = str(ROOT / "src")
    out = _run(
        "aio_versions_cpu.py", src, src, "--databases", "sqlite", "--pairs", "30", "--repeat", "1"
    )
    for side in ("old", "new"):
        line = next(x for x in out.splitlines() if x.strip().startswith(f"{side}: joblocks CPU"))
        figures = [float(x) for x in re.findall(NUMBER, line)]
        assert len(figures) >= 4, line
        assert min(figures[:4]) > 0, line
    assert "new ÷ old joblocks CPU per pair, per round:" in out


def test_cli_startup_prints_the_ratio_and_where_the_time_goes() -> None:
    out = _run("cli_startup.py", "--runs", "2", "--profile-runs", "1")
    wall, _p25, _p75, ratio, cpu, cpu_ratio = _row(out, "python -m joblocks run k --ttl 1m -- true")
    assert min(wall, ratio, cpu, cpu_ratio) > 0
    assert _row(out, "python -c 'import sqlalchemy'")[3] == 1.0
    for owner in ("joblocks", "all imports"):
        assert any(line.strip().endswith(owner) for line in out.splitlines()), out
    assert "connect → command started" in out
