-- The SQL joblocks sends to postgresql (tests/core/sql/test_golden_sql.py, the asyncio face)

-- create the table (upsert) [1/3]
CREATE SEQUENCE job_locks_fence_seq;

-- create the table (upsert) [2/3]
CREATE TABLE job_locks (
	id VARCHAR(512) NOT NULL, 
	holder VARCHAR(255) NOT NULL, 
	acquired_at BIGINT NOT NULL, 
	expires_at BIGINT NOT NULL, 
	fence BIGINT NOT NULL, 
	PRIMARY KEY (id)
);

-- create the table (upsert) [3/3]
COMMENT ON TABLE job_locks IS 'joblocks leases: one row per held or expired lock';

-- acquire (upsert): a free key [1/2]
SELECT pg_backend_pid(), current_setting('default_transaction_isolation');

-- acquire (upsert): a free key [2/2]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- acquire (upsert): re-entrant
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- acquire (upsert): taken
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- acquire (upsert): an expired row
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease schedule= (upsert): a new slot [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease schedule= (upsert): a new slot [2/4]
SELECT CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT);

-- try_lease schedule= (upsert): a new slot [3/4]
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) AND acquired_at < %(slot_start)s RETURNING fence, acquired_at, expires_at;

-- try_lease schedule= (upsert): a new slot [4/4]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO NOTHING RETURNING fence, acquired_at, expires_at;

-- lease release schedule= (upsert)
UPDATE job_locks SET expires_at = GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT);

-- try_lease schedule= (upsert): the slot ran already
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease max_holders=2 (upsert): the first place [1/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (upsert): the first place [2/6]
UPDATE job_locks SET acquired_at = CASE WHEN holder = %(marker)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN acquired_at ELSE CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) END, expires_at = CASE WHEN holder = %(marker)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s THEN expires_at ELSE CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s END, holder = %(marker)s, fence = 0 WHERE id = %(key)s AND (holder = %(marker)s OR expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT));

-- try_lease max_holders=2 (upsert): the first place [3/6]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(marker)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, 0) ON CONFLICT (id) DO NOTHING;

-- try_lease max_holders=2 (upsert): the first place [4/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (upsert): the first place [5/6]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (upsert): the first place [6/6]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < CAST(%(until)s AS BIGINT) THEN CAST(%(until)s AS BIGINT) ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- try_lease max_holders=2 (upsert): the second place [1/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (upsert): the second place [2/3]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (upsert): the second place [3/3]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < CAST(%(until)s AS BIGINT) THEN CAST(%(until)s AS BIGINT) ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- try_lease max_holders=2 (upsert): refused
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- lease refresh max_holders=2 (upsert) [1/2]
UPDATE job_locks SET expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) RETURNING expires_at;

-- lease refresh max_holders=2 (upsert) [2/2]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < CAST(%(until)s AS BIGINT) THEN CAST(%(until)s AS BIGINT) ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- lease release max_holders=2 (upsert): a place left [1/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release max_holders=2 (upsert): a place left [2/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(marker)s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%(p1)s, %(p2)s) AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT)) AS live_places);

-- lease release max_holders=2 (upsert): the last place [1/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release max_holders=2 (upsert): the last place [2/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(marker)s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%(p1)s, %(p2)s) AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT)) AS live_places);

-- release: ours [1/2]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- release: ours [2/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s;

-- release: not ours
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s;

-- refresh
UPDATE job_locks SET expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s WHERE id = %(key)s AND holder = %(holder)s RETURNING expires_at;

-- peek
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id = %(key)s;

-- now_ms
SELECT CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT);

-- insert [1/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) RETURNING fence, acquired_at, expires_at;

-- insert [2/2]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id = %(key)s;

-- update holder=
UPDATE job_locks SET fence = CASE WHEN holder = %(holder)s THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END, holder = %(holder)s WHERE id = %(key)s;

-- update ttl=
UPDATE job_locks SET expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s WHERE id = %(key)s;

-- list all
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks ORDER BY id;

-- count all
SELECT COUNT(*) FROM job_locks;

