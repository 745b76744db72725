"""Counted leases (``max_holders=N``): up to N holders of one key at once.

How they are stored (docs/concepts.md, "Several holders"), in the reference's
``job_locks`` columns, unchanged:

- **Places.** Place ``i`` (1 … N) of key ``K`` is an ordinary lock row whose id is
  ``K`` + ``PLACE_MARK`` + ``i`` (``"export␟2"``). A holder takes one place with the
  single-lease acquire statement of the model's acquire path, so every rule of a single
  lease holds per place: its own expiry, re-entrant re-acquire, release of its own grant
  only, fencing token, keep-alive, ``min_hold``, ``is_held_clause``, prune.
- **The group row.** The row ``K`` itself says how the key is used: its holder is
  ``"joblocks:max_holders=N"`` and its expiry is at least every place's (it is
  extended after each grant, renewal and hold of a place). So a single lease of ``K``
  meets a live row of another holder and is refused ("taken"), as is any other holder
  of the reference's surface, and a counted lease with another N finds the group row
  of its N and raises :class:`~joblocks.LockHoldersMismatch`, as it does when ``K`` is
  held as a single lease. ``peek(K)`` shows the group row; ``holders(K)`` its places.
  The release of the last live place deletes the group row (one conditional DELETE);
  after a crash it expires with the places it covered.

An acquire sends, on one connection: one read of the group row and its N places (all
a refused try costs); the group row's claim only when it is absent or expired (then
the read again); the acquire statement on free places in order until one is granted
(usually the first); the group row's extension to the grant's expiry. Each statement
is atomic on its own and no transaction spans them: a place is granted by the same
statement that grants a single lease, and a grant whose group row was taken meanwhile
(it expired in between) is given back.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from sqlalchemy import Dialect, Table

from .._db.connections import JobLock
from .._sql.statements import PlaceStatements, Sent, Statements, places
from .._util import validate as _validate
from .._util.errors import LockHoldersMismatch
from . import ops as _ops
from .base import log
from .steps import Shielded, Steps, Try, call, drop_try

if TYPE_CHECKING:
    from .base import ModelCore
    from .liveness import Live
    from .options import LeaseOptions
    from .state import LeaseState

#: Separates a key from its place number in a place row's id (U+241F, SYMBOL FOR UNIT
#: SEPARATOR): ``"export␟1"``; lock keys may not contain it (``_util.validate``).
PLACE_MARK = _validate.PLACE_MARK
#: The holder prefix of a group row: ``"joblocks:max_holders=3"``.
GROUP_HOLDER = "joblocks:max_holders="
#: The largest ``max_holders``.


def place_id(key: str, place: int) -> str:
    """The row id of place ``place`` (1-based) of ``key``."""
    return f"{key}{PLACE_MARK}{place}"


def group_holder(n: int) -> str:
    """The holder written in the group row of a key used with ``max_holders=n``."""
    return f"{GROUP_HOLDER}{n}"


def group_size(holder: str) -> int | None:
    """N of a group row's holder, or None when the row is not a group row."""
    if not holder.startswith(GROUP_HOLDER):
        return None
    tail = holder[len(GROUP_HOLDER) :]
    return int(tail) if tail.isdigit() else None


def split_place(row_id: str) -> tuple[str, int] | None:
    """``(key, place)`` of a place row's id, or None for any other row."""
    key, mark, number = row_id.rpartition(PLACE_MARK)
    if not mark or not key or not number.isdigit():
        return None
    return key, int(number)


def check_key(key: str, n: int) -> None:
    """The key must leave room for the place number in the id column."""
    most = _validate.MAX_KEY_BYTES
    if len(place_id(key, n).encode("utf-8")) > most:
        raise ValueError(
            f"lock_key is too long for max_holders={n}: its place ids (the key, "
            f"{PLACE_MARK!r} and the place number) must fit in {most} UTF-8 bytes"
        )


@functools.lru_cache(maxsize=256)
def _prepared(dialect: Dialect, table: Table, n: int) -> PlaceStatements:
    return places(dialect, table, n)


def _statements(st: Statements, table: Table, n: int) -> PlaceStatements:
    """The statements of ``n`` places on ``table``, prepared once per dialect (the one
    ``st`` was compiled for), table and N (a bounded cache: a model that is gone is
    dropped from it in time)."""
    return _prepared(st.dialect, table, n)


def _read(ps: PlaceStatements, key: str, n: int) -> Sent[tuple[JobLock | None, dict[int, JobLock]]]:
    values: dict[str, Any] = {"key": key}
    for i in range(1, n + 1):
        values[f"p{i}"] = place_id(key, i)
    group = None
    taken: dict[int, JobLock] = {}
    for raw in (yield ps.read, values).rows:
        row = JobLock.from_row(raw)
        if row.key == key:
            group = row
            continue
        where = split_place(row.key)
        if where is not None and where[0] == key:
            taken[where[1]] = row
    return group, taken


