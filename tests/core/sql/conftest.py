"""``--update-golden``: write the golden SQL files from what the tests capture, instead
of comparing (``pytest tests/core/sql --update-golden``)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/core/sql/golden/*.sql from the SQL sent (instead of comparing)",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden", default=False))
