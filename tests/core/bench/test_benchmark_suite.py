"""``benchmarks/suite.py --smoke --json``: every section of the benchmark suite runs at
tiny sizes on the servers it starts itself. Its figures are not judged (the machine is
shared): that each section printed positive figures and that its correctness counters
are zero are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.bench, pytest.mark.server, pytest.mark.timeout(900)]


def _positive(stats: dict[str, Any], *fields: str) -> None:
    assert "error" not in stats, stats
    for name in fields:
        assert stats[name] > 0, (name, stats)


def test_suite_smoke_prints_every_section_and_meets_its_checks(tmp_path: Path) -> None:
    out = tmp_path / "suite.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "suite.py"), "--smoke", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "all correctness checks met" in done.stdout
    res = json.loads(out.read_text())
    assert res["failures"] == []
    skipped = res["meta"]["skipped"]
    if skipped and os.environ.get("CI") == "true":
        pytest.fail(f"the suite could not start {skipped}")
    ran = res["meta"]["databases"]
    assert "sqlite" in ran
    for db in ran:
        uncontended = res["uncontended"][db]
        for variant in ("raw", "sync", "raw_aio", "aio"):
            _positive(uncontended[variant], "per_s", "p50_us", "p99_us")
        for face in ("sync", "aio"):
            assert uncontended[face]["ratio"] > 0, uncontended[face]

        refused = res["refused"][db]
        for face in ("raw", "sync", "aio"):
            _positive(refused[face], "per_s", "p50_us", "p99_us")
        # A refused acquire is one statement, as the raw driver's (counted by the
        # server, or by sqlite3's trace callback on the sync face).
        assert refused["raw"]["statements"]["per_op"] == 1, refused["raw"]["statements"]
        assert refused["sync"]["statements"]["per_op"] == 1, refused["sync"]["statements"]
        if db != "sqlite":
            assert refused["aio"]["statements"]["per_op"] == 1, refused["aio"]["statements"]

        for variant, stats in res["contention"][db].items():
            _positive(stats, "wins_per_s", "attempts_per_s", "holds_checked")
            checks = ["overlaps", "lost", "errors", "rows_left", "workers_failed"]
            if variant != "raw":
                checks.append("fence_errors")
            assert {name: stats[name] for name in checks} == dict.fromkeys(checks, 0), stats

        keepalive = res["keepalive"][db]
        _positive(keepalive["sync"], "per_s", "cpu_us")
        _positive(keepalive["aio"], "per_s")
        _positive(keepalive["loss"], "p50_ms", "max_ms")
        assert keepalive["lost"] == 0, keepalive

        _positive(res["cli"][f"joblocks run k --ttl 1m -- true ({db})"], "median_ms")
    _positive(res["cli"]["python -c 'import sqlalchemy'"], "median_ms")
    if "postgresql" in ran:
        _positive(res["peers"]["joblocks"], "per_s", "p50_us", "refused_p50_us")
        _positive(res["peers"]["advisory"], "per_s", "p50_us", "refused_p50_us")
