-- The SQL joblocks sends to sqlite (tests/core/sql/test_golden_sql.py)

-- create the table (upsert) [1/5]
CREATE TABLE job_locks (
	id VARCHAR(512) NOT NULL, 
	holder VARCHAR(255) NOT NULL, 
	acquired_at BIGINT NOT NULL, 
	expires_at BIGINT NOT NULL, 
	fence BIGINT NOT NULL, 
	PRIMARY KEY (id)
);

-- create the table (upsert) [2/5]
CREATE TABLE IF NOT EXISTS "job_locks_fence" (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);

-- create the table (upsert) [3/5]
INSERT OR IGNORE INTO "job_locks_fence" (id, value) SELECT 1, COALESCE(MAX(fence), 0) FROM "job_locks";

-- create the table (upsert) [4/5]
CREATE TRIGGER IF NOT EXISTS "job_locks_fence_ins" AFTER INSERT ON "job_locks" BEGIN UPDATE "job_locks_fence" SET value = NEW.fence WHERE value < NEW.fence; END;

-- create the table (upsert) [5/5]
CREATE TRIGGER IF NOT EXISTS "job_locks_fence_upd" AFTER UPDATE OF fence ON "job_locks" WHEN NEW.fence > OLD.fence BEGIN UPDATE "job_locks_fence" SET value = NEW.fence WHERE value < NEW.fence; END;

-- acquire (upsert): a free key
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- acquire (upsert): re-entrant
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- acquire (upsert): taken
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- acquire (upsert): an expired row
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease schedule= (upsert): a new slot [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id = ?;

-- try_lease schedule= (upsert): a new slot [2/4]
SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- try_lease schedule= (upsert): a new slot [3/4]
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) AND acquired_at < ? RETURNING fence, acquired_at, expires_at;

-- try_lease schedule= (upsert): a new slot [4/4]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO NOTHING RETURNING fence, acquired_at, expires_at;

-- lease release schedule= (upsert)
UPDATE job_locks SET expires_at = MAX(acquired_at + ?, ?) WHERE id = ? AND holder = ? AND fence = ? AND MAX(acquired_at + ?, ?) > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- try_lease schedule= (upsert): the slot ran already
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id = ?;

-- try_lease max_holders=2 (upsert): the first place [1/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id IN (?, ?, ?);

-- try_lease max_holders=2 (upsert): the first place [2/6]
UPDATE job_locks SET acquired_at = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN acquired_at ELSE CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) END, expires_at = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? THEN expires_at ELSE CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? END, holder = ?, fence = 0 WHERE id = ? AND (holder = ? OR expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER));

-- try_lease max_holders=2 (upsert): the first place [3/6]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, 0) ON CONFLICT (id) DO NOTHING;

-- try_lease max_holders=2 (upsert): the first place [4/6]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id IN (?, ?, ?);

-- try_lease max_holders=2 (upsert): the first place [5/6]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (upsert): the first place [6/6]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < ? THEN ? ELSE expires_at END WHERE id = ? AND holder = ?;

-- try_lease max_holders=2 (upsert): the second place [1/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id IN (?, ?, ?);

-- try_lease max_holders=2 (upsert): the second place [2/3]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (upsert): the second place [3/3]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < ? THEN ? ELSE expires_at END WHERE id = ? AND holder = ?;

-- try_lease max_holders=2 (upsert): refused
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id IN (?, ?, ?);

-- lease refresh max_holders=2 (upsert) [1/2]
UPDATE job_locks SET expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? WHERE id = ? AND holder = ? AND fence = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) RETURNING expires_at;

-- lease refresh max_holders=2 (upsert) [2/2]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < ? THEN ? ELSE expires_at END WHERE id = ? AND holder = ?;

-- lease release max_holders=2 (upsert): a place left [1/2]
DELETE FROM job_locks WHERE id = ? AND holder = ? AND fence = ?;

