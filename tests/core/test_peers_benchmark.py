"""``benchmarks/peers_pg.py`` drives joblocks through the peers' harness (the peers
themselves need their own venv, ``benchmarks/peers/setup.sh``, and are left out here).
Its figures are not judged; its correctness checks are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.servers import Server

ROOT = Path(__file__).resolve().parents[2]


def test_peers_pg_benchmark_smoke_joblocks_only(pg_server: Server, tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "peers_pg.py"),
            "--smoke",
            "--no-peers",
            "--url",
            pg_server.url,
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "peers SKIPPED" in done.stdout
    res = json.loads(out.read_text())
    for face in ("sync", "aio"):
        assert res["uncontended"][f"joblocks {face}"]["pairs"]["n"] > 0
        contended = res["contention"][f"joblocks {face}"]
        assert contended["holds_checked"] > 0
        assert contended["increments"] == contended["counter"]
        assert (contended["overlaps"], contended["lost_updates"], contended["errors"]) == (0, 0, 0)
    takeover = res["takeover"]["joblocks"]
    assert [t.get("error") for t in takeover["trials"]] == [None]
    assert set(res["takeover"]) == {"joblocks"}
