"""pytest plugin of joblocks: a throwaway lock database for each test that asks for one.

Fixtures:

- ``joblocks_model``: a :class:`~joblocks.JobLockModel` on a new SQLite file in the
  test's ``tmp_path``, joblocks's default for the test's duration (see
  :func:`joblocks.testing.temporary_model`); the previous configuration is restored
  after the test.
- ``joblocks_url``: that model's database URL (for subprocesses, ``JOBLOCKS_URL``).

Enable it with ``-p joblocks.pytest_plugin`` or ``pytest_plugins =
["joblocks.pytest_plugin"]`` in a ``conftest.py``. See docs/testing.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._sync.model import JobLockModel
from .testing import temporary_model


@pytest.fixture
def joblocks_model(tmp_path: Path) -> Iterator[JobLockModel]:
    """A JobLockModel on a fresh SQLite file, configured as joblocks's default."""
    with temporary_model(tmp_path) as model:
        yield model


@pytest.fixture
def joblocks_url(joblocks_model: JobLockModel) -> str:
    """The URL of ``joblocks_model``'s database (set it as ``JOBLOCKS_URL`` for children)."""
    url: str = joblocks_model.engine.url.render_as_string(hide_password=False)
    return url