-- lease release max_holders=2 (upsert): a place left [2/2]
DELETE FROM job_locks WHERE id = ? AND holder = ? AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (?, ?) AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)) AS live_places);

-- lease release max_holders=2 (upsert): the last place [1/2]
DELETE FROM job_locks WHERE id = ? AND holder = ? AND fence = ?;

-- lease release max_holders=2 (upsert): the last place [2/2]
DELETE FROM job_locks WHERE id = ? AND holder = ? AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (?, ?) AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)) AS live_places);

-- release: ours [1/2]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- release: ours [2/2]
DELETE FROM job_locks WHERE id = ? AND holder = ?;

-- release: not ours
DELETE FROM job_locks WHERE id = ? AND holder = ?;

-- refresh
UPDATE job_locks SET expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? WHERE id = ? AND holder = ? RETURNING expires_at;

-- peek
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id = ?;

-- now_ms
SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- insert [1/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) RETURNING fence, acquired_at, expires_at;

-- insert [2/2]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id = ?;

-- update holder=
UPDATE job_locks SET fence = CASE WHEN holder = ? THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END, holder = ? WHERE id = ?;

-- update ttl=
UPDATE job_locks SET expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? WHERE id = ?;

-- list all
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks ORDER BY id;

-- count all
SELECT COUNT(*) FROM job_locks;

