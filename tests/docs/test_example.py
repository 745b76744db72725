"""The README's quick-start example really races two processes and one runs the job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_race_example_runs_the_job_once(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "race.py"), str(tmp_path / "locks.db")],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count(": running 'nightly-report'") == 1
    assert out.stdout.count("skipped, another replica holds") == 1
    assert "the job ran 1 time(s) for 2 replicas" in out.stdout


def test_fenced_job_example(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "fenced_job.py"),
            f"sqlite:///{tmp_path / 'a.db'}",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "sent 35 invoices"
