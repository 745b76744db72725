-- The SQL joblocks sends to mariadb (tests/core/sql/test_golden_sql.py, the asyncio face)

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
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- acquire (upsert): re-entrant
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- acquire (upsert): taken
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- acquire (upsert): an expired row
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease schedule= (upsert): a new slot [1/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- try_lease schedule= (upsert): a new slot [2/6]
SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- try_lease schedule= (upsert): a new slot [3/6]
UPDATE job_locks SET fence = IF(holder = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s WHERE id = %s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %s) AND acquired_at < %s;

-- try_lease schedule= (upsert): a new slot [4/6]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- try_lease schedule= (upsert): a new slot [5/6]
UPDATE job_locks SET fence = LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)) WHERE id = %s AND holder = %s AND fence = %s;

-- try_lease schedule= (upsert): a new slot [6/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- lease release schedule= (upsert)
UPDATE job_locks SET expires_at = GREATEST(acquired_at + %s, %s) WHERE id = %s AND holder = %s AND fence = %s AND GREATEST(acquired_at + %s, %s) > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- try_lease schedule= (upsert): the slot ran already
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- try_lease max_holders=2 (upsert): the first place [1/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%s, %s, %s);

-- try_lease max_holders=2 (upsert): the first place [2/7]
UPDATE job_locks SET acquired_at = CASE WHEN holder = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) THEN acquired_at ELSE CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) END, expires_at = CASE WHEN holder = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s THEN expires_at ELSE CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s END, holder = %s, fence = 0 WHERE id = %s AND (holder = %s OR expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED));

-- try_lease max_holders=2 (upsert): the first place [3/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE id = id;

-- try_lease max_holders=2 (upsert): the first place [4/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%s, %s, %s);

-- try_lease max_holders=2 (upsert): the first place [5/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease max_holders=2 (upsert): the first place [6/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- try_lease max_holders=2 (upsert): the first place [7/7]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < %s THEN %s ELSE expires_at END WHERE id = %s AND holder = %s;

-- try_lease max_holders=2 (upsert): the second place [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%s, %s, %s);

-- try_lease max_holders=2 (upsert): the second place [2/4]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease max_holders=2 (upsert): the second place [3/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- try_lease max_holders=2 (upsert): the second place [4/4]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < %s THEN %s ELSE expires_at END WHERE id = %s AND holder = %s;

-- try_lease max_holders=2 (upsert): refused
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%s, %s, %s);

-- lease refresh max_holders=2 (upsert) [1/2]
UPDATE job_locks SET expires_at = LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s) WHERE id = %s AND holder = %s AND fence = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- lease refresh max_holders=2 (upsert) [2/2]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < %s THEN %s ELSE expires_at END WHERE id = %s AND holder = %s;

-- lease release max_holders=2 (upsert): a place left [1/2]
DELETE FROM job_locks WHERE id = %s AND holder = %s AND fence = %s;

-- lease release max_holders=2 (upsert): a place left [2/2]
DELETE FROM job_locks WHERE id = %s AND holder = %s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%s, %s) AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)) AS live_places);

-- lease release max_holders=2 (upsert): the last place [1/2]
DELETE FROM job_locks WHERE id = %s AND holder = %s AND fence = %s;

-- lease release max_holders=2 (upsert): the last place [2/2]
DELETE FROM job_locks WHERE id = %s AND holder = %s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%s, %s) AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)) AS live_places);

-- release: ours [1/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- release: ours [2/2]
DELETE FROM job_locks WHERE id = %s AND holder = %s;

-- release: not ours
DELETE FROM job_locks WHERE id = %s AND holder = %s;

-- refresh
UPDATE job_locks SET expires_at = LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s) WHERE id = %s AND holder = %s;

-- peek
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- now_ms
SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- insert [1/3]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- insert [2/3]
UPDATE job_locks SET fence = LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)) WHERE id = %s AND holder = %s AND fence = %s;