-- iter_locks all (pages of 1) [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id > %(after)s ORDER BY id LIMIT %(n)s;

-- iter_locks all (pages of 1) [2/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id > %(after)s ORDER BY id LIMIT %(n)s;

-- iter_locks all (pages of 1) [3/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id > %(after)s ORDER BY id LIMIT %(n)s;

-- iter_locks all (pages of 1) [4/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id > %(after)s ORDER BY id LIMIT %(n)s;

-- list live
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) ORDER BY id;

-- count live
SELECT COUNT(*) FROM job_locks WHERE expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT);

-- iter_locks live (pages of 1) [1/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id > %(after)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) ORDER BY id LIMIT %(n)s;

-- iter_locks live (pages of 1) [2/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id > %(after)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) ORDER BY id LIMIT %(n)s;

-- iter_locks live (pages of 1) [3/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id > %(after)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) ORDER BY id LIMIT %(n)s;

-- list expired
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) ORDER BY id;

-- count expired
SELECT COUNT(*) FROM job_locks WHERE expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT);

-- iter_locks expired (pages of 1) [1/2]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id > %(after)s AND expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) ORDER BY id LIMIT %(n)s;

-- iter_locks expired (pages of 1) [2/2]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id > %(after)s AND expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) ORDER BY id LIMIT %(n)s;

-- prune dry_run
SELECT COUNT(*) FROM job_locks WHERE expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) - %(age)s;

-- prune (batches of 1) [1/4]
SELECT id FROM job_locks WHERE id > %(after)s AND expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) - %(age)s ORDER BY id LIMIT 1 OFFSET %(skip)s;

-- prune (batches of 1) [2/4]
DELETE FROM job_locks WHERE id > %(after)s AND id <= %(upto)s AND expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) - %(age)s;

-- prune (batches of 1) [3/4]
SELECT id FROM job_locks WHERE id > %(after)s AND expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) - %(age)s ORDER BY id LIMIT 1 OFFSET %(skip)s;

-- prune (batches of 1) [4/4]
DELETE FROM job_locks WHERE id > %(after)s AND expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) - %(age)s;

-- delete
DELETE FROM job_locks WHERE id = %(key)s;

-- try_lease
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- lease ensure_held
SELECT 1 FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT);

-- lease refresh
UPDATE job_locks SET expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) RETURNING expires_at;

-- lease refresh min_hold=
UPDATE job_locks SET expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) RETURNING expires_at;

-- lease release min_hold=
UPDATE job_locks SET expires_at = GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT);

-- lease release
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- try_lease liveness=session: the first (sets up the registry) [1/3]
CREATE TABLE IF NOT EXISTS job_locks_live (id SERIAL PRIMARY KEY, lock_key VARCHAR(512) NOT NULL UNIQUE, fence BIGINT);

-- try_lease liveness=session: the first (sets up the registry) [2/3]
INSERT INTO job_locks_live (lock_key) VALUES (%(key)s) ON CONFLICT DO NOTHING;

-- try_lease liveness=session: the first (sets up the registry) [3/3]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease liveness=session [1/6]
SELECT id FROM job_locks_live WHERE lock_key = %(key)s;

-- try_lease liveness=session [2/6]
INSERT INTO job_locks_live (lock_key) VALUES (%(key)s) ON CONFLICT DO NOTHING;

-- try_lease liveness=session [3/6]
SELECT id FROM job_locks_live WHERE lock_key = %(key)s;

-- try_lease liveness=session [4/6]
SELECT pg_try_advisory_lock(CAST(%(lock)s AS BIGINT));

-- try_lease liveness=session [5/6]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease liveness=session [6/6]
UPDATE job_locks_live SET fence = %(fence)s WHERE id = %(id)s;

-- try_lease liveness=session: taken [1/5]
SELECT pg_backend_pid(), current_setting('default_transaction_isolation');

-- try_lease liveness=session: taken [2/5]
SELECT pg_backend_pid();

-- try_lease liveness=session: taken [3/5]
SELECT set_config('idle_session_timeout', '0', false);

