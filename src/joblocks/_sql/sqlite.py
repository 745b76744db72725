"""The SQL joblocks sends to SQLite, each statement written whole.

One template per statement; the only substitutions are the table's names: ``{table}``
(the lock table as the dialect quotes it) and ``{counter}`` (its fencing counter, the
one-row table ``<table>_fence`` that triggers advance, see ``_sql.schema``); in the
statements of a counted lease also ``{keys}``/``{places}`` (the parameters of its N
places). Parameters are named (``:key``, ``:holder``, ``:ttl`` in ms, ...);
``_sql.statements`` compiles each statement once per model to the driver's style.

The database's now, in whole epoch ms and stable within a statement, is
``CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)`` (``_sql.dialects``,
``Profile.statement_now``); a new token is ``(SELECT value FROM "{counter}") + 1``.
``tests/core/sql/golden/sqlite.sql`` pins what is sent.
"""

from __future__ import annotations

STATEMENTS: dict[str, str] = {
    # acquire_path="upsert": one statement. A re-entrant acquire of a live grant (same
    # holder, not expired) keeps its token; every other grant draws a new one.
    "upsert": (
        "INSERT INTO {table} AS cur (id, holder, acquired_at, expires_at, fence) "
        "VALUES (:key, :holder, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS "
        "INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + :ttl, "
        '(SELECT value FROM "{counter}") + 1) '
        "ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, "
        "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE "
        "WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at "
        "THEN cur.fence ELSE excluded.fence END "
        "WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder "
        "RETURNING fence, acquired_at, expires_at"
    ),
    # acquire_path="update_insert" and "portable": a conditional UPDATE (free, expired
    # or ours), then an INSERT. ``schedule=``: the UPDATE also needs the row's last grant
    # to be before the slot (:slot_start, epoch ms): one start per slot.
    "update": (
        "UPDATE {table} "
        "SET holder = :holder, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * "
        "86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * "
        "86400000.0) AS INTEGER) + :ttl, fence = CASE WHEN holder = :holder "
        "AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) "
        'THEN fence ELSE (SELECT value FROM "{counter}") + 1 END '
        "WHERE id = :key AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * "
        "86400000.0) AS INTEGER) OR holder = :holder) "
        "RETURNING fence, acquired_at, expires_at"
    ),
    "update_in_slot": (
        "UPDATE {table} "
        "SET holder = :holder, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * "
        "86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * "
        "86400000.0) AS INTEGER) + :ttl, fence = CASE WHEN holder = :holder "
        "AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) "
        'THEN fence ELSE (SELECT value FROM "{counter}") + 1 END '
        "WHERE id = :key AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * "
        "86400000.0) AS INTEGER) OR holder = :holder) AND acquired_at < :slot_start "
        "RETURNING fence, acquired_at, expires_at"
    ),
    # "portable" (and the plain model's ``insert``): a plain INSERT whose duplicate-key
    # error means "held by someone else".
    "insert": (
        "INSERT INTO {table} (id, holder, acquired_at, expires_at, fence) "
        "VALUES (:key, :holder, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS "
        "INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + :ttl, "
        '(SELECT value FROM "{counter}") + 1) '
        "RETURNING fence, acquired_at, expires_at"
    ),
    # "update_insert": the INSERT does nothing when the row exists.
    "insert_ignore": (
        "INSERT INTO {table} (id, holder, acquired_at, expires_at, fence) "
        "VALUES (:key, :holder, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS "
        "INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + :ttl, "
        '(SELECT value FROM "{counter}") + 1) '
        "ON CONFLICT (id) DO NOTHING "
        "RETURNING fence, acquired_at, expires_at"
    ),
    # The plain ``refresh`` goes by holder (the reference's rule); a lease's refreshes
    # only its own grant (same token) while it is live.
    "refresh": (
        "UPDATE {table} "
        "SET expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) "
        "+ :ttl "
        "WHERE id = :key AND holder = :holder "
        "RETURNING expires_at"
    ),
    "refresh_lease": (
        "UPDATE {table} "
        "SET expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) "
        "+ :ttl "
        "WHERE id = :key AND holder = :holder AND fence = :fence "
        "AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) "
        "RETURNING expires_at"
    ),
    # release: the reference's delete, by holder (the plain model's ``release``).
    "release": "DELETE FROM {table} WHERE id = :key AND holder = :holder",
    # A lease's release: only its own grant (same token).
    "release_lease": (
        "DELETE FROM {table} WHERE id = :key AND holder = :holder AND fence = :fence"
    ),
    # A lease's release under min_hold: keep the row until the later of acquired_at +
    # :min_hold (the lease's min_hold) and :hold_until (the latest refresh(min_hold=)
    # promise); nothing is changed when that time has passed already (then the DELETE above).
    "hold_until": (
        "UPDATE {table} "
        "SET expires_at = MAX(acquired_at + :min_hold, :hold_until) "
        "WHERE id = :key AND holder = :holder AND fence = :fence "
        "AND MAX(acquired_at + :min_hold, :hold_until) > "
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
    ),
    # Whether a lease's grant is still the row's, live (``ensure_held``).
    "is_held": (
        "SELECT 1 "
        "FROM {table} "
        "WHERE id = :key AND holder = :holder AND fence = :fence "
        "AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
    ),
    # The rows as read by the model (``peek``, ``list``): with the database's now, which
    # tells live from expired.
    "peek": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms "
        "FROM {table} "
        "WHERE id = :key"
    ),
    "list_all": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms "
        "FROM {table} "
        "ORDER BY id"
    ),
    "list_live": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms "
        "FROM {table} "
        "WHERE expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS "
        "INTEGER) "
        "ORDER BY id"
    ),
    "list_expired": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms "
        "FROM {table} "
        "WHERE expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS "
        "INTEGER) "
        "ORDER BY id"
    ),
    # ``count``, by state.
    "count_all": "SELECT COUNT(*) FROM {table}",
    "count_live": (
        "SELECT COUNT(*) "
        "FROM {table} "
        "WHERE expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
    ),
    "count_expired": (
        "SELECT COUNT(*) "
        "FROM {table} "
        "WHERE expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS "
        "INTEGER)"
    ),
    # The plain model's ``update``: a new holder gets a new token; a ttl moves the
    # expiry, whoever holds the row.
    "update_holder": (
        "UPDATE {table} "
        "SET fence = CASE WHEN holder = :holder THEN fence "
        'ELSE (SELECT value FROM "{counter}") + 1 END, holder = :holder '
        "WHERE id = :key"
    ),
    "update_ttl": (
        "UPDATE {table} "
        "SET expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) "
        "+ :ttl "
        "WHERE id = :key"
    ),
    # The plain model's ``delete``, whoever holds the row.
    "delete": "DELETE FROM {table} WHERE id = :key",
    # The database's clock (``now_ms``).
    "now": "SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)",
    # Keyset pages of ``iter_locks`` (``id > :after ORDER BY id LIMIT :n``), by state:
    # each page costs the same however deep into the table it is, and no page holds a lock
    # or a cursor open between calls.
    "page_all": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms "
        "FROM {table} "
        "WHERE id > :after "
        "ORDER BY id LIMIT :n"
    ),
    "page_live": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms "
        "FROM {table} "
        "WHERE id > :after AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * "
        "86400000.0) AS INTEGER) "
        "ORDER BY id LIMIT :n"
    ),
    "page_expired": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms "
        "FROM {table} "
        "WHERE id > :after AND expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * "
        "86400000.0) AS INTEGER) "
        "ORDER BY id LIMIT :n"
    ),
    # ``prune``: the key ending a batch (the :skip + 1-th prunable row after the last
    # batch: a read), that batch's DELETE (its own short transaction), the last batch's
    # DELETE, and the dry run's count. Each DELETE tests the condition itself, against each
    # row as it is when deleted, so a key re-acquired meanwhile is kept.
    "prune_bound": (
        "SELECT id "
        "FROM {table} "
        "WHERE id > :after AND expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * "
        "86400000.0) AS INTEGER) - :age "
        "ORDER BY id LIMIT 1 OFFSET :skip"
    ),
    "prune_range": (
        "DELETE FROM {table} "
        "WHERE id > :after AND id <= :upto AND expires_at <= "
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - :age"
    ),
    "prune_rest": (
        "DELETE FROM {table} "
        "WHERE id > :after AND expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * "
        "86400000.0) AS INTEGER) - :age"
    ),
    "prune_count": (
        "SELECT COUNT(*) "
        "FROM {table} "
        "WHERE expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS "
        "INTEGER) - :age"
    ),
    # A counted lease (``max_holders=N``, ``_core.places``): the group row's claim, an UPDATE
    # (times first, from the row as it was; then the holder), then an INSERT that does
    # nothing when the row exists; the read of the group row and its N places ({keys}:
    # :key, :p1 .. :pN); the extension of the group row's expiry to cover a place's; and,
    # after the last live place was released, the group row's removal (the places read
    # through a derived table: MariaDB refuses a DELETE whose subquery reads the table it
    # deletes from directly).
    "place_claim": (
        "UPDATE {table} "
        "SET acquired_at = CASE WHEN holder = :marker "
        "AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) "
        "THEN acquired_at ELSE CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS "
        "INTEGER) END, expires_at = CASE WHEN holder = :marker "
        "AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) "
        "+ :ttl THEN expires_at ELSE CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) "
        "AS INTEGER) + :ttl END, holder = :marker, fence = 0 "
        "WHERE id = :key AND (holder = :marker OR expires_at <= "
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))"
    ),
    "place_claim_insert": (
        "INSERT INTO {table} (id, holder, acquired_at, expires_at, fence) "
        "VALUES (:key, :marker, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS "
        "INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + :ttl, "
        "0) "
        "ON CONFLICT (id) DO NOTHING"
    ),
    "place_read": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms "
        "FROM {table} "
        "WHERE id IN ({keys})"
    ),
    "place_extend": (
        "UPDATE {table} "
        "SET expires_at = CASE WHEN expires_at < :until THEN :until ELSE expires_at END "
        "WHERE id = :key AND holder = :marker"
    ),
    "place_leave": (
        "DELETE FROM {table} "
        "WHERE id = :key AND holder = :marker AND NOT EXISTS "
        "(SELECT 1 FROM (SELECT id FROM {table} WHERE id IN ({places}) "
        "AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)) "
        "AS live_places)"
    ),
}