def _described(row: JobLock | None) -> str:
    if row is None:
        return "gone (deleted meanwhile)"
    n = group_size(row.holder)
    if n is not None:
        return f"in use with max_holders={n}"
    return f"held as a single lease by {row.holder!r}"


def acquire(
    st: Statements,
    table: Table,
    key: str,
    holder: str,
    ttl_ms: int,
    n: int,
    only: tuple[int, ...] | None = None,
) -> Sent[tuple[_ops.Grant, str] | None]:
    """Take a place of ``key`` (``n`` places) for ``holder``: the grant and its place's
    row id, or None when all ``n`` places are held by others.

    A holder that holds a live place of the key re-acquires that place (re-entrant, as a
    single lease), never a second one. Raises :class:`~joblocks.LockHoldersMismatch`
    when ``key`` is held as a single lease or with another ``max_holders``.

    A refused try costs one read. The group row is claimed only when it is absent or
    expired; a live one of this N is extended after the grant, and should it be gone
    meanwhile (deleted with the last place's release, or expired and taken), the place
    is given back and the key read again. ``only``: try these places only (1-based;
    ``liveness="session"`` picks the place whose session lock it holds).
    """
    ps = _statements(st, table, n)
    marker = group_holder(n)
    group: JobLock | None = None
    for _ in range(5):
        group, taken = yield from _read(ps, key, n)
        if group is None or group.expired:
            claim = {"key": key, "marker": marker, "ttl": ttl_ms}
            if (yield ps.claim, claim).rowcount < 1:
                yield ps.claim_insert, claim
            group, taken = yield from _read(ps, key, n)
        if group is None:
            continue  # deleted right after the claim (its last place released)
        if group.holder != marker or group.expired:
            break
        mine = [i for i, row in sorted(taken.items()) if row.holder == holder and not row.expired]
        free = [i for i in range(1, n + 1) if i not in taken or taken[i].expired]
        for place in mine[:1] or free:
            if only is not None and place not in only:
                continue
            row_id = place_id(key, place)
            grant = yield from _ops.acquire(st, row_id, holder, ttl_ms)
            if grant is None:
                continue  # taken since the read: try the next free place
            if grant.expires_ms is None:  # MySQL/MariaDB report only the token
                got = yield from _ops.peek(st, row_id)
                if got is None or got.fence != grant.fence:
                    return grant, row_id  # already lost: the lease finds it so
                grant = _ops.Grant(
                    grant.fence,
                    round(got.acquired_at.timestamp() * 1000),
                    round(got.expires_at.timestamp() * 1000),
                )
            assert grant.expires_ms is not None  # noqa: S101 - filled above
            if (yield from cover(st, table, key, n, grant.expires_ms)):
                return grant, row_id
            # The group row is gone or no longer this N's: give the place back, look again.
            yield from _ops.release_lease(st, row_id, holder, grant.fence, 0)
            break
        else:
            return None
    else:
        # The group row was deleted (its last place released) under every grant tried:
        # a busy key, not another use of it (``wait=`` tries again).
        return None
    raise LockHoldersMismatch(key, n, _described(group))


def cover(st: Statements, table: Table, key: str, n: int, until_ms: int) -> Sent[bool]:
    """Extend the group row of ``key`` (``n`` places) to expire no earlier than
    ``until_ms`` (epoch ms, the database's clock): a place's new expiry. False when
    the key has no group row of this N."""
    ps = _statements(st, table, n)
    values = {"key": key, "marker": group_holder(n), "until": until_ms}
    return (yield ps.extend, values).rowcount > 0


def leave(st: Statements, table: Table, key: str, n: int) -> Sent[bool]:
    """Delete the group row of ``key`` if none of its ``n`` places is live any more
    (after a release); True when it was deleted."""
    values: dict[str, Any] = {"key": key, "marker": group_holder(n)}
    for i in range(1, n + 1):
        values[f"p{i}"] = place_id(key, i)
    return (yield _statements(st, table, n).leave, values).rowcount > 0


def holders(st: Statements, table: Table, key: str) -> Sent[list[JobLock]]:
    """The place rows of ``key`` (held or expired), by place; empty when ``key`` is not
    used as a counted lease (its row is not a group row)."""
    group = yield from _ops.peek(st, key)
    n = None if group is None else group_size(group.holder)
    if n is None:
        return []
    _, taken = yield from _read(_statements(st, table, n), key, n)
    return [taken[i] for i in sorted(taken)]


# -- the life-cycle steps (both faces drive them; see ``_core.lifecycle``) ---------------------