-- try_lease liveness=session: taken [4/5]
SELECT pg_try_advisory_lock(CAST(%(lock)s AS BIGINT));

-- try_lease liveness=session: taken [5/5]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- lease release liveness=session [1/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release liveness=session [2/2]
SELECT pg_advisory_unlock(CAST(%(lock)s AS BIGINT));

-- try_lease record=True: the first (creates the ledger) [1/6]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease record=True: the first (creates the ledger) [2/6]
CREATE TABLE job_runs (
	id BIGSERIAL NOT NULL, 
	key VARCHAR(512) NOT NULL, 
	slot BIGINT, 
	schedule VARCHAR(255), 
	timezone VARCHAR(64), 
	holder VARCHAR(255) NOT NULL, 
	host VARCHAR(255) NOT NULL, 
	pid INTEGER NOT NULL, 
	token BIGINT, 
	started_at BIGINT NOT NULL, 
	ended_at BIGINT, 
	duration_ms BIGINT, 
	outcome VARCHAR(16), 
	error VARCHAR(500), 
	PRIMARY KEY (id)
);

-- try_lease record=True: the first (creates the ledger) [3/6]
COMMENT ON TABLE job_runs IS 'joblocks run ledger: one row per run';

-- try_lease record=True: the first (creates the ledger) [4/6]
CREATE INDEX job_runs_key_ix ON job_runs (key, started_at);

-- try_lease record=True: the first (creates the ledger) [5/6]
CREATE INDEX job_runs_start_ix ON job_runs (started_at);

-- try_lease record=True: the first (creates the ledger) [6/6]
INSERT INTO job_runs (key, slot, schedule, timezone, holder, host, pid, token, started_at) VALUES (%(key)s::VARCHAR, %(slot)s::BIGINT, %(schedule)s::VARCHAR, %(timezone)s::VARCHAR, %(holder)s::VARCHAR, %(host)s::VARCHAR, %(pid)s::INTEGER, %(token)s::BIGINT, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', clock_timestamp())) * 1000 AS BIGINT)) RETURNING job_runs.id;

-- try_lease record=True [1/5]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease record=True [2/5]
BEGIN ISOLATION LEVEL READ COMMITTED;

-- try_lease record=True [3/5]
SET LOCAL lock_timeout = 4000;

-- try_lease record=True [4/5]
INSERT INTO job_runs (key, slot, schedule, timezone, holder, host, pid, token, started_at) VALUES (%(key)s::VARCHAR, %(slot)s::BIGINT, %(schedule)s::VARCHAR, %(timezone)s::VARCHAR, %(holder)s::VARCHAR, %(host)s::VARCHAR, %(pid)s::INTEGER, %(token)s::BIGINT, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', clock_timestamp())) * 1000 AS BIGINT)) RETURNING job_runs.id;

-- try_lease record=True [5/5]
COMMIT;

-- lease release record=True [1/5]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release record=True [2/5]
BEGIN ISOLATION LEVEL READ COMMITTED;

-- lease release record=True [3/5]
SET LOCAL lock_timeout = 4000;

-- lease release record=True [4/5]
UPDATE job_runs SET ended_at=CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), duration_ms=(CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) - job_runs.started_at), outcome=%(outcome)s::VARCHAR, error=%(error)s::VARCHAR WHERE job_runs.id = %(id_1)s::BIGINT;

-- lease release record=True [5/5]
COMMIT;

-- try_lease record='all': taken [1/6]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease record='all': taken [2/6]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease record='all': taken [3/6]
BEGIN ISOLATION LEVEL READ COMMITTED;

-- try_lease record='all': taken [4/6]
SET LOCAL lock_timeout = 4000;

-- try_lease record='all': taken [5/6]
INSERT INTO job_runs (key, slot, schedule, timezone, holder, host, pid, token, started_at, ended_at, duration_ms, outcome) VALUES (%(key)s::VARCHAR, %(slot)s::BIGINT, %(schedule)s::VARCHAR, %(timezone)s::VARCHAR, %(holder)s::VARCHAR, %(host)s::VARCHAR, %(pid)s::INTEGER, %(token)s::BIGINT, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), %(duration_ms)s::BIGINT, %(outcome)s::VARCHAR) RETURNING job_runs.id;

