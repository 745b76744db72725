"""``iter_locks()`` keeps memory flat however large the table: the peak of Python
allocations while iterating grows with the page, not with the table (``list()``, the
reference, grows with the table)."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import MetaData, create_engine

import joblocks

SMALL, LARGE = 4_000, 20_000


def _fill(url: str, table_name: str, rows: int) -> None:
    """``rows`` expired rows, bulk-inserted into a table made by ``create_table()``."""
    table = joblocks.build_table(MetaData(), table_name)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                table.insert(),
                [
                    {
                        "id": f"k{i:06d}",
                        "holder": "h",
                        "acquired_at": 0,
                        "expires_at": 1,
                        "fence": i + 1,
                    }
                    for i in range(rows)
                ],
            )
    finally:
        engine.dispose()


def _peak(fn: Callable[[], object]) -> int:
    """Peak bytes of Python allocations while ``fn`` runs."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _drain(model: joblocks.JobLockModel) -> int:
    return sum(1 for _ in model.iter_locks("all", batch_size=500))


def test_iter_locks_peak_memory_does_not_grow_with_the_table(tmp_path: Path) -> None:
    peaks: dict[int, tuple[int, int]] = {}
    for rows in (SMALL, LARGE):
        url = f"sqlite:///{tmp_path / f'{rows}.db'}"
        model = joblocks.JobLockModel(url, table_name="locks")
        try:
            model.create_table()
            _fill(url, "locks", rows)
            assert _drain(model) == rows  # warm: connection and statements made
            assert len(model.list("all")) == rows
            peaks[rows] = (_peak(lambda m=model: _drain(m)), _peak(lambda m=model: m.list("all")))
        finally:
            model.dispose()
    (iter_small, list_small), (iter_large, list_large) = peaks[SMALL], peaks[LARGE]
    # The measure sees a table five times larger in list() ...
    assert list_large > 3 * list_small, peaks
    # ... and none of it in iter_locks(), whose peak is a fraction of list()'s.
    assert iter_large < 1.5 * iter_small + 256 * 1024, peaks
    assert iter_large * 4 < list_large, peaks
