"""Counted leases where deployments run (``DEPLOYMENTS``): also behind PgBouncer in
transaction and session mode and on a server whose default isolation is serializable
(a counted acquire sends several statements on one connection, none in a transaction
of its own making)."""

from __future__ import annotations

import time
from typing import Any

import pytest

import joblocks

DEPLOYMENTS = True


@pytest.mark.acquire_paths
def test_places_everywhere(model: Any, key: str) -> None:
    leases = [model.try_lease(key, 10_000, holder=f"h{i}", max_holders=2) for i in range(2)]
    assert sorted(lease.place for lease in leases) == [1, 2]
    assert model.try_lease(key, 10_000, holder="h2", max_holders=2) is None
    assert model.acquire(key, 10_000, "plain") is False
    with pytest.raises(joblocks.LockHoldersMismatch):
        model.try_lease(key, 10_000, holder="h3", max_holders=3)
    assert leases[0].refresh() is True
    assert model.peek(key).expires_at >= model.peek(leases[0].key).expires_at
    assert leases[0].release() is True
    again = model.try_lease(key, 10_000, holder="h2", max_holders=2)
    assert again.place == leases[0].place
    assert again.token > leases[0].token
    assert sorted(row.holder for row in model.holders(key)) == ["h1", "h2"]


def test_expired_place_taken_over(model: Any, key: str) -> None:
    short = model.try_lease(key, 150, holder="a", max_holders=1)
    time.sleep(0.3)
    taken = model.try_lease(key, 10_000, holder="b", max_holders=1)
    assert taken is not None
    assert taken.token > short.token
    assert short.release() is False
