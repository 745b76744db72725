"""Rows as Python values."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from .._sql.schema import decode_text

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def from_ms(ms: int) -> datetime:
    """Epoch milliseconds to an aware UTC datetime (exact, no float rounding)."""
    return _EPOCH + timedelta(milliseconds=int(ms))


@dataclass(frozen=True)
class JobLock:
    """One row of the ``job_locks`` table, as read at ``read_at`` (the database's time).

    ``key`` is the lock key (the ``id`` column), ``holder`` the worker that took it,
    ``fence`` the fencing token of its grant. All datetimes are timezone-aware UTC.
    """

    key: str
    holder: str
    acquired_at: datetime
    expires_at: datetime
    fence: int
    read_at: datetime

    @property
    def id(self) -> str:
        """The reference's name for the key (``_id``)."""
        return self.key

    @property
    def expired(self) -> bool:
        """Whether the lease had run out when the row was read (by the database's clock)."""
        return self.expires_at <= self.read_at

    @property
    def remaining(self) -> timedelta:
        """Time left on the lease when the row was read (zero once expired)."""
        return max(self.expires_at - self.read_at, timedelta(0))

    @classmethod
    def from_row(cls, row: Any) -> JobLock:
        key, holder, acquired, expires, fence, now = row
        return cls(
            key=decode_text(key),
            holder=decode_text(holder),
            acquired_at=from_ms(acquired),
            expires_at=from_ms(expires),
            fence=int(fence),
            read_at=from_ms(now),
        )
