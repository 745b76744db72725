-- The SQL joblocks sends to mariadb (tests/core/sql/test_golden_sql.py)

-- create the table (upsert) [1/2]
CREATE SEQUENCE job_locks_fence_seq;

-- create the table (upsert) [2/2]
CREATE TABLE job_locks (
	id VARBINARY(512) NOT NULL, 
	holder VARBINARY(255) NOT NULL, 
	acquired_at BIGINT NOT NULL, 
	expires_at BIGINT NOT NULL, 
	fence BIGINT NOT NULL, 
	PRIMARY KEY (id)
)COMMENT='joblocks leases: one row per held or expired lock';

-- acquire (upsert): a free key
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- acquire (upsert): re-entrant
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- acquire (upsert): taken
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- acquire (upsert): an expired row
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease schedule= (upsert): a new slot [1/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease schedule= (upsert): a new slot [2/6]
SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- try_lease schedule= (upsert): a new slot [3/6]
UPDATE job_locks SET fence = IF(holder = %(holder)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %(holder)s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s WHERE id = %(key)s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %(holder)s) AND acquired_at < %(slot_start)s;

-- try_lease schedule= (upsert): a new slot [4/6]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- try_lease schedule= (upsert): a new slot [5/6]
UPDATE job_locks SET fence = LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- try_lease schedule= (upsert): a new slot [6/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- lease release schedule= (upsert)
UPDATE job_locks SET expires_at = GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- try_lease schedule= (upsert): the slot ran already
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease max_holders=2 (upsert): the first place [1/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (upsert): the first place [2/7]
UPDATE job_locks SET acquired_at = CASE WHEN holder = %(marker)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) THEN acquired_at ELSE CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) END, expires_at = CASE WHEN holder = %(marker)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s THEN expires_at ELSE CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s END, holder = %(marker)s, fence = 0 WHERE id = %(key)s AND (holder = %(marker)s OR expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED));

