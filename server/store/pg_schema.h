#pragma once
/// The PostgreSQL job store's schema (internal to server/store): the tables
/// of the SQLite layout plus the leader row, its history, and the fence.

namespace hetbench::server::pg {

/// 2: sample and power batches compressed with lz4.
/// 3: batches kept in their row (storage MAIN); the fence checked once per
///    transaction and epoch, not once per row.
/// 4: a batch that fits a page is stored as it is, not compressed
///    (toast_tuple_target at its maximum).
/// 5: the fence triggers fire only for a row whose epoch this transaction
///    has not checked (a WHEN clause), not on every row.
/// 6: the batches of a COPY keep their bytes packed in sample_pieces (a
///    group's bytes in pieces of kSamplePieceBytes); their rows name where.
/// 7: sample_pieces is not vacuumed after inserts (pruning vacuums it), and
///    ANALYZE samples 3,000 of its rows and keeps no statistics of the bytes.
inline constexpr int kSchemaVersion = 7;

/// A piece of a group's packed sample bytes: one piece fills a page (8 KB
/// less the page's and the row's headers). The read statement (load_batches)
/// spells it too; stored data depends on it, so it changes only with a new
/// schema that converts them.
inline constexpr int kSamplePieceBytes = 8000;

/// Advisory lock keys: the leader's session lock and the schema creation's
/// transaction lock ("hetb" and "hets" as integers).
inline constexpr long long kLeaderLockKey = 0x68657462;
inline constexpr long long kSchemaLockKey = 0x68657473;

inline constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS hetbench_meta (
  key text PRIMARY KEY,
  value text NOT NULL
);
-- One row: the current leader's epoch. Bumped by each new leader.
CREATE TABLE IF NOT EXISTS hetbench_leader (
  id integer PRIMARY KEY CHECK (id = 1),
  epoch bigint NOT NULL,
  holder text NOT NULL,
  since timestamptz NOT NULL DEFAULT now()
);
INSERT INTO hetbench_leader (id, epoch, holder) VALUES (1, 0, '') ON CONFLICT (id) DO NOTHING;
-- Every epoch ever granted, for operators and the failover test.
CREATE TABLE IF NOT EXISTS hetbench_leaders (
  epoch bigint PRIMARY KEY,
  holder text NOT NULL,
  since timestamptz NOT NULL DEFAULT now()
);

-- Refuses a write of a deposed leader. The share lock on the leader row
-- makes a new leader's epoch bump wait for this transaction, so every
-- commit of epoch E comes before epoch E+1 exists. The lock is held to the
-- transaction's end, so a passed check is remembered for the transaction
-- (a transaction-local setting, undone with it or its savepoint): the
-- trigger on every row checks again only for an epoch not yet checked. It
-- fences a deposed coordinator, not a client that forges the setting.
CREATE OR REPLACE FUNCTION hetbench_fence(e bigint) RETURNS void AS $$
DECLARE
  current_epoch bigint;
BEGIN
  SELECT epoch INTO current_epoch FROM hetbench_leader WHERE id = 1 FOR SHARE;
  IF current_epoch IS DISTINCT FROM e THEN
    RAISE EXCEPTION 'fenced: this coordinator writes with leader epoch % but the current epoch is %', e, current_epoch
      USING ERRCODE = 'HB001';
  END IF;
  PERFORM set_config('hetbench.fenced_epoch', e::text, true);
END $$ LANGUAGE plpgsql;
CREATE OR REPLACE FUNCTION hetbench_check_epoch() RETURNS trigger AS $$
BEGIN
  IF current_setting('hetbench.fenced_epoch', true) IS DISTINCT FROM NEW.epoch::text THEN
    PERFORM hetbench_fence(NEW.epoch);
  END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;

CREATE TABLE IF NOT EXISTS jobs (
  number bigint PRIMARY KEY,       -- "job-000042" is 42
  id text NOT NULL UNIQUE,
  created_unix_seconds double precision NOT NULL,
  finished_unix_seconds double precision NOT NULL DEFAULT 0,
  state integer NOT NULL,
  request_id text UNIQUE,          -- idempotency key of its submit; NULL when none
  models text NOT NULL,            -- ",mlp,cnn,": for listing filters
  kinds text NOT NULL,             -- ",cpu,gpu,"; ",any," for a target of any kind
  raw_pruned boolean NOT NULL DEFAULT false,
  epoch bigint NOT NULL,           -- the leader epoch of its last write
  header bytea NOT NULL            -- hetbench.v1.Job without its tasks
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
CREATE INDEX IF NOT EXISTS jobs_to_prune ON jobs(finished_unix_seconds) WHERE NOT raw_pruned AND state >= 3;
CREATE TABLE IF NOT EXISTS tasks (
  job_number bigint NOT NULL,
  idx integer NOT NULL,
  state integer NOT NULL,
  epoch bigint NOT NULL,
  task bytea NOT NULL,             -- hetbench.v1.Task
  PRIMARY KEY (job_number, idx)
);
CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks(state);
CREATE TABLE IF NOT EXISTS sample_batches (
  task_id text COLLATE "C" NOT NULL,  -- "C": a job's tasks are one key range
  attempt integer NOT NULL,
  seq bigint NOT NULL,
  phase integer NOT NULL,
  sample_count integer NOT NULL,
  epoch bigint NOT NULL,
  batch bytea,                     -- the columns, compact (common/sample_codec.h); or NULL and:
  grp bigint,                      -- the sample_groups row whose pieces hold them,
  grp_offset integer,              -- from this byte of the group's bytes,
  grp_bytes integer,               -- this long
  PRIMARY KEY (task_id, attempt, seq)
);
CREATE TABLE IF NOT EXISTS power_batches (
  task_id text COLLATE "C" NOT NULL,
  attempt integer NOT NULL,
  seq bigint NOT NULL,
  sensor text NOT NULL,
  reading_count integer NOT NULL,
  epoch bigint NOT NULL,
  batch bytea NOT NULL,            -- hetbench.v1.PowerBatch
  PRIMARY KEY (task_id, attempt, seq)
);
-- Batches compress with lz4 rather than the default pglz: the coordinator's
-- ingest into PostgreSQL went from 0.57-0.70 to 0.91 of SQLite's in
-- bench_ingest (docs/postgres-ingest.md). lz4 needs PostgreSQL 14 built with it
-- (Debian's is); elsewhere the default stays. Set only where it is not yet,
-- so a database already converted takes no lock for it.
DO $$
DECLARE
  done integer;
BEGIN
  IF current_setting('server_version_num')::integer >= 140000 THEN
    EXECUTE 'SELECT count(*) FROM pg_attribute WHERE attname = ''batch'' AND attcompression = ''l'' AND attrelid IN '
            '(''sample_batches''::regclass, ''power_batches''::regclass)' INTO done;
    IF done < 2 THEN
      EXECUTE 'ALTER TABLE sample_batches ALTER COLUMN batch SET COMPRESSION lz4';
      EXECUTE 'ALTER TABLE power_batches ALTER COLUMN batch SET COMPRESSION lz4';
    END IF;
  END IF;
EXCEPTION WHEN feature_not_supported THEN
  NULL;  -- built without lz4
END $$;
-- Schema 3: a batch stays in its row (storage MAIN) instead of in the TOAST
-- table, chunked and indexed; it goes there only when it does not fit a
-- page, compressed. A real agent's 1,000-step batch (~5 KB) fits. With the fence remembered, PostgreSQL's CPU per stored sample is
-- about 0.6-0.8 of what it was (docs/postgres-ingest.md, bench/pg_ingest.sh).
DO $$
BEGIN
  IF (SELECT count(*) FROM pg_attribute WHERE attname = 'batch' AND attstorage = 'm' AND attrelid IN
      ('sample_batches'::regclass, 'power_batches'::regclass)) < 2 THEN
    ALTER TABLE sample_batches ALTER COLUMN batch SET STORAGE MAIN;
    ALTER TABLE power_batches ALTER COLUMN batch SET STORAGE MAIN;
  END IF;
END $$;
-- Schema 4: PostgreSQL compresses a row longer than toast_tuple_target
-- (2 KB by default); at its maximum (8160) a batch that fits a page is
-- stored as it is. A real agent's batch is varints already (lz4 took 5,009
-- bytes to ~4,100, still one row to a page) and compressing it was ~22% of
-- the database's CPU in bench/pg_ingest.sh. A longer batch is compressed,
-- and stored out of line only when that does not make it fit.
DO $$
BEGIN
  IF (SELECT count(*) FROM pg_class WHERE oid IN ('sample_batches'::regclass, 'power_batches'::regclass) AND
      reloptions @> ARRAY['toast_tuple_target=8160']) < 2 THEN
    ALTER TABLE sample_batches SET (toast_tuple_target = 8160);
    ALTER TABLE power_batches SET (toast_tuple_target = 8160);
  END IF;
END $$;
-- Schema 6: full pages. A 1,000-step batch (~5 KB) in its row takes a page
-- of its own, and PostgreSQL's work per page (extending the table,
-- writing the page out) was about half its CPU in bench/pg_ingest.sh. A COPY
-- of many batches (server/store/pg_batches.cc) stores their bytes as one
-- group, cut into pieces that each fill a page; each batch's row names its
-- group, offset and length. Batches written one at a time, and rows written
-- before, keep their bytes in the row. A group's rows are freed when its last
-- batch is pruned (live counts them). The pieces carry no epoch: a group's
-- pieces are written in the transaction that inserts its fenced row.
CREATE SEQUENCE IF NOT EXISTS sample_group_ids INCREMENT BY 1024;  -- a writer takes 1,024 ids at a time
CREATE TABLE IF NOT EXISTS sample_groups (
  grp bigint PRIMARY KEY,
  live integer NOT NULL,           -- its batches not pruned yet
  epoch bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS sample_pieces (
  grp bigint NOT NULL,
  idx integer NOT NULL,            -- bytes [idx * 8000, (idx + 1) * 8000) of the group's
  bytes bytea NOT NULL,
  PRIMARY KEY (grp, idx)
);
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'sample_batches'::regclass AND attname = 'grp') THEN
    ALTER TABLE sample_batches ALTER COLUMN batch DROP NOT NULL, ADD COLUMN grp bigint, ADD COLUMN grp_offset integer,
      ADD COLUMN grp_bytes integer;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'sample_batches_bytes_once') THEN
    -- Not validated on the rows already there (all have their bytes in the row).
    ALTER TABLE sample_batches ADD CONSTRAINT sample_batches_bytes_once
      CHECK (CASE WHEN batch IS NULL THEN grp IS NOT NULL AND COALESCE(grp_offset >= 0 AND grp_bytes > 0, false)
             ELSE grp IS NULL END) NOT VALID;
  END IF;
  IF (SELECT attstorage FROM pg_attribute WHERE attrelid = 'sample_pieces'::regclass AND attname = 'bytes') <> 'p' THEN
    ALTER TABLE sample_pieces ALTER COLUMN bytes SET STORAGE PLAIN;  -- a piece fits its page: never compressed
  END IF;
  -- Schema 7: pieces are written once and deleted by pruning, which is what
  -- vacuums them; a vacuum after inserts would read every new page and write
  -- it again (autovacuum was up to a fifth of PostgreSQL's CPU in
  -- bench/pg_ingest.sh). ANALYZE keeps no statistics of the bytes (nothing
  -- filters on them) and samples 3,000 pieces, not 30,000 (each read from a
  -- page of its own; reads go by the primary key).
  IF NOT COALESCE((SELECT reloptions @> ARRAY['autovacuum_vacuum_insert_threshold=-1'] FROM pg_class
                   WHERE oid = 'sample_pieces'::regclass), false) THEN
    ALTER TABLE sample_pieces SET (autovacuum_vacuum_insert_threshold = -1);
  END IF;
  IF (SELECT attstattarget FROM pg_attribute WHERE attrelid = 'sample_pieces'::regclass AND attname = 'bytes') <> 0 THEN
    ALTER TABLE sample_pieces ALTER COLUMN bytes SET STATISTICS 0, ALTER COLUMN grp SET STATISTICS 10,
      ALTER COLUMN idx SET STATISTICS 10;
  END IF;
