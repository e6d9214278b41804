-- +goose Up
-- Subscribers, topics, schedule runs and bulk jobs (DESIGN §6), owned by
-- internal/schedule.

-- A subscriber: an application's user as notifyd knows it. addresses maps a
-- channel name to the recipient on that channel ({"daily-quiz": "<kakao uuid>",
-- "hooks": "https://…"}); attributes are the application's own data, given to
-- payload templates as .data for topic audiences.
CREATE TABLE subscribers (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    external_id text        NOT NULL UNIQUE,
    addresses   jsonb       NOT NULL DEFAULT '{}',
    attributes  jsonb       NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Topic membership. The primary key is also the keyset order a topic audience
-- is read in: WHERE topic = $1 AND subscriber_id > $cursor ORDER BY subscriber_id.
CREATE TABLE topic_subscriptions (
    topic         text        NOT NULL,
    subscriber_id bigint      NOT NULL REFERENCES subscribers (id) ON DELETE CASCADE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, subscriber_id)
);
-- A subscriber's topics, and the cascade on delete.
CREATE INDEX topic_subscriptions_subscriber ON topic_subscriptions (subscriber_id);

-- When an instance first saw each configured schedule: fire times before it
-- are not "missed" (a schedule added at 08:05 does not fire its 08:00).
CREATE TABLE schedules (
    name          text PRIMARY KEY,
    first_seen_at timestamptz NOT NULL
);

-- Bulk jobs: schedule runs and campaigns. A job carries everything needed to
-- run it (channel, audience, payload template), so whichever instance claims
-- or takes it over materialises the same rows.
CREATE TABLE jobs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind         text        NOT NULL CHECK (kind IN ('schedule', 'campaign')),
    schedule     text,                 -- schedule name for runs, NULL for campaigns
    fire_time    timestamptz,          -- the run's fire time, NULL for campaigns
    timezone     text        NOT NULL DEFAULT 'UTC',
    channel      text        NOT NULL,
    audience     jsonb       NOT NULL, -- {"topic": …} or {"query": …, "key": …}
    payload      jsonb       NOT NULL, -- the template, rendered per recipient
    state        text        NOT NULL DEFAULT 'PENDING'
                 CHECK (state IN ('PENDING', 'RUNNING', 'DONE', 'FAILED', 'CANCELLED', 'SKIPPED')),
    cursor       text,                 -- keyset position of the last materialised recipient, as text
    done         bigint      NOT NULL DEFAULT 0,
    skipped      bigint      NOT NULL DEFAULT 0,
    total        bigint,               -- audience size, counted when the job first starts
    owner        text,
    heartbeat_at timestamptz,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'schedule') = (schedule IS NOT NULL AND fire_time IS NOT NULL)),
    -- One run per (schedule, fire time), however many instances evaluate it.
    UNIQUE (schedule, fire_time)
);

-- At most one RUNNING job per schedule; campaigns (schedule NULL) are exempt.
CREATE UNIQUE INDEX jobs_one_running_per_schedule ON jobs (schedule) WHERE state = 'RUNNING';

-- Claim and takeover scan only the live jobs.
CREATE INDEX jobs_live ON jobs (id) WHERE state IN ('PENDING', 'RUNNING');

-- +goose Down
DROP TABLE jobs;
DROP TABLE schedules;
DROP TABLE topic_subscriptions;
DROP TABLE subscribers;
