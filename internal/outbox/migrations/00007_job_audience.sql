-- +goose Up
-- One RUNNING job per audience, not only per schedule (internal/schedule): a
-- campaign to a topic and the daily run over the same topic on the same
-- channel would otherwise materialise side by side and send twice.
-- audience_key names (channel, topic) or (channel, the query's md5); the
-- partial unique index makes "at most one RUNNING" hold against any race
-- between instances, and a job whose audience is busy waits PENDING.
ALTER TABLE jobs ADD COLUMN audience_key text GENERATED ALWAYS AS (
    channel || ':' || CASE WHEN coalesce(audience ->> 'topic', '') <> ''
                           THEN 'topic:' || (audience ->> 'topic')
                           ELSE 'query:' || md5(coalesce(audience ->> 'query', '')) END) STORED;

-- A database upgraded while two jobs over one audience were RUNNING: the
-- younger goes back to PENDING (its cursor kept). Its owner's next chunk or
-- heartbeat finds it no longer RUNNING and stops without committing; the
-- rows it already made are kept (their idempotency keys stop a re-run from
-- making them twice).
UPDATE jobs j SET state = 'PENDING', owner = NULL, heartbeat_at = NULL, updated_at = now()
WHERE j.state = 'RUNNING' AND EXISTS (
    SELECT 1 FROM jobs o WHERE o.state = 'RUNNING' AND o.audience_key = j.audience_key AND o.id < j.id);

DROP INDEX jobs_one_running_per_schedule;
CREATE UNIQUE INDEX jobs_one_running_per_audience ON jobs (audience_key) WHERE state = 'RUNNING';

-- rerun: 0 for a schedule's run of a fire time; an operator's forced re-run
-- of the same fire time (`schedules run --fire-time T --force`) is 1, 2, …
-- and materialises under its own idempotency keys. Still one row per
-- (schedule, fire time, rerun): instances racing to create a run create one.
ALTER TABLE jobs ADD COLUMN rerun integer NOT NULL DEFAULT 0 CHECK (rerun >= 0);
ALTER TABLE jobs DROP CONSTRAINT jobs_schedule_fire_time_key;
ALTER TABLE jobs ADD CONSTRAINT jobs_schedule_fire_time_rerun_key UNIQUE (schedule, fire_time, rerun);

-- content_key: a job that names its content ("quiz-2026-11-25") makes its
-- notifications' idempotency keys "content:<channel>:<content_key>:<recipient>",
-- so a recipient in two overlapping audiences for the same content (the
-- daily run over one topic, a campaign over another) is sent once.
ALTER TABLE jobs ADD COLUMN content_key text;

-- +goose Down
ALTER TABLE jobs DROP COLUMN content_key;
DELETE FROM jobs WHERE rerun > 0;
ALTER TABLE jobs DROP CONSTRAINT jobs_schedule_fire_time_rerun_key;
ALTER TABLE jobs ADD CONSTRAINT jobs_schedule_fire_time_key UNIQUE (schedule, fire_time);
ALTER TABLE jobs DROP COLUMN rerun;
DROP INDEX jobs_one_running_per_audience;
CREATE UNIQUE INDEX jobs_one_running_per_schedule ON jobs (schedule) WHERE state = 'RUNNING';
ALTER TABLE jobs DROP COLUMN audience_key;
