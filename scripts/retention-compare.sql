-- Retention mechanisms compared (docs/performance.md, Retention):
--   psql -h 127.0.0.1 -U postgres -d notifyd_test -f scripts/retention-compare.sql
-- In a throw-away schema, 1,000,000 finished rows shaped like notifications
-- (one day of them) are removed two ways: a batched DELETE by primary key
-- (what outbox.Retain does, 1,000 rows per statement) from a plain table, and
-- DETACH + DROP of the day's partition from a table partitioned by day.
\timing on
DROP SCHEMA IF EXISTS retention_compare CASCADE;
CREATE SCHEMA retention_compare;
SET search_path = retention_compare;

CREATE TABLE plain (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel text COLLATE "C" NOT NULL, recipient text NOT NULL, payload jsonb NOT NULL,
    idempotency_key text COLLATE "C", status text NOT NULL, created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL);
CREATE UNIQUE INDEX plain_key ON plain (idempotency_key) WHERE idempotency_key IS NOT NULL;

-- A partitioned table's unique index must include the partition key: the
-- idempotency key would be unique only within a day.
CREATE TABLE parted (
    id bigint GENERATED ALWAYS AS IDENTITY,
    channel text COLLATE "C" NOT NULL, recipient text NOT NULL, payload jsonb NOT NULL,
    idempotency_key text COLLATE "C", status text NOT NULL, created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
    PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at);
CREATE TABLE parted_old PARTITION OF parted FOR VALUES FROM ('2026-01-01') TO ('2026-01-02');
CREATE TABLE parted_new PARTITION OF parted FOR VALUES FROM ('2026-01-02') TO ('2027-01-01');
CREATE UNIQUE INDEX parted_key ON parted (idempotency_key, created_at) WHERE idempotency_key IS NOT NULL;

INSERT INTO plain (channel, recipient, payload, idempotency_key, status, created_at, updated_at)
SELECT 'quiz', 'user-' || i, '{"text":"yesterday''s quiz"}', 'k' || i, 'SENT',
       '2026-01-01'::timestamptz + i * interval '80 milliseconds', '2026-01-01'::timestamptz + i * interval '80 milliseconds'
FROM generate_series(1, 1000000) i;
INSERT INTO parted (channel, recipient, payload, idempotency_key, status, created_at, updated_at)
SELECT channel, recipient, payload, idempotency_key, status, created_at, updated_at FROM plain;
VACUUM ANALYZE plain, parted;

\echo 'batched DELETE by primary key, 1,000 rows per statement (1,000 statements):'
SELECT now() AS t0 \gset
DO $$
DECLARE c bigint := 0; n int;
BEGIN
  LOOP
    DELETE FROM plain WHERE id IN (SELECT id FROM plain WHERE id > c ORDER BY id LIMIT 1000) ;
    GET DIAGNOSTICS n = ROW_COUNT;
    EXIT WHEN n = 0;
    c := c + 1000;
  END LOOP;
END $$;
SELECT pg_size_pretty(pg_relation_size('plain')) AS plain_heap_after_delete;

\echo 'DETACH + DROP of the day partition:'
ALTER TABLE parted DETACH PARTITION parted_old;
DROP TABLE parted_old;

DROP SCHEMA retention_compare CASCADE;