-- iter_locks all (pages of 1) [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id > ? ORDER BY id LIMIT ?;

-- iter_locks all (pages of 1) [2/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id > ? ORDER BY id LIMIT ?;

-- iter_locks all (pages of 1) [3/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id > ? ORDER BY id LIMIT ?;

-- iter_locks all (pages of 1) [4/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id > ? ORDER BY id LIMIT ?;

-- list live
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ORDER BY id;

-- count live
SELECT COUNT(*) FROM job_locks WHERE expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- iter_locks live (pages of 1) [1/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id > ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ORDER BY id LIMIT ?;

-- iter_locks live (pages of 1) [2/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id > ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ORDER BY id LIMIT ?;

-- iter_locks live (pages of 1) [3/3]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id > ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ORDER BY id LIMIT ?;

-- list expired
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ORDER BY id;

-- count expired
SELECT COUNT(*) FROM job_locks WHERE expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- iter_locks expired (pages of 1) [1/2]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id > ? AND expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ORDER BY id LIMIT ?;

-- iter_locks expired (pages of 1) [2/2]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id > ? AND expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ORDER BY id LIMIT ?;

-- prune dry_run
SELECT COUNT(*) FROM job_locks WHERE expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ?;

-- prune (batches of 1) [1/4]
SELECT id FROM job_locks WHERE id > ? AND expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ? ORDER BY id LIMIT 1 OFFSET ?;

-- prune (batches of 1) [2/4]
DELETE FROM job_locks WHERE id > ? AND id <= ? AND expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ?;

-- prune (batches of 1) [3/4]
SELECT id FROM job_locks WHERE id > ? AND expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ? ORDER BY id LIMIT 1 OFFSET ?;

-- prune (batches of 1) [4/4]
DELETE FROM job_locks WHERE id > ? AND expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ?;

-- delete
DELETE FROM job_locks WHERE id = ?;

-- try_lease
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- lease ensure_held
SELECT 1 FROM job_locks WHERE id = ? AND holder = ? AND fence = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- lease refresh
UPDATE job_locks SET expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? WHERE id = ? AND holder = ? AND fence = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) RETURNING expires_at;

-- lease refresh min_hold=
UPDATE job_locks SET expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? WHERE id = ? AND holder = ? AND fence = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) RETURNING expires_at;

-- lease release min_hold=
UPDATE job_locks SET expires_at = MAX(acquired_at + ?, ?) WHERE id = ? AND holder = ? AND fence = ? AND MAX(acquired_at + ?, ?) > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- lease release
DELETE FROM job_locks WHERE id = ? AND holder = ? AND fence = ?;

-- try_lease liveness=session: the first (sets up the registry) [1/3]
CREATE TABLE IF NOT EXISTS job_locks_live (id INTEGER PRIMARY KEY, lock_key TEXT NOT NULL UNIQUE, fence INTEGER);

-- try_lease liveness=session: the first (sets up the registry) [2/3]
INSERT OR IGNORE INTO job_locks_live (lock_key) VALUES (?);

-- try_lease liveness=session: the first (sets up the registry) [3/3]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease liveness=session [1/5]
SELECT id FROM job_locks_live WHERE lock_key = ?;

-- try_lease liveness=session [2/5]
INSERT OR IGNORE INTO job_locks_live (lock_key) VALUES (?);

-- try_lease liveness=session [3/5]
SELECT id FROM job_locks_live WHERE lock_key = ?;

-- try_lease liveness=session [4/5]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease liveness=session [5/5]
UPDATE job_locks_live SET fence = ? WHERE id = ?;

-- try_lease liveness=session: taken
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- lease release liveness=session
DELETE FROM job_locks WHERE id = ? AND holder = ? AND fence = ?;

-- try_lease record=True: the first (creates the ledger) [1/5]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease record=True: the first (creates the ledger) [2/5]
CREATE TABLE job_runs (
	id INTEGER NOT NULL, 
	"key" VARCHAR(512) NOT NULL, 
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

-- try_lease record=True: the first (creates the ledger) [3/5]
CREATE INDEX job_runs_key_ix ON job_runs ("key", started_at);

-- try_lease record=True: the first (creates the ledger) [4/5]
CREATE INDEX job_runs_start_ix ON job_runs (started_at);

-- try_lease record=True: the first (creates the ledger) [5/5]
INSERT INTO job_runs ("key", slot, schedule, timezone, holder, host, pid, token, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER));

-- try_lease record=True [1/2]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease record=True [2/2]
INSERT INTO job_runs ("key", slot, schedule, timezone, holder, host, pid, token, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER));

-- lease release record=True [1/2]
DELETE FROM job_locks WHERE id = ? AND holder = ? AND fence = ?;

-- lease release record=True [2/2]
UPDATE job_runs SET ended_at=CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), duration_ms=(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - job_runs.started_at), outcome=?, error=? WHERE job_runs.id = ?;

-- try_lease record='all': taken [1/3]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease record='all': taken [2/3]
INSERT INTO job_locks AS cur (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder AND cur.expires_at > excluded.acquired_at THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder RETURNING fence, acquired_at, expires_at;

-- try_lease record='all': taken [3/3]
INSERT INTO job_runs ("key", slot, schedule, timezone, holder, host, pid, token, started_at, ended_at, duration_ms, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), ?, ?);

-- runs [1/3]
SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS anon_1;

-- runs [2/3]
PRAGMA main.table_info("job_runs");

-- runs [3/3]
SELECT job_runs.id, job_runs."key", job_runs.slot, job_runs.schedule, job_runs.timezone, job_runs.holder, job_runs.host, job_runs.pid, job_runs.token, job_runs.started_at, job_runs.ended_at, job_runs.duration_ms, job_runs.outcome, job_runs.error 
FROM job_runs 
WHERE job_runs."key" = ? ORDER BY job_runs.started_at DESC, job_runs.id DESC
 LIMIT ? OFFSET ?;

-- runs (every key) [1/3]
SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS anon_1;

-- runs (every key) [2/3]
PRAGMA main.table_info("job_runs");

-- runs (every key) [3/3]
SELECT job_runs.id, job_runs."key", job_runs.slot, job_runs.schedule, job_runs.timezone, job_runs.holder, job_runs.host, job_runs.pid, job_runs.token, job_runs.started_at, job_runs.ended_at, job_runs.duration_ms, job_runs.outcome, job_runs.error 
FROM job_runs ORDER BY job_runs.started_at DESC, job_runs.id DESC
 LIMIT ? OFFSET ?;

-- prune_runs [1/3]
PRAGMA main.table_info("job_runs");

-- prune_runs [2/3]
SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS anon_1;

-- prune_runs [3/3]
SELECT job_runs.id 
FROM job_runs 
WHERE job_runs.started_at < ? ORDER BY job_runs.id
 LIMIT ? OFFSET ?;

-- create the table (update_insert) [1/4]
CREATE TABLE IF NOT EXISTS "job_locks_fence" (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);

-- create the table (update_insert) [2/4]
INSERT OR IGNORE INTO "job_locks_fence" (id, value) SELECT 1, COALESCE(MAX(fence), 0) FROM "job_locks";

-- create the table (update_insert) [3/4]
CREATE TRIGGER IF NOT EXISTS "job_locks_fence_ins" AFTER INSERT ON "job_locks" BEGIN UPDATE "job_locks_fence" SET value = NEW.fence WHERE value < NEW.fence; END;

-- create the table (update_insert) [4/4]
CREATE TRIGGER IF NOT EXISTS "job_locks_fence_upd" AFTER UPDATE OF fence ON "job_locks" WHEN NEW.fence > OLD.fence BEGIN UPDATE "job_locks_fence" SET value = NEW.fence WHERE value < NEW.fence; END;

-- acquire (update_insert): a free key [1/2]
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) RETURNING fence, acquired_at, expires_at;

-- acquire (update_insert): a free key [2/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO NOTHING RETURNING fence, acquired_at, expires_at;

-- acquire (update_insert): re-entrant
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) RETURNING fence, acquired_at, expires_at;

-- acquire (update_insert): taken [1/2]
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) RETURNING fence, acquired_at, expires_at;

