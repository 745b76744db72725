"""``benchmarks/suite.py --smoke``: CI's run of every code path of the benchmark suite,
issue 14's measurements included, on the throwaway servers it starts itself. Its figures
are not judged here (the machine is shared); that it runs, that each bar is measured and
that its correctness checks hold are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.server, pytest.mark.timeout(900)]

#: Targets the suite must print, by database ("*": every database that ran).
MEASURED = {
    "(issue 14) uncontended pairs/s, asyncio ÷ raw sqlite3 (with token), one key": "sqlite",
    "(issue 14) uncontended pairs/s, sync ÷ raw sqlite3 without a token, one key": "sqlite",
    "(issue 14) uncontended pairs/s, sync ÷ raw sqlite3 without a token, one key, "
    "alternating slices": "sqlite",
    "(issue 14) uncontended pairs/s, asyncio ÷ raw psycopg async, one key": "postgresql",
    "(issue 14) contention wins/s, joblocks sync ÷ raw, same statement "
    "(median of per-round ratios)": "*",
    "(issue 14) contention wins/s, joblocks sync ÷ raw, same statement, alternating slices": "*",
    "(issue 14) `joblocks run` ÷ `python -c 'import sqlalchemy'` (medians)": "*",
}
PG_IMPORTS = "python -c 'import psycopg, sqlalchemy.dialects.postgresql.psycopg'"
MEASURED_ALTERNATING = (
    "(issue 14) contention wins/s, joblocks sync ÷ raw, same statement, alternating slices"
)
#: Targets that are checks, not speed: they hold on any machine.
CHECKS = (
    "contention: zero overlaps, zero lost (all variants)",
    "refused acquire is one statement (sync)",
    "refused acquire is one statement (asyncio)",
)


def test_suite_smoke_measures_every_bar(tmp_path: Path) -> None:
    out = tmp_path / "suite.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "suite.py"), "--smoke", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    res = json.loads(out.read_text())
    skipped = res["meta"].get("skipped_databases") or {}
    if skipped and os.environ.get("CI") == "true":
        pytest.fail(f"the suite could not start {skipped}")
    ran = [db for db in ("sqlite", "postgresql", "mariadb") if db not in skipped]
    targets: dict[tuple[str, str], dict[str, object]] = {
        (t["target"], t["database"]): t for t in res["targets"]
    }
    for name, where in MEASURED.items():
        for db in ran if where == "*" else [where]:
            if db not in ran:
                continue
            t = targets.get((name, db))
            assert t is not None, f"not measured: {name} on {db}"
            value = t["value"]
            assert isinstance(value, float), t
            assert value > 0, t
    for name in CHECKS:
        for db in ran:
            t = targets[(name, db)]
            assert t["met"] is True, t
    for db in ran:
        # The alternating contention run charges each variant the workers' CPU time of
        # its own slices, and reads the machine's busy cores over the run: the CPU per
        # win that bounds the bar is printed with it.
        for side in ("joblocks sync, upsert", "raw, one-statement upsert"):
            rounds = res["results"]["contention"][db][f"alternating slices: {side}"]["rounds"]
            for stats in rounds:
                assert stats["client_cpu_s"] > 0, (db, side, stats)
                assert stats["wins"] > 0, (db, side, stats)
                assert stats["busy_cores"] is None or stats["busy_cores"] > 0, (db, stats)
        t = targets[(MEASURED_ALTERNATING, db)]
        assert "CPU per win: client" in str(t["detail"]), t
    if "postgresql" in ran:
        # The floor of the "÷ dislock's CLI" bar: the imports of a PostgreSQL run.
        floor = res["results"]["cli"][PG_IMPORTS]
        assert floor["median_ms"] > 0, floor