def take(model: ModelCore, key: str, opts: LeaseOptions, live: Live | None = None) -> Steps[Try]:
    """One try at a place of ``key``: the grant or None, and the place's row id. With
    ``live`` (``liveness="session"``) each place has its own session lock; without, the
    try is shielded as a single lease's (the place granted is let go)."""
    n = opts.max_holders
    assert n is not None  # noqa: S101 - only called for counted leases
    holder = opts.holder
    check_key(key, n)
    if live is not None:
        grant, row = yield from take_live(model, key, holder, opts.ttl_ms, n, live)
        return Try(grant, row)
    got: Try = yield Shielded(
        _take(model, key, holder, opts.ttl_ms, n), functools.partial(drop_try, model, holder)
    )
    return got


def _take(model: ModelCore, key: str, holder: str, ttl_ms: int, n: int) -> Steps[Try]:
    got = yield from call(model, "acquire", acquire, model.table, key, holder, ttl_ms, n)
    return Try(None, key) if got is None else Try(*got)


def read(
    st: Statements, table: Table, key: str, n: int
) -> Sent[tuple[JobLock | None, dict[int, JobLock]]]:
    """The group row of ``key`` and its taken places (by place number), one read."""
    return (yield from _read(_statements(st, table, n), key, n))


def take_live(
    model: ModelCore, key: str, holder: str, ttl_ms: int, n: int, live: Live
) -> Steps[tuple[Any, str]]:
    """One try at a place of ``key`` with ``liveness="session"``: place ``i`` has the
    session lock of its own row id ``K␟i``, taken before the place's row (``_core.liveness``).

    After one read: this holder's live place (re-entrant), else the free places, then
    the held ones, each tried under its session lock (one connection, ``live``, aimed
    at one place after the other). A held place whose session lock is free and whose
    grant the registry names lost its holder's process: it is taken over, with a new,
    larger token, the other places keep theirs. A held place whose session lock is
    held (its holder lives, or is paused) is left alone. A free place whose session
    lock is held by another (a contender taking it, a previous holder letting go, a
    paused one past its ttl) is tried last, without it: a ``liveness="ttl"`` place.
    """
    table = model.table
    _, taken = yield from call(model, "acquire", read, table, key, n)
    mine = [i for i, row in sorted(taken.items()) if row.holder == holder and not row.expired]
    free = [i for i in range(1, n + 1) if i not in taken or taken[i].expired]
    busy = [i for i in sorted(taken) if i not in free and i not in mine]
    later: list[int] = []

    def again(place: int) -> Steps[_ops.Grant | None]:
        got = yield from call(model, "acquire", acquire, table, key, holder, ttl_ms, n, (place,))
        return None if got is None else got[0]

    for place in mine[:1] or free + busy:
        live.aim(place_id(key, place))
        if not (yield from live.hold()):
            if place not in busy:
                later.append(place)
            continue
        grant = yield from again(place)
        if grant is None and place in busy:
            grant = yield from live.take_over(holder, ttl_ms, functools.partial(again, place))
        if grant is not None:
            yield from live.mark(grant.fence)
            return grant, place_id(key, place)
        yield from live.unhold()
    for place in later:
        grant = yield from again(place)
        if grant is None:
            continue
        live.aim(place_id(key, place))
        if (yield from live.hold_again()):
            yield from live.mark(grant.fence)
        else:
            log.debug("joblocks: %r granted without its session lock: ttl liveness", live.key)
            yield from live.let_go()  # the connection kept for the tries
        return grant, place_id(key, place)
    return None, key


def cover_lease(lease: LeaseState, until_ms: int | None) -> Steps[None]:
    """After a place was renewed or held to ``until_ms``: extend its group row to cover
    it (a failure is logged: the place itself is renewed)."""
    group = lease._group
    if group is None or until_ms is None:
        return
    model = lease._model
    try:
        yield from call(model, "renew", cover, model.table, group[0], group[1], until_ms)
    except Exception as exc:
        log.warning("joblocks: extending the group row of %r failed: %s", group[0], exc)


def after_release(lease: LeaseState) -> Steps[None]:
    """After a place was released: a place kept for its min_hold is covered by the group
    row; otherwise the group row goes when no place is live any more (a failure is
    logged: the group row then expires by itself)."""
    group = lease._group
    if group is None:
        return
    until = held_until(lease)
    if until is not None:
        yield from cover_lease(lease, until)
        return
    model = lease._model
    try:
        yield from call(model, "release", leave, model.table, group[0], group[1])
    except Exception as exc:
        log.warning("joblocks: removing the group row of %r failed: %s", group[0], exc)


def held_until(lease: LeaseState) -> int | None:
    """Epoch ms until which a released place stays held (its min_hold), or None."""
    acquired = round(lease.acquired_at.timestamp() * 1000)
    until = max(acquired + lease._min_hold_ms if lease._min_hold_ms else 0, lease._hold_until_ms)
    return until or None
