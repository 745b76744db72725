"""A SQLite path that exists and is not a regular file is bad input on both faces,
refused before SQLite creates anything beside it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import joblocks
import joblocks.aio


def test_a_directory_is_refused_on_both_faces(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}"
    with pytest.raises(ValueError, match=r"database: the SQLite path .* is a directory"):
        joblocks.JobLockModel(url).acquire("job", 1000, "w1")

    async def main() -> None:
        with pytest.raises(ValueError, match=r"database: the SQLite path .* is a directory"):
            await joblocks.aio.JobLockModel(url).acquire("job", 1000, "w1")

    asyncio.run(main())
    assert list(tmp_path.parent.glob(f"{tmp_path.name}-*")) == []


def test_dev_null_is_refused() -> None:
    with pytest.raises(ValueError, match="not a regular file"):
        joblocks.JobLockModel("sqlite:////dev/null").acquire("job", 1000, "w1")