-- try_lease record='all': taken [6/6]
COMMIT;

-- runs [1/3]
SELECT CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', clock_timestamp())) * 1000 AS BIGINT) AS anon_1;

-- runs [2/3]
SELECT pg_catalog.pg_class.relname 
FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
WHERE pg_catalog.pg_class.relname IN (%(table_names_1)s::VARCHAR) AND pg_catalog.pg_class.relkind = ANY (ARRAY[%(param_1)s::VARCHAR, %(param_2)s::VARCHAR, %(param_3)s::VARCHAR, %(param_4)s::VARCHAR, %(param_5)s::VARCHAR]) AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != %(nspname_1)s::VARCHAR;

-- runs [3/3]
SELECT job_runs.id, job_runs.key, job_runs.slot, job_runs.schedule, job_runs.timezone, job_runs.holder, job_runs.host, job_runs.pid, job_runs.token, job_runs.started_at, job_runs.ended_at, job_runs.duration_ms, job_runs.outcome, job_runs.error 
FROM job_runs 
WHERE job_runs.key = %(key_1)s::VARCHAR ORDER BY job_runs.started_at DESC, job_runs.id DESC 
 LIMIT %(param_1)s::INTEGER;

-- runs (every key) [1/3]
SELECT CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', clock_timestamp())) * 1000 AS BIGINT) AS anon_1;

-- runs (every key) [2/3]
SELECT pg_catalog.pg_class.relname 
FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
WHERE pg_catalog.pg_class.relname IN (%(table_names_1)s::VARCHAR) AND pg_catalog.pg_class.relkind = ANY (ARRAY[%(param_1)s::VARCHAR, %(param_2)s::VARCHAR, %(param_3)s::VARCHAR, %(param_4)s::VARCHAR, %(param_5)s::VARCHAR]) AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != %(nspname_1)s::VARCHAR;

-- runs (every key) [3/3]
SELECT job_runs.id, job_runs.key, job_runs.slot, job_runs.schedule, job_runs.timezone, job_runs.holder, job_runs.host, job_runs.pid, job_runs.token, job_runs.started_at, job_runs.ended_at, job_runs.duration_ms, job_runs.outcome, job_runs.error 
FROM job_runs ORDER BY job_runs.started_at DESC, job_runs.id DESC 
 LIMIT %(param_1)s::INTEGER;

-- prune_runs [1/3]
SELECT pg_catalog.pg_class.relname 
FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace 
WHERE pg_catalog.pg_class.relname IN (%(table_names_1)s::VARCHAR) AND pg_catalog.pg_class.relkind = ANY (ARRAY[%(param_1)s::VARCHAR, %(param_2)s::VARCHAR, %(param_3)s::VARCHAR, %(param_4)s::VARCHAR, %(param_5)s::VARCHAR]) AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != %(nspname_1)s::VARCHAR;

-- prune_runs [2/3]
SELECT CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', clock_timestamp())) * 1000 AS BIGINT) AS anon_1;

-- prune_runs [3/3]
SELECT job_runs.id 
FROM job_runs 
WHERE job_runs.started_at < %(started_at_1)s::BIGINT ORDER BY job_runs.id 
 LIMIT %(param_1)s::INTEGER;

-- create the table (update_insert)
-- (nothing sent)

-- acquire (update_insert): a free key [1/3]
SELECT pg_backend_pid(), current_setting('default_transaction_isolation');

-- acquire (update_insert): a free key [2/3]
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) RETURNING fence, acquired_at, expires_at;

-- acquire (update_insert): a free key [3/3]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO NOTHING RETURNING fence, acquired_at, expires_at;

-- acquire (update_insert): re-entrant
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) RETURNING fence, acquired_at, expires_at;

-- acquire (update_insert): taken [1/2]
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) RETURNING fence, acquired_at, expires_at;