-- insert [3/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- update holder=
UPDATE job_locks SET fence = IF(holder = %s, fence, NEXTVAL(job_locks_fence_seq)), holder = %s WHERE id = %s;

-- update ttl=
UPDATE job_locks SET expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s WHERE id = %s;

-- list all
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks ORDER BY id;

-- count all
SELECT COUNT(*) FROM job_locks;

-- iter_locks all (pages of 1) [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %s ORDER BY id LIMIT %s;

-- iter_locks all (pages of 1) [2/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %s ORDER BY id LIMIT %s;

-- iter_locks all (pages of 1) [3/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %s ORDER BY id LIMIT %s;

-- iter_locks all (pages of 1) [4/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %s ORDER BY id LIMIT %s;

-- list live
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id;

-- count live
SELECT COUNT(*) FROM job_locks WHERE expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- iter_locks live (pages of 1) [1/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id LIMIT %s;

-- iter_locks live (pages of 1) [2/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id LIMIT %s;

-- iter_locks live (pages of 1) [3/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id LIMIT %s;

-- list expired
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id;

-- count expired
SELECT COUNT(*) FROM job_locks WHERE expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- iter_locks expired (pages of 1) [1/2]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %s AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id LIMIT %s;

-- iter_locks expired (pages of 1) [2/2]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id > %s AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) ORDER BY id LIMIT %s;

-- prune dry_run
SELECT COUNT(*) FROM job_locks WHERE expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - %s;

-- prune (batches of 1) [1/4]
SELECT id FROM job_locks WHERE id > %s AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - %s ORDER BY id LIMIT 1 OFFSET %s;

-- prune (batches of 1) [2/4]
DELETE FROM job_locks WHERE id > %s AND id <= %s AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - %s;

-- prune (batches of 1) [3/4]
SELECT id FROM job_locks WHERE id > %s AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - %s ORDER BY id LIMIT 1 OFFSET %s;

-- prune (batches of 1) [4/4]
DELETE FROM job_locks WHERE id > %s AND expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - %s;

-- delete
DELETE FROM job_locks WHERE id = %s;

-- try_lease [1/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease [2/2]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- lease ensure_held
SELECT 1 FROM job_locks WHERE id = %s AND holder = %s AND fence = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- lease refresh
UPDATE job_locks SET expires_at = LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s) WHERE id = %s AND holder = %s AND fence = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- lease refresh min_hold=
UPDATE job_locks SET expires_at = LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s) WHERE id = %s AND holder = %s AND fence = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- lease release min_hold=
UPDATE job_locks SET expires_at = GREATEST(acquired_at + %s, %s) WHERE id = %s AND holder = %s AND fence = %s AND GREATEST(acquired_at + %s, %s) > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- lease release
DELETE FROM job_locks WHERE id = %s AND holder = %s AND fence = %s;

-- try_lease liveness=session: the first (sets up the registry) [1/3]
CREATE TABLE IF NOT EXISTS job_locks_live (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, lock_key VARBINARY(512) NOT NULL, fence BIGINT NULL, UNIQUE KEY (lock_key)) ENGINE=InnoDB;

-- try_lease liveness=session: the first (sets up the registry) [2/3]
INSERT IGNORE INTO job_locks_live (lock_key) VALUES (%s);

-- try_lease liveness=session: the first (sets up the registry) [3/3]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease liveness=session [1/7]
SELECT id FROM job_locks_live WHERE lock_key = %s;

-- try_lease liveness=session [2/7]
INSERT IGNORE INTO job_locks_live (lock_key) VALUES (%s);

-- try_lease liveness=session [3/7]
SELECT id FROM job_locks_live WHERE lock_key = %s;

-- try_lease liveness=session [4/7]
SELECT GET_LOCK(%s, 0);

-- try_lease liveness=session [5/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease liveness=session [6/7]
UPDATE job_locks_live SET fence = %s WHERE id = %s;

-- try_lease liveness=session [7/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- try_lease liveness=session: taken [1/3]
SET SESSION wait_timeout = 31536000;

-- try_lease liveness=session: taken [2/3]
SELECT GET_LOCK(%s, 0);

-- try_lease liveness=session: taken [3/3]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- lease release liveness=session [1/2]
DELETE FROM job_locks WHERE id = %s AND holder = %s AND fence = %s;

-- lease release liveness=session [2/2]
SELECT RELEASE_LOCK(%s);

-- try_lease record=True: the first (creates the ledger) [1/5]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

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
INSERT INTO job_runs (`key`, slot, schedule, timezone, holder, host, pid, token, started_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED));

-- try_lease record=True [1/5]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease record=True [2/5]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- try_lease record=True [3/5]
SET SESSION max_statement_time = 4.000;

-- try_lease record=True [4/5]
INSERT INTO job_runs (`key`, slot, schedule, timezone, holder, host, pid, token, started_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED));

-- try_lease record=True [5/5]
SET SESSION max_statement_time = DEFAULT;

-- lease release record=True [1/4]
DELETE FROM job_locks WHERE id = %s AND holder = %s AND fence = %s;

-- lease release record=True [2/4]
SET SESSION max_statement_time = 4.000;

-- lease release record=True [3/4]
UPDATE job_runs SET ended_at=CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), duration_ms=(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) - job_runs.started_at), outcome=%s, error=%s WHERE job_runs.id = %s;

-- lease release record=True [4/4]
SET SESSION max_statement_time = DEFAULT;

-- try_lease record='all': taken [1/5]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease record='all': taken [2/5]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0), (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE fence = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), LAST_INSERT_ID(IF(holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at), fence, NEXTVAL(job_locks_fence_seq))), fence + LAST_INSERT_ID(0)), acquired_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(acquired_at), acquired_at), holder = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(holder), holder), expires_at = IF((expires_at <= VALUES(acquired_at) OR holder = VALUES(holder)), VALUES(expires_at), expires_at);

