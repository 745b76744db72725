"""The SQL joblocks sends to MariaDB (the family of ``mysql://`` URLs), each statement
written whole.

One template per statement; the only substitutions are the table's names: ``{table}``
(the lock table as the dialect quotes it, with its schema) and ``{seq}`` (its fencing
SEQUENCE, ``<table>_fence_seq``); in the statements of a counted lease also
``{keys}``/``{places}`` (the parameters of its N places). Parameters are named
(``:key``, ``:holder``, ``:ttl`` in ms, ...); ``_sql.statements`` compiles each statement
once per model to the driver's style. ``tests/core/sql/golden/mariadb.sql`` pins what
is sent.

The database's now, in whole epoch ms and stable within a statement, is
``CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS
SIGNED)`` (``_sql.dialects``, ``Profile.statement_now``). There is no RETURNING: a grant
reports its token through ``LAST_INSERT_ID(expr)`` (0 when refused), a refresh its new
expiry the same way.
"""

from __future__ import annotations

STATEMENTS: dict[str, str] = {
    # acquire_path="upsert": one statement. MariaDB evaluates SET assignments left to
    # right, each seeing the ones before: fence first (it reads the old holder and expiry),
    # holder before expires_at, so that one condition (expired, or ours) decides all four.
    # The token is kept only by a re-entrant acquire of a live grant (the same holder, a
    # drawn token, not the placeholder 0, and not expired); a row taken back by its own
    # holder after it expired is a new grant with a new token. The token is drawn only in
    # the guarded assignment, under the row lock: one drawn in VALUES would be drawn before
    # the statement waits for (or is preempted behind) another grant and its release, and
    # could be smaller than that grant's. So VALUES carries a placeholder (0), and the same
    # row is given twice: when the first one inserts the row, the second one meets it as a
    # duplicate and draws the token for it, still under the lock the insert took. A row
    # already there is granted (or refused) by the first one; the second one then finds it
    # ours, live, with its token, and keeps it.
    "upsert": (
        "INSERT INTO {table} (id, holder, acquired_at, expires_at, fence) "
        "VALUES (:key, :holder, "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) "
        "DIV 1000 AS SIGNED), "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) "
        "DIV 1000 AS SIGNED) + :ttl, 0), "
        "(:key, :holder, "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) "
        "DIV 1000 AS SIGNED), "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) "
        "DIV 1000 AS SIGNED) + :ttl, 0) "
        "ON DUPLICATE KEY UPDATE "
        "fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), "
        "LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 "
        "AND expires_at > VALUES(acquired_at), fence, NEXTVAL({seq}))), "
        "fence + LAST_INSERT_ID(0)), "
        "acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), "
        "VALUES(acquired_at), acquired_at), "
        "holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), "
        "VALUES(holder), holder), "
        "expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), "
        "VALUES(expires_at), expires_at)"
    ),
    # acquire_path="portable": a conditional UPDATE (free, expired or ours), then a
    # plain INSERT. ``schedule=``: the UPDATE also needs the row's last grant to be before
    # the slot (:slot_start, epoch ms): one start per slot.
    "update": (
        "UPDATE {table} "
        "SET fence = IF(holder = :holder AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, "
        "'1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), "
        "LAST_INSERT_ID(NEXTVAL({seq}))), holder = :holder, "
        "acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), "
        "expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + :ttl "
        "WHERE id = :key AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, "
        "'1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = :holder)"
    ),
    "update_in_slot": (
        "UPDATE {table} "
        "SET fence = IF(holder = :holder AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, "
        "'1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), "
        "LAST_INSERT_ID(NEXTVAL({seq}))), holder = :holder, "
        "acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), "
        "expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + :ttl "
        "WHERE id = :key AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, "
        "'1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = :holder) "
        "AND acquired_at < :slot_start"
    ),
    # "portable" (and the plain model's ``insert``): a plain INSERT whose duplicate-key
    # error means "held by someone else". It has no duplicate branch to draw the token
    # under the row lock, so "redraw" draws it again right after, under the lock the insert
    # took: larger than the token of any grant that ended before.
    "insert": (
        "INSERT INTO {table} (id, holder, acquired_at, expires_at, fence) "
        "VALUES (:key, :holder, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + :ttl, LAST_INSERT_ID(NEXTVAL({seq})))"
    ),
    "redraw": (
        "UPDATE {table} "
        "SET fence = LAST_INSERT_ID(NEXTVAL({seq})) "
        "WHERE id = :key AND holder = :holder AND fence = :fence"
    ),
    # The plain ``refresh`` goes by holder (the reference's rule); a lease's refreshes
    # only its own grant (same token) while it is live.
    "refresh": (
        "UPDATE {table} "
        "SET expires_at = LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, "
        "'1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + :ttl) "
        "WHERE id = :key AND holder = :holder"
    ),
    "refresh_lease": (
        "UPDATE {table} "
        "SET expires_at = LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, "
        "'1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + :ttl) "
        "WHERE id = :key AND holder = :holder AND fence = :fence "
        "AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)"
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
        "SET expires_at = GREATEST(acquired_at + :min_hold, :hold_until) "
        "WHERE id = :key AND holder = :holder AND fence = :fence "
        "AND GREATEST(acquired_at + :min_hold, :hold_until) > CAST(TIMESTAMPDIFF(MICROSECOND, "
        "'1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)"
    ),
    # Whether a lease's grant is still the row's, live (``ensure_held``).
    "is_held": (
        "SELECT 1 "
        "FROM {table} "
        "WHERE id = :key AND holder = :holder AND fence = :fence "
        "AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)"
    ),
    # The rows as read by the model (``peek``, ``list``): with the database's now, which
    # tells live from expired.
    "peek": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms "
        "FROM {table} "
        "WHERE id = :key"
    ),
    "list_all": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms "
        "FROM {table} "
        "ORDER BY id"
    ),
    "list_live": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms "
        "FROM {table} "
        "WHERE expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) "
        "ORDER BY id"
    ),
    "list_expired": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms "
        "FROM {table} "
        "WHERE expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) "
        "ORDER BY id"
    ),
    # ``count``, by state.
    "count_all": "SELECT COUNT(*) FROM {table}",
    "count_live": (
        "SELECT COUNT(*) "
        "FROM {table} "
        "WHERE expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)"
    ),
    "count_expired": (
        "SELECT COUNT(*) "
        "FROM {table} "
        "WHERE expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)"
    ),
    # The plain model's ``update``: a new holder gets a new token; a ttl moves the
    # expiry, whoever holds the row.
    "update_holder": (
        "UPDATE {table} "
        "SET fence = IF(holder = :holder, fence, NEXTVAL({seq})), holder = :holder "
        "WHERE id = :key"
    ),
    "update_ttl": (
        "UPDATE {table} "
        "SET expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + :ttl "
        "WHERE id = :key"
    ),
    # The plain model's ``delete``, whoever holds the row.
    "delete": "DELETE FROM {table} WHERE id = :key",
    # The database's clock (``now_ms``).
    "now": (
        "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)"
    ),
    # Keyset pages of ``iter_locks`` (``id > :after ORDER BY id LIMIT :n``), by state:
    # each page costs the same however deep into the table it is, and no page holds a lock
    # or a cursor open between calls.
    "page_all": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms "
        "FROM {table} "
        "WHERE id > :after "
        "ORDER BY id LIMIT :n"
    ),
    "page_live": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms "
        "FROM {table} "
        "WHERE id > :after AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, "
        "'1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) "
        "ORDER BY id LIMIT :n"
    ),
    "page_expired": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms "
        "FROM {table} "
        "WHERE id > :after AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, "
        "'1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) "
        "ORDER BY id LIMIT :n"
    ),
    # ``prune``: the key ending a batch (the :skip + 1-th prunable row after the last
    # batch: a read), that batch's DELETE (its own short transaction), the last batch's
    # DELETE, and the dry run's count. Each DELETE tests the condition itself, against each
    # row as it is when deleted, so a key re-acquired meanwhile is kept.
    "prune_bound": (
        "SELECT id "
        "FROM {table} "
        "WHERE id > :after AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, "
        "'1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - :age "
        "ORDER BY id LIMIT 1 OFFSET :skip"
    ),
    "prune_range": (
        "DELETE FROM {table} "
        "WHERE id > :after AND id <= :upto AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, "
        "'1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - :age"
    ),
    "prune_rest": (
        "DELETE FROM {table} "
        "WHERE id > :after AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, "
        "'1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - :age"
    ),
    "prune_count": (
        "SELECT COUNT(*) "
        "FROM {table} "
        "WHERE expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - :age"
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
        "AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) THEN acquired_at "
        "ELSE CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) END, expires_at = CASE WHEN holder = :marker "
        "AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + :ttl THEN expires_at "
        "ELSE CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + :ttl END, holder = :marker, fence = 0 "
        "WHERE id = :key AND (holder = :marker OR expires_at <= "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED))"
    ),
    "place_claim_insert": (
        "INSERT INTO {table} (id, holder, acquired_at, expires_at, fence) "
        "VALUES (:key, :marker, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + :ttl, 0) "
        "ON DUPLICATE KEY UPDATE id = id"
    ),
    "place_read": (
        "SELECT id, holder, acquired_at, expires_at, fence, "
        "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms "
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
        "AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)) AS live_places)"
    ),
}