-- acquire (update_insert): taken [2/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO NOTHING RETURNING fence, acquired_at, expires_at;

-- acquire (update_insert): an expired row
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) RETURNING fence, acquired_at, expires_at;

-- try_lease schedule= (update_insert): a new slot [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease schedule= (update_insert): a new slot [2/4]
SELECT CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT);

-- try_lease schedule= (update_insert): a new slot [3/4]
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) AND acquired_at < %(slot_start)s RETURNING fence, acquired_at, expires_at;

-- try_lease schedule= (update_insert): a new slot [4/4]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO NOTHING RETURNING fence, acquired_at, expires_at;

-- lease release schedule= (update_insert)
UPDATE job_locks SET expires_at = GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT);

-- try_lease schedule= (update_insert): the slot ran already
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease max_holders=2 (update_insert): the first place [1/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (update_insert): the first place [2/7]
UPDATE job_locks SET acquired_at = CASE WHEN holder = %(marker)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN acquired_at ELSE CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) END, expires_at = CASE WHEN holder = %(marker)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s THEN expires_at ELSE CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s END, holder = %(marker)s, fence = 0 WHERE id = %(key)s AND (holder = %(marker)s OR expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT));

-- try_lease max_holders=2 (update_insert): the first place [3/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(marker)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, 0) ON CONFLICT (id) DO NOTHING;

-- try_lease max_holders=2 (update_insert): the first place [4/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (update_insert): the first place [5/7]
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (update_insert): the first place [6/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO NOTHING RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (update_insert): the first place [7/7]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < CAST(%(until)s AS BIGINT) THEN CAST(%(until)s AS BIGINT) ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- try_lease max_holders=2 (update_insert): the second place [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (update_insert): the second place [2/4]
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (update_insert): the second place [3/4]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) ON CONFLICT (id) DO NOTHING RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (update_insert): the second place [4/4]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < CAST(%(until)s AS BIGINT) THEN CAST(%(until)s AS BIGINT) ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- try_lease max_holders=2 (update_insert): refused
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- lease refresh max_holders=2 (update_insert) [1/2]
UPDATE job_locks SET expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) RETURNING expires_at;

-- lease refresh max_holders=2 (update_insert) [2/2]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < CAST(%(until)s AS BIGINT) THEN CAST(%(until)s AS BIGINT) ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- lease release max_holders=2 (update_insert): a place left [1/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release max_holders=2 (update_insert): a place left [2/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(marker)s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%(p1)s, %(p2)s) AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT)) AS live_places);

-- lease release max_holders=2 (update_insert): the last place [1/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release max_holders=2 (update_insert): the last place [2/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(marker)s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%(p1)s, %(p2)s) AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT)) AS live_places);

-- create the table (portable)
-- (nothing sent)

-- acquire (portable): a free key [1/3]
SELECT pg_backend_pid(), current_setting('default_transaction_isolation');

-- acquire (portable): a free key [2/3]
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) RETURNING fence, acquired_at, expires_at;

-- acquire (portable): a free key [3/3]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) RETURNING fence, acquired_at, expires_at;

-- acquire (portable): re-entrant
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) RETURNING fence, acquired_at, expires_at;

-- acquire (portable): taken [1/2]
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) RETURNING fence, acquired_at, expires_at;

-- acquire (portable): taken [2/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) RETURNING fence, acquired_at, expires_at;

-- acquire (portable): an expired row
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) RETURNING fence, acquired_at, expires_at;

-- try_lease schedule= (portable): a new slot [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease schedule= (portable): a new slot [2/4]
SELECT CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT);

-- try_lease schedule= (portable): a new slot [3/4]
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) AND acquired_at < %(slot_start)s RETURNING fence, acquired_at, expires_at;

-- try_lease schedule= (portable): a new slot [4/4]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) RETURNING fence, acquired_at, expires_at;

-- lease release schedule= (portable)
UPDATE job_locks SET expires_at = GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT);