-- acquire (update_insert): taken [2/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO NOTHING RETURNING fence, acquired_at, expires_at;

-- acquire (update_insert): an expired row
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) RETURNING fence, acquired_at, expires_at;

-- try_lease schedule= (update_insert): a new slot [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id = ?;

-- try_lease schedule= (update_insert): a new slot [2/4]
SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- try_lease schedule= (update_insert): a new slot [3/4]
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) AND acquired_at < ? RETURNING fence, acquired_at, expires_at;

-- try_lease schedule= (update_insert): a new slot [4/4]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO NOTHING RETURNING fence, acquired_at, expires_at;

-- lease release schedule= (update_insert)
UPDATE job_locks SET expires_at = MAX(acquired_at + ?, ?) WHERE id = ? AND holder = ? AND fence = ? AND MAX(acquired_at + ?, ?) > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- try_lease schedule= (update_insert): the slot ran already
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id = ?;

-- try_lease max_holders=2 (update_insert): the first place [1/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id IN (?, ?, ?);

-- try_lease max_holders=2 (update_insert): the first place [2/7]
UPDATE job_locks SET acquired_at = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN acquired_at ELSE CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) END, expires_at = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? THEN expires_at ELSE CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? END, holder = ?, fence = 0 WHERE id = ? AND (holder = ? OR expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER));

-- try_lease max_holders=2 (update_insert): the first place [3/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, 0) ON CONFLICT (id) DO NOTHING;