-- try_lease max_holders=2 (upsert): the first place [3/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(marker)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE id = id;

-- try_lease max_holders=2 (upsert): the first place [4/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (upsert): the first place [5/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease max_holders=2 (upsert): the first place [6/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease max_holders=2 (upsert): the first place [7/7]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < %(until)s THEN %(until)s ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- try_lease max_holders=2 (upsert): the second place [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (upsert): the second place [2/4]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease max_holders=2 (upsert): the second place [3/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease max_holders=2 (upsert): the second place [4/4]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < %(until)s THEN %(until)s ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- try_lease max_holders=2 (upsert): refused
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- lease refresh max_holders=2 (upsert) [1/2]
UPDATE job_locks SET expires_at = LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- lease refresh max_holders=2 (upsert) [2/2]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < %(until)s THEN %(until)s ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- lease release max_holders=2 (upsert): a place left [1/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release max_holders=2 (upsert): a place left [2/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(marker)s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%(p1)s, %(p2)s) AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)) AS live_places);

-- lease release max_holders=2 (upsert): the last place [1/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release max_holders=2 (upsert): the last place [2/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(marker)s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%(p1)s, %(p2)s) AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)) AS live_places);

-- release: ours [1/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- release: ours [2/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s;

-- release: not ours
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s;

-- refresh
UPDATE job_locks SET expires_at = LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s) WHERE id = %(key)s AND holder = %(holder)s;

-- peek
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- now_ms
SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- insert [1/3]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- insert [2/3]
UPDATE job_locks SET fence = LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- insert [3/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- update holder=
UPDATE job_locks SET fence = IF(holder = %(holder)s, fence, NEXTVAL(job_locks_fence_seq)), holder = %(holder)s WHERE id = %(key)s;

-- update ttl=
UPDATE job_locks SET expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s WHERE id = %(key)s;

-- list all
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks ORDER BY id;

-- count all
SELECT COUNT(*) FROM job_locks;

-- iter_locks all (pages of 1) [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %(after)s ORDER BY id LIMIT %(n)s;

-- iter_locks all (pages of 1) [2/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %(after)s ORDER BY id LIMIT %(n)s;

-- iter_locks all (pages of 1) [3/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %(after)s ORDER BY id LIMIT %(n)s;

-- iter_locks all (pages of 1) [4/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %(after)s ORDER BY id LIMIT %(n)s;

-- list live
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id;

-- count live
SELECT COUNT(*) FROM job_locks WHERE expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- iter_locks live (pages of 1) [1/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %(after)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id LIMIT %(n)s;

-- iter_locks live (pages of 1) [2/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %(after)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id LIMIT %(n)s;

-- iter_locks live (pages of 1) [3/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %(after)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id LIMIT %(n)s;

-- list expired
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id;

-- count expired
SELECT COUNT(*) FROM job_locks WHERE expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- iter_locks expired (pages of 1) [1/2]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %(after)s AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id LIMIT %(n)s;

-- iter_locks expired (pages of 1) [2/2]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %(after)s AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id LIMIT %(n)s;

-- prune dry_run
SELECT COUNT(*) FROM job_locks WHERE expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - %(age)s;

-- prune (batches of 1) [1/4]
SELECT id FROM job_locks WHERE id > %(after)s AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - %(age)s ORDER BY id LIMIT 1 OFFSET %(skip)s;

-- prune (batches of 1) [2/4]
DELETE FROM job_locks WHERE id > %(after)s AND id <= %(upto)s AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - %(age)s;

-- prune (batches of 1) [3/4]
SELECT id FROM job_locks WHERE id > %(after)s AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - %(age)s ORDER BY id LIMIT 1 OFFSET %(skip)s;

-- prune (batches of 1) [4/4]
DELETE FROM job_locks WHERE id > %(after)s AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - %(age)s;

-- delete
DELETE FROM job_locks WHERE id = %(key)s;

-- try_lease [1/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease [2/2]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- lease ensure_held
SELECT 1 FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- lease refresh
UPDATE job_locks SET expires_at = LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- lease refresh min_hold=
UPDATE job_locks SET expires_at = LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- lease release min_hold=
UPDATE job_locks SET expires_at = GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- lease release
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- try_lease liveness=session: the first (sets up the registry) [1/3]
CREATE TABLE IF NOT EXISTS job_locks_live (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, lock_key VARBINARY(512) NOT NULL, fence BIGINT NULL, UNIQUE KEY (lock_key)) ENGINE=InnoDB;

-- try_lease liveness=session: the first (sets up the registry) [2/3]
INSERT IGNORE INTO job_locks_live (lock_key) VALUES (%(key)s);

-- try_lease liveness=session: the first (sets up the registry) [3/3]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease liveness=session [1/7]
SELECT id FROM job_locks_live WHERE lock_key = %(key)s;

-- try_lease liveness=session [2/7]
INSERT IGNORE INTO job_locks_live (lock_key) VALUES (%(key)s);

-- try_lease liveness=session [3/7]
SELECT id FROM job_locks_live WHERE lock_key = %(key)s;

-- try_lease liveness=session [4/7]
SELECT GET_LOCK(%(lock)s, 0);

-- try_lease liveness=session [5/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease liveness=session [6/7]
UPDATE job_locks_live SET fence = %(fence)s WHERE id = %(id)s;

-- try_lease liveness=session [7/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease liveness=session: taken [1/4]
SET NAMES utf8mb4;

-- try_lease liveness=session: taken [2/4]
SET SESSION wait_timeout = 31536000;

-- try_lease liveness=session: taken [3/4]
SELECT GET_LOCK(%(lock)s, 0);

-- try_lease liveness=session: taken [4/4]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- lease release liveness=session [1/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release liveness=session [2/2]
SELECT RELEASE_LOCK(%(lock)s);

-- try_lease record=True: the first (creates the ledger) [1/5]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease record=True: the first (creates the ledger) [2/5]
CREATE TABLE job_runs (
	id BIGINT NOT NULL AUTO_INCREMENT, 
	`key` VARBINARY(512) NOT NULL, 
	slot BIGINT, 
	schedule VARCHAR(255), 
	timezone VARCHAR(64), 
	holder VARBINARY(255) NOT NULL, 
	host VARCHAR(255) NOT NULL, 
	pid INTEGER NOT NULL, 
	token BIGINT, 
	started_at BIGINT NOT NULL, 
	ended_at BIGINT, 
	duration_ms BIGINT, 
	outcome VARCHAR(16), 
	error VARCHAR(500), 
	PRIMARY KEY (id)
)COMMENT='joblocks run ledger: one row per run';

-- try_lease record=True: the first (creates the ledger) [3/5]
CREATE INDEX job_runs_key_ix ON job_runs (`key`, started_at);

-- try_lease record=True: the first (creates the ledger) [4/5]
CREATE INDEX job_runs_start_ix ON job_runs (started_at);

-- try_lease record=True: the first (creates the ledger) [5/5]
INSERT INTO job_runs (`key`, slot, schedule, timezone, holder, host, pid, token, started_at) VALUES (%(key)s, %(slot)s, %(schedule)s, %(timezone)s, %(holder)s, %(host)s, %(pid)s, %(token)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED));

-- try_lease record=True [1/5]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease record=True [2/5]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease record=True [3/5]
SET SESSION max_statement_time = 4.000;

-- try_lease record=True [4/5]
INSERT INTO job_runs (`key`, slot, schedule, timezone, holder, host, pid, token, started_at) VALUES (%(key)s, %(slot)s, %(schedule)s, %(timezone)s, %(holder)s, %(host)s, %(pid)s, %(token)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED));

-- try_lease record=True [5/5]
SET SESSION max_statement_time = DEFAULT;

-- lease release record=True [1/4]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release record=True [2/4]
SET SESSION max_statement_time = 4.000;

-- lease release record=True [3/4]
UPDATE job_runs SET ended_at=CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), duration_ms=(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - job_runs.started_at), outcome=%(outcome)s, error=%(error)s WHERE job_runs.id = %(id_1)s;

-- lease release record=True [4/4]
SET SESSION max_statement_time = DEFAULT;

-- try_lease record='all': taken [1/5]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease record='all': taken [2/5]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0), (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease record='all': taken [3/5]
SET SESSION max_statement_time = 4.000;

-- try_lease record='all': taken [4/5]
INSERT INTO job_runs (`key`, slot, schedule, timezone, holder, host, pid, token, started_at, ended_at, duration_ms, outcome) VALUES (%(key)s, %(slot)s, %(schedule)s, %(timezone)s, %(holder)s, %(host)s, %(pid)s, %(token)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), %(duration_ms)s, %(outcome)s);

-- try_lease record='all': taken [5/5]
SET SESSION max_statement_time = DEFAULT;

-- runs [1/3]
SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS anon_1;

-- runs [2/3]
DESCRIBE `joblocks_test`.`job_runs`;

-- runs [3/3]
SELECT job_runs.id, job_runs.`key`, job_runs.slot, job_runs.schedule, job_runs.timezone, job_runs.holder, job_runs.host, job_runs.pid, job_runs.token, job_runs.started_at, job_runs.ended_at, job_runs.duration_ms, job_runs.outcome, job_runs.error 
FROM job_runs 
WHERE job_runs.`key` = %(key_1)s ORDER BY job_runs.started_at DESC, job_runs.id DESC 
 LIMIT %(param_1)s;

-- runs (every key) [1/3]
SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS anon_1;

-- runs (every key) [2/3]
DESCRIBE `joblocks_test`.`job_runs`;

-- runs (every key) [3/3]
SELECT job_runs.id, job_runs.`key`, job_runs.slot, job_runs.schedule, job_runs.timezone, job_runs.holder, job_runs.host, job_runs.pid, job_runs.token, job_runs.started_at, job_runs.ended_at, job_runs.duration_ms, job_runs.outcome, job_runs.error 
FROM job_runs ORDER BY job_runs.started_at DESC, job_runs.id DESC 
 LIMIT %(param_1)s;

-- prune_runs [1/3]
DESCRIBE `joblocks_test`.`job_runs`;

-- prune_runs [2/3]
SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS anon_1;

-- prune_runs [3/3]
SELECT job_runs.id 
FROM job_runs 
WHERE job_runs.started_at < %(started_at_1)s ORDER BY job_runs.id 
 LIMIT %(param_1)s;

-- create the table (portable)
-- (nothing sent)

-- acquire (portable): a free key [1/3]
UPDATE job_locks SET fence = IF(holder = %(holder)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %(holder)s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s WHERE id = %(key)s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %(holder)s);

-- acquire (portable): a free key [2/3]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- acquire (portable): a free key [3/3]
UPDATE job_locks SET fence = LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- acquire (portable): re-entrant
UPDATE job_locks SET fence = IF(holder = %(holder)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %(holder)s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s WHERE id = %(key)s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %(holder)s);

-- acquire (portable): taken [1/2]
UPDATE job_locks SET fence = IF(holder = %(holder)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %(holder)s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s WHERE id = %(key)s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %(holder)s);

-- acquire (portable): taken [2/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- acquire (portable): an expired row
UPDATE job_locks SET fence = IF(holder = %(holder)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %(holder)s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s WHERE id = %(key)s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %(holder)s);

-- try_lease schedule= (portable): a new slot [1/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease schedule= (portable): a new slot [2/6]
SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- try_lease schedule= (portable): a new slot [3/6]
UPDATE job_locks SET fence = IF(holder = %(holder)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %(holder)s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s WHERE id = %(key)s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %(holder)s) AND acquired_at < %(slot_start)s;

-- try_lease schedule= (portable): a new slot [4/6]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- try_lease schedule= (portable): a new slot [5/6]
UPDATE job_locks SET fence = LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- try_lease schedule= (portable): a new slot [6/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- lease release schedule= (portable)
UPDATE job_locks SET expires_at = GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND GREATEST(acquired_at + %(min_hold)s, %(hold_until)s) > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- try_lease schedule= (portable): the slot ran already
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease max_holders=2 (portable): the first place [1/9]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (portable): the first place [2/9]
UPDATE job_locks SET acquired_at = CASE WHEN holder = %(marker)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) THEN acquired_at ELSE CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) END, expires_at = CASE WHEN holder = %(marker)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s THEN expires_at ELSE CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s END, holder = %(marker)s, fence = 0 WHERE id = %(key)s AND (holder = %(marker)s OR expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED));

-- try_lease max_holders=2 (portable): the first place [3/9]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(marker)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, 0) ON DUPLICATE KEY UPDATE id = id;

-- try_lease max_holders=2 (portable): the first place [4/9]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (portable): the first place [5/9]
UPDATE job_locks SET fence = IF(holder = %(holder)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %(holder)s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s WHERE id = %(key)s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %(holder)s);

-- try_lease max_holders=2 (portable): the first place [6/9]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- try_lease max_holders=2 (portable): the first place [7/9]
UPDATE job_locks SET fence = LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- try_lease max_holders=2 (portable): the first place [8/9]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease max_holders=2 (portable): the first place [9/9]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < %(until)s THEN %(until)s ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- try_lease max_holders=2 (portable): the second place [1/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- try_lease max_holders=2 (portable): the second place [2/6]
UPDATE job_locks SET fence = IF(holder = %(holder)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %(holder)s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s WHERE id = %(key)s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %(holder)s);

-- try_lease max_holders=2 (portable): the second place [3/6]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%(key)s, %(holder)s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- try_lease max_holders=2 (portable): the second place [4/6]
UPDATE job_locks SET fence = LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- try_lease max_holders=2 (portable): the second place [5/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %(key)s;

-- try_lease max_holders=2 (portable): the second place [6/6]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < %(until)s THEN %(until)s ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- try_lease max_holders=2 (portable): refused
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%(key)s, %(p1)s, %(p2)s);

-- lease refresh max_holders=2 (portable) [1/2]
UPDATE job_locks SET expires_at = LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %(ttl)s) WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- lease refresh max_holders=2 (portable) [2/2]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < %(until)s THEN %(until)s ELSE expires_at END WHERE id = %(key)s AND holder = %(marker)s;

-- lease release max_holders=2 (portable): a place left [1/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release max_holders=2 (portable): a place left [2/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(marker)s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%(p1)s, %(p2)s) AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)) AS live_places);

-- lease release max_holders=2 (portable): the last place [1/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(holder)s AND fence = %(fence)s;

-- lease release max_holders=2 (portable): the last place [2/2]
DELETE FROM job_locks WHERE id = %(key)s AND holder = %(marker)s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%(p1)s, %(p2)s) AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)) AS live_places);

-- init --sql: the lock table [1/2]
CREATE SEQUENCE job_locks_fence_seq;

-- init --sql: the lock table [2/2]
CREATE TABLE job_locks (
	id VARBINARY(512) NOT NULL, 
	holder VARBINARY(255) NOT NULL, 
	acquired_at BIGINT NOT NULL, 
	expires_at BIGINT NOT NULL, 
	fence BIGINT NOT NULL, 
	PRIMARY KEY (id)
)COMMENT='joblocks leases: one row per held or expired lock';

-- the run ledger's table, offline [1/3]
CREATE TABLE job_runs (
	id BIGINT NOT NULL AUTO_INCREMENT, 
	`key` VARBINARY(512) NOT NULL, 
	slot BIGINT, 
	schedule VARCHAR(255), 
	timezone VARCHAR(64), 
	holder VARBINARY(255) NOT NULL, 
	host VARCHAR(255) NOT NULL, 
	pid INTEGER NOT NULL, 
	token BIGINT, 
	started_at BIGINT NOT NULL, 
	ended_at BIGINT, 
	duration_ms BIGINT, 
	outcome VARCHAR(16), 
	error VARCHAR(500), 
	PRIMARY KEY (id)
)COMMENT='joblocks run ledger: one row per run';

-- the run ledger's table, offline [2/3]
CREATE INDEX job_runs_key_ix ON job_runs (`key`, started_at);

-- the run ledger's table, offline [3/3]
CREATE INDEX job_runs_start_ix ON job_runs (started_at);