-- try_lease record='all': taken [3/5]
SET SESSION max_statement_time = 4.000;

-- try_lease record='all': taken [4/5]
INSERT INTO job_runs (`key`, slot, schedule, timezone, holder, host, pid, token, started_at, ended_at, duration_ms, outcome) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), %s, %s);

-- try_lease record='all': taken [5/5]
SET SESSION max_statement_time = DEFAULT;

-- runs [1/3]
SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS anon_1;

-- runs [2/3]
DESCRIBE `joblocks_test`.`job_runs`;

-- runs [3/3]
SELECT job_runs.id, job_runs.`key`, job_runs.slot, job_runs.schedule, job_runs.timezone, job_runs.holder, job_runs.host, job_runs.pid, job_runs.token, job_runs.started_at, job_runs.ended_at, job_runs.duration_ms, job_runs.outcome, job_runs.error 
FROM job_runs 
WHERE job_runs.`key` = %s ORDER BY job_runs.started_at DESC, job_runs.id DESC 
 LIMIT %s;

-- runs (every key) [1/3]
SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS anon_1;

-- runs (every key) [2/3]
DESCRIBE `joblocks_test`.`job_runs`;

-- runs (every key) [3/3]
SELECT job_runs.id, job_runs.`key`, job_runs.slot, job_runs.schedule, job_runs.timezone, job_runs.holder, job_runs.host, job_runs.pid, job_runs.token, job_runs.started_at, job_runs.ended_at, job_runs.duration_ms, job_runs.outcome, job_runs.error 
FROM job_runs ORDER BY job_runs.started_at DESC, job_runs.id DESC 
 LIMIT %s;

-- prune_runs [1/3]
DESCRIBE `joblocks_test`.`job_runs`;

-- prune_runs [2/3]
SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS anon_1;

-- prune_runs [3/3]
SELECT job_runs.id 
FROM job_runs 
WHERE job_runs.started_at < %s ORDER BY job_runs.id 
 LIMIT %s;

-- create the table (portable)
-- (nothing sent)

-- acquire (portable): a free key [1/3]
UPDATE job_locks SET fence = IF(holder = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s WHERE id = %s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %s);

-- acquire (portable): a free key [2/3]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- acquire (portable): a free key [3/3]
UPDATE job_locks SET fence = LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)) WHERE id = %s AND holder = %s AND fence = %s;

-- acquire (portable): re-entrant
UPDATE job_locks SET fence = IF(holder = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s WHERE id = %s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %s);

-- acquire (portable): taken [1/2]
UPDATE job_locks SET fence = IF(holder = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s WHERE id = %s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %s);