-- try_lease max_holders=2 (update_insert): the first place [4/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id IN (?, ?, ?);

-- try_lease max_holders=2 (update_insert): the first place [5/7]
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (update_insert): the first place [6/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO NOTHING RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (update_insert): the first place [7/7]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < ? THEN ? ELSE expires_at END WHERE id = ? AND holder = ?;

-- try_lease max_holders=2 (update_insert): the second place [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id IN (?, ?, ?);

-- try_lease max_holders=2 (update_insert): the second place [2/4]
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (update_insert): the second place [3/4]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) ON CONFLICT (id) DO NOTHING RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (update_insert): the second place [4/4]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < ? THEN ? ELSE expires_at END WHERE id = ? AND holder = ?;

-- try_lease max_holders=2 (update_insert): refused
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id IN (?, ?, ?);

-- lease refresh max_holders=2 (update_insert) [1/2]
UPDATE job_locks SET expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? WHERE id = ? AND holder = ? AND fence = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) RETURNING expires_at;

-- lease refresh max_holders=2 (update_insert) [2/2]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < ? THEN ? ELSE expires_at END WHERE id = ? AND holder = ?;

-- lease release max_holders=2 (update_insert): a place left [1/2]
DELETE FROM job_locks WHERE id = ? AND holder = ? AND fence = ?;

-- lease release max_holders=2 (update_insert): a place left [2/2]
DELETE FROM job_locks WHERE id = ? AND holder = ? AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (?, ?) AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)) AS live_places);

-- lease release max_holders=2 (update_insert): the last place [1/2]
DELETE FROM job_locks WHERE id = ? AND holder = ? AND fence = ?;

-- lease release max_holders=2 (update_insert): the last place [2/2]
DELETE FROM job_locks WHERE id = ? AND holder = ? AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (?, ?) AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)) AS live_places);

-- create the table (portable) [1/4]
CREATE TABLE IF NOT EXISTS "job_locks_fence" (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);

-- create the table (portable) [2/4]
INSERT OR IGNORE INTO "job_locks_fence" (id, value) SELECT 1, COALESCE(MAX(fence), 0) FROM "job_locks";

-- create the table (portable) [3/4]
CREATE TRIGGER IF NOT EXISTS "job_locks_fence_ins" AFTER INSERT ON "job_locks" BEGIN UPDATE "job_locks_fence" SET value = NEW.fence WHERE value < NEW.fence; END;

-- create the table (portable) [4/4]
CREATE TRIGGER IF NOT EXISTS "job_locks_fence_upd" AFTER UPDATE OF fence ON "job_locks" WHEN NEW.fence > OLD.fence BEGIN UPDATE "job_locks_fence" SET value = NEW.fence WHERE value < NEW.fence; END;

-- acquire (portable): a free key [1/2]
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) RETURNING fence, acquired_at, expires_at;

-- acquire (portable): a free key [2/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) RETURNING fence, acquired_at, expires_at;

-- acquire (portable): re-entrant
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) RETURNING fence, acquired_at, expires_at;

-- acquire (portable): taken [1/2]
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) RETURNING fence, acquired_at, expires_at;

-- acquire (portable): taken [2/2]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) RETURNING fence, acquired_at, expires_at;

-- acquire (portable): an expired row
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) RETURNING fence, acquired_at, expires_at;

-- try_lease schedule= (portable): a new slot [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id = ?;

-- try_lease schedule= (portable): a new slot [2/4]
SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- try_lease schedule= (portable): a new slot [3/4]
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) AND acquired_at < ? RETURNING fence, acquired_at, expires_at;

-- try_lease schedule= (portable): a new slot [4/4]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) RETURNING fence, acquired_at, expires_at;

-- lease release schedule= (portable)
UPDATE job_locks SET expires_at = MAX(acquired_at + ?, ?) WHERE id = ? AND holder = ? AND fence = ? AND MAX(acquired_at + ?, ?) > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- try_lease schedule= (portable): the slot ran already
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id = ?;

-- try_lease max_holders=2 (portable): the first place [1/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id IN (?, ?, ?);

-- try_lease max_holders=2 (portable): the first place [2/7]
UPDATE job_locks SET acquired_at = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN acquired_at ELSE CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) END, expires_at = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? THEN expires_at ELSE CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? END, holder = ?, fence = 0 WHERE id = ? AND (holder = ? OR expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER));

-- try_lease max_holders=2 (portable): the first place [3/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, 0) ON CONFLICT (id) DO NOTHING;

-- try_lease max_holders=2 (portable): the first place [4/7]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id IN (?, ?, ?);