END $$;
-- The fence triggers (below, after their tables). Schema 5: a trigger's
-- WHEN clause is hetbench_check_epoch's own test, evaluated without calling
-- the function (a PL/pgSQL call per row, ~5 % of a COPY of batches' CPU):
-- the function runs only for a row whose epoch the transaction has not checked.
CREATE TABLE IF NOT EXISTS device_health (
  agent_id text NOT NULL,
  device_id text NOT NULL,
  epoch bigint NOT NULL,
  health bytea NOT NULL,           -- hetbench.v1.DeviceHealth: its last validation that did not pass
  PRIMARY KEY (agent_id, device_id)
);
CREATE OR REPLACE TRIGGER device_health_fenced BEFORE INSERT OR UPDATE ON device_health
  FOR EACH ROW WHEN (current_setting('hetbench.fenced_epoch', true) IS DISTINCT FROM NEW.epoch::text)
  EXECUTE FUNCTION hetbench_check_epoch();
CREATE TABLE IF NOT EXISTS baselines (
  name text NOT NULL,
  version integer NOT NULL,
  created_unix_seconds double precision NOT NULL,
  epoch bigint NOT NULL,
  baseline bytea NOT NULL,         -- hetbench.v1.Baseline
  PRIMARY KEY (name, version)
);
CREATE OR REPLACE TRIGGER baselines_fenced BEFORE INSERT OR UPDATE ON baselines
  FOR EACH ROW WHEN (current_setting('hetbench.fenced_epoch', true) IS DISTINCT FROM NEW.epoch::text)
  EXECUTE FUNCTION hetbench_check_epoch();
CREATE OR REPLACE TRIGGER jobs_fenced BEFORE INSERT OR UPDATE ON jobs
  FOR EACH ROW WHEN (current_setting('hetbench.fenced_epoch', true) IS DISTINCT FROM NEW.epoch::text)
  EXECUTE FUNCTION hetbench_check_epoch();
CREATE OR REPLACE TRIGGER tasks_fenced BEFORE INSERT OR UPDATE ON tasks
  FOR EACH ROW WHEN (current_setting('hetbench.fenced_epoch', true) IS DISTINCT FROM NEW.epoch::text)
  EXECUTE FUNCTION hetbench_check_epoch();
CREATE OR REPLACE TRIGGER sample_batches_fenced BEFORE INSERT OR UPDATE ON sample_batches
  FOR EACH ROW WHEN (current_setting('hetbench.fenced_epoch', true) IS DISTINCT FROM NEW.epoch::text)
  EXECUTE FUNCTION hetbench_check_epoch();
CREATE OR REPLACE TRIGGER sample_groups_fenced BEFORE INSERT OR UPDATE ON sample_groups
  FOR EACH ROW WHEN (current_setting('hetbench.fenced_epoch', true) IS DISTINCT FROM NEW.epoch::text)
  EXECUTE FUNCTION hetbench_check_epoch();
CREATE OR REPLACE TRIGGER power_batches_fenced BEFORE INSERT OR UPDATE ON power_batches
  FOR EACH ROW WHEN (current_setting('hetbench.fenced_epoch', true) IS DISTINCT FROM NEW.epoch::text)
  EXECUTE FUNCTION hetbench_check_epoch();
)sql";

}  // namespace hetbench::server::pg