-- acquire (portable): taken [2/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- acquire (portable): an expired row
UPDATE job_locks SET fence = IF(holder = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s WHERE id = %s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %s);

-- try_lease schedule= (portable): a new slot [1/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- try_lease schedule= (portable): a new slot [2/6]
SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- try_lease schedule= (portable): a new slot [3/6]
UPDATE job_locks SET fence = IF(holder = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s WHERE id = %s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %s) AND acquired_at < %s;

-- try_lease schedule= (portable): a new slot [4/6]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- try_lease schedule= (portable): a new slot [5/6]
UPDATE job_locks SET fence = LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)) WHERE id = %s AND holder = %s AND fence = %s;

-- try_lease schedule= (portable): a new slot [6/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- lease release schedule= (portable)
UPDATE job_locks SET expires_at = GREATEST(acquired_at + %s, %s) WHERE id = %s AND holder = %s AND fence = %s AND GREATEST(acquired_at + %s, %s) > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- try_lease schedule= (portable): the slot ran already
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- try_lease max_holders=2 (portable): the first place [1/9]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%s, %s, %s);

-- try_lease max_holders=2 (portable): the first place [2/9]
UPDATE job_locks SET acquired_at = CASE WHEN holder = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) THEN acquired_at ELSE CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) END, expires_at = CASE WHEN holder = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s THEN expires_at ELSE CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s END, holder = %s, fence = 0 WHERE id = %s AND (holder = %s OR expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED));

-- try_lease max_holders=2 (portable): the first place [3/9]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, 0) ON DUPLICATE KEY UPDATE id = id;

-- try_lease max_holders=2 (portable): the first place [4/9]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%s, %s, %s);

-- try_lease max_holders=2 (portable): the first place [5/9]
UPDATE job_locks SET fence = IF(holder = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s WHERE id = %s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %s);

-- try_lease max_holders=2 (portable): the first place [6/9]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- try_lease max_holders=2 (portable): the first place [7/9]
UPDATE job_locks SET fence = LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)) WHERE id = %s AND holder = %s AND fence = %s;

-- try_lease max_holders=2 (portable): the first place [8/9]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- try_lease max_holders=2 (portable): the first place [9/9]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < %s THEN %s ELSE expires_at END WHERE id = %s AND holder = %s;

-- try_lease max_holders=2 (portable): the second place [1/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%s, %s, %s);

-- try_lease max_holders=2 (portable): the second place [2/6]
UPDATE job_locks SET fence = IF(holder = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), LAST_INSERT_ID(fence), LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq))), holder = %s, acquired_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), expires_at = CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s WHERE id = %s AND (expires_at <= CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) OR holder = %s);

-- try_lease max_holders=2 (portable): the second place [3/6]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (%s, %s, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s, LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)));

-- try_lease max_holders=2 (portable): the second place [4/6]
UPDATE job_locks SET fence = LAST_INSERT_ID(NEXTVAL(job_locks_fence_seq)) WHERE id = %s AND holder = %s AND fence = %s;

-- try_lease max_holders=2 (portable): the second place [5/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id = %s;

-- try_lease max_holders=2 (portable): the second place [6/6]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < %s THEN %s ELSE expires_at END WHERE id = %s AND holder = %s;

-- try_lease max_holders=2 (portable): refused
SELECT id, holder, acquired_at, expires_at, fence, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS now_ms FROM job_locks WHERE id IN (%s, %s, %s);

-- lease refresh max_holders=2 (portable) [1/2]
UPDATE job_locks SET expires_at = LAST_INSERT_ID(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) + %s) WHERE id = %s AND holder = %s AND fence = %s AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED);

-- lease refresh max_holders=2 (portable) [2/2]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < %s THEN %s ELSE expires_at END WHERE id = %s AND holder = %s;

-- lease release max_holders=2 (portable): a place left [1/2]
DELETE FROM job_locks WHERE id = %s AND holder = %s AND fence = %s;

-- lease release max_holders=2 (portable): a place left [2/2]
DELETE FROM job_locks WHERE id = %s AND holder = %s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%s, %s) AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)) AS live_places);

-- lease release max_holders=2 (portable): the last place [1/2]
DELETE FROM job_locks WHERE id = %s AND holder = %s AND fence = %s;

-- lease release max_holders=2 (portable): the last place [2/2]
DELETE FROM job_locks WHERE id = %s AND holder = %s AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (%s, %s) AND expires_at > CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)) AS live_places);

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