-- try_lease max_holders=2 (portable): the first place [5/7]
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (portable): the first place [6/7]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (portable): the first place [7/7]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < ? THEN ? ELSE expires_at END WHERE id = ? AND holder = ?;

-- try_lease max_holders=2 (portable): the second place [1/4]
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id IN (?, ?, ?);

-- try_lease max_holders=2 (portable): the second place [2/4]
UPDATE job_locks SET holder = ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, fence = CASE WHEN holder = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN fence ELSE (SELECT value FROM "job_locks_fence") + 1 END WHERE id = ? AND (expires_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) OR holder = ?) RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (portable): the second place [3/4]
INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, (SELECT value FROM "job_locks_fence") + 1) RETURNING fence, acquired_at, expires_at;

-- try_lease max_holders=2 (portable): the second place [4/4]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < ? THEN ? ELSE expires_at END WHERE id = ? AND holder = ?;

-- try_lease max_holders=2 (portable): refused
SELECT id, holder, acquired_at, expires_at, fence, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now_ms FROM job_locks WHERE id IN (?, ?, ?);

-- lease refresh max_holders=2 (portable) [1/2]
UPDATE job_locks SET expires_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? WHERE id = ? AND holder = ? AND fence = ? AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) RETURNING expires_at;

-- lease refresh max_holders=2 (portable) [2/2]
UPDATE job_locks SET expires_at = CASE WHEN expires_at < ? THEN ? ELSE expires_at END WHERE id = ? AND holder = ?;

-- lease release max_holders=2 (portable): a place left [1/2]
DELETE FROM job_locks WHERE id = ? AND holder = ? AND fence = ?;

-- lease release max_holders=2 (portable): a place left [2/2]
DELETE FROM job_locks WHERE id = ? AND holder = ? AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (?, ?) AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)) AS live_places);

-- lease release max_holders=2 (portable): the last place [1/2]
DELETE FROM job_locks WHERE id = ? AND holder = ? AND fence = ?;

-- lease release max_holders=2 (portable): the last place [2/2]
DELETE FROM job_locks WHERE id = ? AND holder = ? AND NOT EXISTS (SELECT 1 FROM (SELECT id FROM job_locks WHERE id IN (?, ?) AND expires_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)) AS live_places);

-- init --sql: the lock table [1/5]
CREATE TABLE job_locks (
	id VARCHAR(512) NOT NULL, 
	holder VARCHAR(255) NOT NULL, 
	acquired_at BIGINT NOT NULL, 
	expires_at BIGINT NOT NULL, 
	fence BIGINT NOT NULL, 
	PRIMARY KEY (id)
);

-- init --sql: the lock table [2/5]
CREATE TABLE IF NOT EXISTS "job_locks_fence" (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);

-- init --sql: the lock table [3/5]
INSERT OR IGNORE INTO "job_locks_fence" (id, value) SELECT 1, COALESCE(MAX(fence), 0) FROM "job_locks";

-- init --sql: the lock table [4/5]
CREATE TRIGGER IF NOT EXISTS "job_locks_fence_ins" AFTER INSERT ON "job_locks" BEGIN UPDATE "job_locks_fence" SET value = NEW.fence WHERE value < NEW.fence; END;

-- init --sql: the lock table [5/5]
CREATE TRIGGER IF NOT EXISTS "job_locks_fence_upd" AFTER UPDATE OF fence ON "job_locks" WHEN NEW.fence > OLD.fence BEGIN UPDATE "job_locks_fence" SET value = NEW.fence WHERE value < NEW.fence; END;

-- the run ledger's table, offline [1/3]
CREATE TABLE job_runs (
	id INTEGER NOT NULL, 
	"key" VARCHAR(512) NOT NULL, 
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

-- the run ledger's table, offline [2/3]
CREATE INDEX job_runs_key_ix ON job_runs ("key", started_at);

-- the run ledger's table, offline [3/3]
CREATE INDEX job_runs_start_ix ON job_runs (started_at);