-- try_lease schedule= (portable): the slot ran already
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease max_holders=2 (portable): the first place [1/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (portable): the first place [2/7]
UPDATE job_locks SET acquired_at = CASE WHEN holder = %(marker)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN acquired_at ELSE CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) END, expires_at = CASE WHEN holder = %(marker)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s THEN expires_at ELSE CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s END, holder = %(marker)s, fence = 0 WHERE id = %(key)s AND (holder = %(marker)s OR expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT));

-- try_lease max_holders=2 (portable): the first place [3/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(marker)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, 0) ON CONFLICT (id) DO NOTHING;

-- try_lease max_holders=2 (portable): the first place [4/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (portable): the first place [5/7]
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (portable): the first place [6/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (portable): the first place [7/7]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < CAST(%(until)s AS BIGINT) THEN CAST(%(until)s AS BIGINT) ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- try_lease max_holders=2 (portable): the second place [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (portable): the second place [2/4]
UPDATE job_locks SET holder = %(holder)s, acquired_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, fence = CASE WHEN holder = %(holder)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) THEN fence ELSE (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order) END WHERE id = %(key)s AND (expires_at <= CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) OR holder = %(holder)s) RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (portable): the second place [3/4]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT), CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s, (SELECT nextval('job_locks_fence_seq') + (CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT) - 1) * 17592186044416 FROM (SELECT pg_advisory_xact_lock(27244, hashtext(CAST(%(key)s AS VARCHAR)))) AS fence_order)) RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (portable): the second place [4/4]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < CAST(%(until)s AS BIGINT) THEN CAST(%(until)s AS BIGINT) ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- try_lease max_holders=2 (portable): refused
SELECT id, holder, acquired_at, expires_at, fence, CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- lease refresh max_holders=2 (portable) [1/2]
UPDATE job_locks SET expires_at = CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) + %(ttl)s WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT) RETURNING expires_at;

-- lease refresh max_holders=2 (portable) [2/2]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < CAST(%(until)s AS BIGINT) THEN CAST(%(until)s AS BIGINT) ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- lease release max_holders=2 (portable): a place left [1/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release max_holders=2 (portable): a place left [2/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(marker)s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%(p1)s, %(p2)s) AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT)) AS live_places);

-- lease release max_holders=2 (portable): the last place [1/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release max_holders=2 (portable): the last place [2/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(marker)s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%(p1)s, %(p2)s) AND expires_at > CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', statement_timestamp())) * 1000 AS BIGINT)) AS live_places);

-- init --sql: the lock table [1/3]
CREATE SEQUENCE job_locks_fence_seq;

-- init --sql: the lock table [2/3]
CREATE TABLE job_locks (
	id VARCHAR(512) NOT NULL, 
	holder VARCHAR(255) NOT NULL, 
	acquired_at BIGINT NOT NULL, 
	expires_at BIGINT NOT NULL, 
	fence BIGINT NOT NULL, 
	PRIMARY KEY (id)
);

-- init --sql: the lock table [3/3]
COMMENT ON TABLE job_locks IS 'joblocks leases: one row per held or expired lock';

-- the run ledger's table, offline [1/4]
CREATE TABLE job_runs (
	id BIGSERIAL NOT NULL, 
	key VARCHAR(512) NOT NULL, 
	slot BIGINT, 
	schedule VARCHAR(255), 
	timezone VARCHAR(64), 
	holder VARCHAR(255) NOT NULL, 
	host VARCHAR(255) NOT NULL, 
	pid INTEGER NOT NULL, 
	token BIGINT, 
	started_at BIGINT NOT NULL, 
	ended_at BIGINT, 
	duration_ms BIGINT, 
	outcome VARCHAR(16), 
	error VARCHAR(500), 
	PRIMARY KEY (id)
);

-- the run ledger's table, offline [2/4]
COMMENT ON TABLE job_runs IS 'joblocks run ledger: one row per run';

-- the run ledger's table, offline [3/4]
CREATE INDEX job_runs_key_ix ON job_runs (key, started_at);

-- the run ledger's table, offline [4/4]
CREATE INDEX job_runs_start_ix ON job_runs (started_at);
