"""``schedule=``: at most one start per slot of a cron schedule, across every replica.

A slot is the period between two fire times of the schedule (``_core.schedule``), taken
from the **database's** now (SQLite: this machine's clock, as SQLite has no other).
No schema change: the row's ``acquired_at`` already says when the key's last run
started, so a scheduled acquire is the ``UPDATE`` + ``INSERT`` acquire path with one
more condition, ``acquired_at < :slot_start`` (``_statements.IN_SLOT``):

- a row whose last grant is in this slot is never granted again in this slot, even if
  that run has ended (or crashed, or its lease ran out): that start is *skipped*;
- a row still held by a run from an earlier slot is *taken* as today (keep-alive keeps
  it; ``wait=`` waits for it);
- a grant keeps its row until the end of its slot when released early (the release's
  hold, as ``min_hold`` does), so a replica firing late in the slot finds it there.

One operation on one connection (``acquire``): read the row and the database's now,
skip at once when the slot is already run (a read, no write), else the conditional
write; after a refusal, one more read tells "skipped" from "taken".
"""

from __future__ import annotations

import functools
import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING, NamedTuple

from .._db.connections import JobLock
from . import ops as _ops
from .steps import Emit, Shielded, Steps, Try, call, drop_try

if TYPE_CHECKING:
    from .._sql.statements import Sent, Statements
    from .base import ModelCore
    from .options import LeaseOptions
    from .schedule import Schedule

log = logging.getLogger("joblocks")

Slot = tuple[int, int]


class Skip(NamedTuple):
    """A start refused because its slot was already run: the slot, and that run's row."""

    slot: Slot
    row: JobLock

    def reason(self, key: str) -> str:
        """One line for logs and the command line."""
        started = self.row.acquired_at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        return (
            f"{key!r}: the slot {_when(self.slot[0])} - {_when(self.slot[1])} UTC was already "
            f"run (started {started} UTC by {self.row.holder}); skipped"
        )


class InSlot(NamedTuple):
    """What a scheduled acquire found: a grant and its slot, a skip, or neither (taken)."""

    grant: _ops.Grant | None
    slot: Slot
    skip: Skip | None


def _when(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _already_run(row: JobLock | None, schedule: Schedule) -> Skip | None:
    if row is None:
        return None
    slot = schedule.slot(_ms(row.read_at))
    return Skip(slot, row) if _ms(row.acquired_at) >= slot[0] else None


def acquire(st: Statements, key: str, holder: str, ttl_ms: int, schedule: Schedule) -> Sent[InSlot]:
    """Take ``key`` for ``holder`` unless its slot (by the database's now) was run."""
    row = yield from _ops.peek(st, key)
    skip = _already_run(row, schedule)
    if skip is not None:
        return InSlot(None, skip.slot, skip)
    now = _ms(row.read_at) if row is not None else (yield from _ops.now_ms(st))
    slot = schedule.slot(now)
    extra = {"slot_start": slot[0]}
    for step in st.acquire_in_slot:
        got = yield from _ops._run_step(step, key, holder, ttl_ms, extra)
        if got is not None:
            grant = (
                _ops.Grant(got[0], got[1], got[2])
                if len(got) == 3
                else _ops.Grant(got[0], None, None)
            )
            if grant.acquired_ms is None:
                # MySQL/MariaDB report the token only: the slot is that of the grant's
                # own start (the database's now may have crossed into the next slot
                # since it was read), so its times are read.
                mine = yield from _ops.peek(st, key)
                if mine is not None and mine.fence == grant.fence:
                    grant = _ops.Grant(grant.fence, _ms(mine.acquired_at), _ms(mine.expires_at))
            if grant.acquired_ms is not None:
                slot = schedule.slot(grant.acquired_ms)
            return InSlot(grant, slot, None)
    skip = _already_run((yield from _ops.peek(st, key)), schedule)
    return InSlot(None, slot if skip is None else skip.slot, skip)


# -- the life-cycle step (both faces drive it; see ``_core.lifecycle``) -----------------


def take(model: ModelCore, key: str, opts: LeaseOptions, live: None = None) -> Steps[Try]:
    """One try at ``key`` in its slot (``opts.schedule``), shielded as a single lease's
    (a slot granted to a cancelled caller is let go, so another replica may still run
    it). A skip is reported here: logged (info), the ``skipped`` event."""
    holder = opts.holder
    got: Try = yield Shielded(
        _take(model, key, holder, opts.ttl_ms, opts.schedule),
        functools.partial(drop_try, model, holder),
    )
    skip: Skip | None = got.skip
    if skip is not None:
        log.info("joblocks: %s", skip.reason(key))
        yield Emit("skipped", key, holder, token=skip.row.fence)
    return got


def _take(
    model: ModelCore, key: str, holder: str, ttl_ms: int, schedule: Schedule | None
) -> Steps[Try]:
    got = yield from call(model, "acquire", acquire, key, holder, ttl_ms, schedule)
    return Try(got.grant, key, got.slot, got.skip)
